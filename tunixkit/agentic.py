"""Agentic GRPO with a calculator tool (notebook 07), on tunix 0.1.7's agentic learner.

During a rollout the model may write ``<tool_call>{"name": "calculator", "arguments":
{"expression": "23 * 47"}}</tool_call>``; tunix's ``ToolEnvironment`` runs the tool
(:func:`tunixkit.calculator.calculate`: parsed, bounded, never ``eval``), its result comes back as
a user turn (``Tool returned result: 1081``), and the model answers. The episode's reward is the
answer's correctness, given by the environment at the end.

tunix 0.1.7 needs these workarounds (the subclasses and patches are in :mod:`tunixkit._compat`,
each with its test):

- the rollout must return log-probabilities (``RolloutConfig(return_logprobs=True)``) and the chat
  parser must be given (``chat_parser=None`` breaks): :func:`build`;
- ``ToolAgent`` reads the question from the batch as a 1-element array and writes its repr
  (``"['...']"``) into the prompt; :class:`CalculatorAgent` takes the text out;
- ``GemmaChatTemplateParser`` edits the conversation in place, prepending the system prompt to the
  first user turn again on every call: :class:`tunixkit._compat.CopyingGemmaParser` parses a copy;
- a tool call whose arguments are not a JSON object raises inside ``ToolEnvironment`` and ends
  ``train()``: :class:`CalculatorEnvironment` turns it into an error result for the model, so a
  malformed call costs the episode its reward, never the run;
- every episode calls the sampler alone, with the rollout config's one seed: the G episodes of a
  question drew the same noise, wrote the same tokens and got the same reward, so every advantage
  was 0 and only the KL term trained. :func:`tunixkit._compat.fresh_seed_per_call` gives each
  call its own seed;
- the learner hands reward functions the *first* assistant turn only (the tool call), so the
  answer is scored by the environment, which also keeps what each episode did
  (:class:`Episodes`): the per-step tool metrics and the evaluation come from there.

The same agent, environment and parser drive :func:`evaluate` (greedy, batched turn by turn), so
the evaluation sees exactly the conversations training sees.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from tunix.rl.agentic import utils as agentic_utils
from tunix.rl.agentic.tools.base_tool import BaseTool, ToolOutput

from tunixkit import (
    _compat,
    calculator,
    data,
    evaluation,
    families,
    hosts,
    models,
    pipeline,
    profiling,
    prompting,
    rl,
    runlog,
    runtime,
)
from tunixkit.answers import extract_answer, numbers_equal, parse_number

if TYPE_CHECKING:
    from flax import nnx
    from jax.sharding import Mesh
    from matplotlib.figure import Figure
    from tunix.rl.agentic.agentic_grpo_learner import GRPOLearner
    from tunix.rl.rl_cluster import RLCluster

    from tunixkit.models import LoadedModel
    from tunixkit.recipes import Agentic
    from tunixkit.tokenizer import Tokenizer

__all__ = [
    "CalculatorAgent",
    "CalculatorEnvironment",
    "Episodes",
    "build",
    "evaluate",
    "evaluate_stage",
    "plot_eval",
    "show_episodes",
    "single_call_records",
    "stage",
    "table",
    "trace_pairs",
    "training_mesh",
]


class CalculatorTool(BaseTool):
    """Evaluates an arithmetic expression: numbers, + - * / // % ** and parentheses."""

    def get_json_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": {"expression": {"type": "string"}},
                    "required": ["expression"],
                },
            },
        }

    def apply(self, expression: Any = "", **kwargs: Any) -> ToolOutput:
        if kwargs:
            return ToolOutput(name=self.name, error=f"unknown argument(s) {sorted(kwargs)}")
        result = calculator.calculate(str(expression))
        if calculator.is_error(result):
            return ToolOutput(name=self.name, error=result[len(calculator.ERROR_PREFIX) :])
        return ToolOutput(name=self.name, output=result)


TOOLS: dict[str, type[BaseTool]] = {"calculator": CalculatorTool}


class CalculatorAgent(_compat.TextQuestionAgent):
    """The agent of every episode: tunix's ``ToolAgent`` with the question read as text and an
    optional short tool prompt (:class:`tunixkit._compat.TextQuestionAgent`). tunix's tool parser
    is kept quiet while it parses: a malformed call is counted in the episode records, not shown."""

    def update_from_model(self, response: str, **kwargs: Any) -> Any:
        with _compat.quiet_tool_parser():
            return super().update_from_model(response, **kwargs)


_Parser = _compat.CopyingGemmaParser  # tunix's Gemma template, leaving the caller's turns alone


@dataclasses.dataclass
class Episode:
    """What one episode did."""

    question: str
    gold: str
    calls: int  # tool calls the model made (well formed or not)
    well_formed: int  # calls the calculator answered without an error
    results: list[str]  # what the tool returned
    final: str  # the model's last turn
    correct: bool
    used_result: bool  # the answer is a number the tool returned
    malformed: bool  # a <tool_call> that did not parse ended the episode


class Episodes:
    """Episodes as they end (thread-safe: tunix runs environments concurrently); :meth:`drain`
    gives those since the last call, :meth:`metrics` their per-step figures."""

    def __init__(self, path: str | pathlib.Path | None = None) -> None:
        self.path = pathlib.Path(path) if path else None
        self._new: list[Episode] = []
        self._lock = threading.Lock()

    def add(self, episode: Episode) -> None:
        with self._lock:
            self._new.append(episode)
            if self.path is not None:
                with self.path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(dataclasses.asdict(episode)) + "\n")

    def drain(self) -> list[Episode]:
        with self._lock:
            out, self._new = self._new, []
        return out

    @staticmethod
    def summary(episodes: Sequence[Episode]) -> dict[str, float]:
        """Shares of episodes: with a tool call, with a well-formed one (of those that called),
        whose answer uses the tool's result, that are correct; and malformed calls."""
        n = max(1, len(episodes))
        called = [e for e in episodes if e.calls]
        return {
            "tool_call_rate": len(called) / n,
            "well_formed_rate": sum(e.well_formed > 0 for e in called) / max(1, len(called)),
            "used_result_rate": sum(e.used_result for e in episodes) / n,
            "malformed_rate": sum(e.malformed for e in episodes) / n,
            "accuracy": sum(e.correct for e in episodes) / n,
            "n": float(len(episodes)),
        }

    def metric_fn(
        self, prompts: Any, completions: Any, **kwargs: Any
    ) -> dict[str, tuple[float, Any]]:
        """A tunix ``metric_fns`` entry: the episodes of this step, logged as ``tool/<figure>``."""
        figures = self.summary(self.drain())
        return {f"tool/{k}": (v, np.mean) for k, v in figures.items() if k != "n"}


def outcome(question: str, gold: str, final: str, results: Sequence[str], calls: int) -> Episode:
    """Score an episode: correct when the strict ``<answer>`` equals ``gold``."""
    got = extract_answer(final, strict=True).value
    want = parse_number(gold)
    correct = got is not None and want is not None and numbers_equal(got, want)
    used = got is not None and any(
        (v := parse_number(r)) is not None and numbers_equal(got, v)
        for r in results
        if not r.startswith("Error")
    )
    well = sum(not r.startswith("Error") for r in results)
    malformed = calculator.TOOL_CALL_START in final
    return Episode(
        question, gold, calls + malformed, well, list(results), final, correct, used, malformed
    )


class CalculatorEnvironment(_compat.ForgivingToolEnvironment):
    """tunix's ``ToolEnvironment`` that survives malformed tool calls and scores the answer.

    ``episodes``: where each finished episode is recorded (:class:`Episodes`).
    """

    def __init__(
        self,
        task: dict[str, Any] | None = None,
        *,
        tool_map: dict[str, type[BaseTool]],
        episodes: Episodes,
        max_steps: int = 2,
        **kwargs: Any,
    ) -> None:
        self.episodes, self.results, self.calls, self.scored = episodes, [], 0, False
        kwargs.pop("reward_fn", None)
        super().__init__(
            task, tool_map=tool_map, reward_fn=self._score, max_steps=max_steps, **kwargs
        )

    def step(self, action: Any) -> tuple[Any, float, bool, dict[str, Any]]:
        obs, reward, done, info = super().step(action)
        if done and not self.scored:  # the turn limit ended it on a tool call: no answer
            reward = self._score(self.task, "")
        return obs, reward, done, info

    def final_reward_fn(self) -> float:
        """Called by tunix's trajectory collector when an episode ends, however it ended. One the
        environment did not end (the episode's token budget ran out, or the collector's turn
        limit came first) is recorded here as unanswered, so every episode counts in the tool
        figures; it adds nothing to the reward (the unanswered episode's is 0 already). tunix
        calls it only for an episode with a step: one whose first turn used up the budget is
        not recorded."""
        if not self.scored:
            self._score(self.task, "")
        return 0.0

    def tool_called(self, call: dict[str, Any], result: str) -> None:
        self.calls += 1
        self.results.append(result)

    def _score(self, task: dict[str, Any], action: Any) -> float:
        episode = outcome(
            _compat.as_text(task.get("question", "")),
            _compat.as_text(task.get("answer", "")),
            str(action),
            self.results,
            self.calls,
        )
        self.scored = True
        self.episodes.add(episode)
        return 1.0 if episode.correct else 0.0


_EQUATION = re.compile(
    r"(\(?\d[\d\s.+\-*/()]*?[+\-*/][\d\s.+\-*/()]*?\d\)?)\s*=\s*\$?(-?[\d,]*\.?\d+)"
)


def single_call_records(records: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """The records whose solution is one calculation (one ``expression = result`` step whose
    result is the answer), with that expression as ``expression``: what one calculator call solves.

    >>> single_call_records([
    ...     {"question": "q", "solution": "Tom has 2 + 3 = 5 pens.", "answer": "5"},
    ...     {"question": "r", "solution": "1 + 1 = 2, then 2 * 3 = 6.", "answer": "6"},
    ... ])
    [{'question': 'q', 'solution': 'Tom has 2 + 3 = 5 pens.', 'answer': '5', 'expression': '2 + 3'}]
    """
    out = []
    for r in records:
        steps = _EQUATION.findall(r.get("solution", ""))
        if len(steps) != 1:
            continue
        result, gold = parse_number(steps[0][1]), parse_number(r["answer"])
        if result is not None and gold is not None and numbers_equal(result, gold):
            out.append({**r, "expression": steps[0][0].strip()})
    return out


def _conversation(question: str, system_prompt: str, tools_prompt: str | None) -> CalculatorAgent:
    agent = CalculatorAgent(system_prompt, tool_map=TOOLS, tools_prompt=tools_prompt)
    agent.update_from_env({"question": question}, 0.0, False, {})
    return agent


def trace_pairs(
    records: Sequence[dict[str, str]],
    tokenizer: Tokenizer,
    *,
    system_prompt: str = prompting.CALCULATOR_SYSTEM_PROMPT,
    tools_prompt: str | None = None,
    tool_share: float = 1.0,
) -> list[tuple[str, str]]:
    """SFT (prompt, completion) pairs that teach the tool's use on :func:`single_call_records`:
    turn 1 writes the call, turn 2 reads the result and answers; both rendered by the same agent
    and chat parser as the rollouts, each completion closed by ``<end_of_turn>``.

    ``tool_share`` < 1 writes the rest of the records (spread evenly) as a direct answer to the same
    tool prompt, without a call: the model learns both ways, and GRPO can learn which one pays.
    """
    uses_tool = data.spread(len(records), tool_share)
    parser = _Parser(tokenizer)
    pairs = []
    for i, r in enumerate(records):
        agent = _conversation(r["question"], system_prompt, tools_prompt)
        first = parser.parse(agent.chat_completions, add_generation_prompt=True)
        if not uses_tool[i]:
            pairs.append(
                (
                    first,
                    prompting.format_completion(f"{r['expression']} = {r['answer']}", r["answer"]),
                )
            )
            continue
        call = calculator.tool_call(r["expression"])
        agent.update_from_model(call)
        result = calculator.calculate(r["expression"])
        agent.update_from_env({"tool_outputs": {"0": result}}, 0.0, False, {})
        second = parser.parse(agent.chat_completions, add_generation_prompt=True)
        # The answer quotes the tool: a copy, not a calculation (direct answers write their own).
        answer = prompting.format_completion(f"The calculator gives {result}.", r["answer"])
        pairs += [(first, call + prompting.END_OF_TURN), (second, answer)]
    return pairs


def evaluate(
    loaded: LoadedModel,
    records: Sequence[dict[str, str]],
    config: evaluation.EvalConfig,
    *,
    tool: bool = True,
    max_turns: int = 2,
    system_prompt: str = prompting.CALCULATOR_SYSTEM_PROMPT,
    tools_prompt: str | None = None,
    name: str = "eval",
    output_dir: str | pathlib.Path | None = None,
) -> dict[str, Any]:
    """Greedy episodes on ``records``, batched turn by turn through the same agent, environment and
    parser as training. ``tool=False``: the plain GSM8K prompt, one turn, no tool offered. Returns
    :meth:`Episodes.summary` plus the episodes; writes them to ``output_dir/tool_<name>.jsonl``.

    ``config.max_generation_steps`` is the episode's token budget, counted as tunix's trajectory
    collector counts it in training (its ``max_response_length``): every model turn and every tool
    result between them. A turn that reaches what is left ends the episode unanswered."""
    log = Episodes(pathlib.Path(output_dir) / f"tool_{name}.jsonl" if output_dir else None)
    if log.path is not None and log.path.exists():
        log.path.unlink()
    if not tool:
        prompts = [loaded.chat.prompt(r["question"], prompting.MATH_SYSTEM_PROMPT) for r in records]
        for r, g in zip(
            records, evaluation.generate(loaded, prompts, config, progress=False), strict=True
        ):
            log.add(outcome(r["question"], r["answer"], g.text, [], 0))
        episodes = log.drain()
        return Episodes.summary(episodes) | {"episodes": episodes}
    parser = _Parser(loaded.tokenizer)
    agents = [_conversation(r["question"], system_prompt, tools_prompt) for r in records]
    envs = [
        CalculatorEnvironment(
            {"question": r["question"], "answer": r["answer"]},
            tool_map=TOOLS,
            episodes=log,
            max_steps=max_turns,
        )
        for r in records
    ]
    for env in envs:
        env.reset()
    active = list(range(len(records)))
    # one sampler for every turn: each new one compiles its programs again
    sampler = evaluation.make_sampler(
        loaded, config.max_prompt_length + config.max_generation_steps
    )
    budget, used = config.max_generation_steps, [0] * len(records)
    for _ in range(max_turns):
        if not active:
            break
        prompts = [
            parser.parse(agents[i].chat_completions, add_generation_prompt=True) for i in active
        ]
        # Every turn may write the whole budget (one compiled program); a turn longer than what
        # is left of its episode's is one tunix would have cut there, ending the episode.
        gens = evaluation.generate(loaded, prompts, config, progress=False, sampler=sampler)
        still = []
        for i, g in zip(active, gens, strict=True):
            used[i] += g.num_tokens
            if used[i] >= budget:
                envs[i].final_reward_fn()  # recorded unanswered, as in training
                continue
            action = agents[i].update_from_model(g.text)
            obs, reward, done, info = envs[i].step(action)
            if done:
                continue
            agents[i].update_from_env(obs, reward, done, info)
            used[i] += result_tokens(agents[i], sampler.tokenizer, parser)
            if used[i] >= budget:
                envs[i].final_reward_fn()
                continue
            still.append(i)
        active = still
    episodes = log.drain()
    return Episodes.summary(episodes) | {"episodes": episodes}


def evaluate_stage(
    path: str | pathlib.Path,
    records: Sequence[dict[str, str]],
    recipe: Agentic,
    *,
    label: str,
    output_dir: str | pathlib.Path,
    mesh: Mesh | None = None,
) -> dict[str, dict[str, Any]]:
    """A stage's model (``path``: its HF-layout export) on ``records``, with the tool and without it
    (:func:`evaluate`, with the recipe's turns, tool prompt and generation settings): the summaries
    keyed ``"<label>, tool"`` and ``"<label>, no tool"``. Each is stored as
    ``output_dir/tool_<label>_{tool,plain}.json`` and read back on a rerun that asks for the same
    number of questions; the model loads only when one is missing."""
    out = pathlib.Path(output_dir)
    evals, loaded = {}, None
    for tool, kind, key in ((True, "tool", "tool"), (False, "plain", "no tool")):
        name, stored = f"{label}_{kind}", out / f"tool_{label}_{kind}.json"
        kept = json.loads(stored.read_text()) if stored.is_file() else {}
        if kept.get("n") == len(records):
            print(f"{name}: reusing the stored evaluation ({stored})")
            evals[f"{label}, {key}"] = kept
            continue
        if loaded is None:
            loaded = models.load_model(recipe.model_id, path=path, mesh=mesh, verbose=False)
        result = evaluate(
            loaded,
            records,
            recipe.eval,
            tool=tool,
            max_turns=recipe.max_turns,
            tools_prompt=recipe.tools_prompt,
            name=name,
            output_dir=out,
        )
        result.pop("episodes")
        hosts.once(f"write {stored}", stored.write_text, json.dumps(result, indent=1))
        evals[f"{label}, {key}"] = result
    return evals


FIGURES = {
    "accuracy": "accuracy",
    "tool_call_rate": "calls the tool",
    "well_formed_rate": "calls that run",
    "used_result_rate": "answers the tool's result",
}


def table(evals: dict[str, dict[str, float]]) -> str:
    """Markdown: one row per evaluation (:func:`evaluate`'s summaries), the shares as columns."""
    rows = [
        "| evaluation | n | " + " | ".join(FIGURES.values()) + " |",
        "|---|---|" + "---|" * len(FIGURES),
    ]
    rows += [
        f"| {name} | {e['n']:.0f} | " + " | ".join(f"{e[k]:.2f}" for k in FIGURES) + " |"
        for name, e in evals.items()
    ]
    return "\n".join(rows)


def plot_eval(
    evals: dict[str, dict[str, float]], path: str | pathlib.Path, title: str = "Tool use"
) -> Figure:
    """Grouped bars of :data:`FIGURES` for each evaluation; saved as PNG."""
    import matplotlib.pyplot as plt

    x = np.arange(len(FIGURES))
    width = 0.8 / max(1, len(evals))
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    for k, (name, e) in enumerate(evals.items()):
        ax.bar(x + (k - (len(evals) - 1) / 2) * width, [e[f] for f in FIGURES], width, label=name)
    ax.set_xticks(x, list(FIGURES.values()))
    ax.set_ylim(0, 1.05)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    runlog.save_figure(fig, path)
    return fig


def show_episodes(path: str | pathlib.Path, k: int = 3) -> str:
    """The last ``k`` episodes of an ``episodes.jsonl`` as readable text."""
    path = pathlib.Path(path)
    if not path.is_file():
        return f"{path}: no episodes yet"
    out = []
    for line in path.read_text(encoding="utf-8").splitlines()[-k:]:
        e = json.loads(line)
        out.append(
            f"Q: {e['question']}  (gold {e['gold']})\n  tool results: {e['results'] or 'none'}\n"
            f"  final turn: {e['final']!r}\n  correct: {e['correct']}, "
            f"used the result: {e['used_result']}"
        )
    return "\n\n".join(out)


def result_tokens(agent: CalculatorAgent, tokenizer: Any, parser: Any) -> int:
    """The tokens of the tool's turn the agent was last given (its results and the next model
    turn's header), as tunix's trajectory collector counts them against the episode's budget."""
    _, env_messages = agentic_utils.get_recent_assistant_user_messages(agent.chat_completions)
    if not env_messages:
        return 0
    tokens, _ = agentic_utils.tokenize_and_generate_masks(
        env_messages,
        tokenizer=tokenizer,
        parser=parser,
        contains_first_msg=False,
        contains_generation_msg=True,
    )
    return len(tokens)


def episode_cache_size(settings: rl.GRPOSettings) -> int:
    """The sampler's KV cache for a multi-turn episode: each turn is sampled from the conversation
    so far (the first prompt, the earlier turns and the tool's results, at most the episode's
    ``max_generation_steps``), padded to ``max_prompt_length``, plus the turn itself."""
    return 2 * settings.max_prompt_length + settings.max_generation_steps + 16


def training_mesh(mesh: Mesh | None) -> Mesh | None:
    """The mesh agentic GRPO trains on: ``mesh``, except over several emulated CPU devices, where
    it is their first device alone. tunix's agentic learner samples episodes in a thread beside
    the thread that trains, and on emulated CPU devices the two threads' multi-device programs
    can each hold a device the other waits for: XLA then ends the process in a collective
    ("Termination timeout for all gather ... Expected 2 threads to join the rendezvous, but only
    1 of them arrived", 07 in CI on 2026-11-27 and 2026-12-02, with episodes already taking
    turns). One device has no collective to wait in. Accelerators keep ``mesh``."""
    if mesh is None or mesh.devices.size == 1 or mesh.devices.flat[0].platform != "cpu":
        return mesh
    shape = (1,) * mesh.devices.ndim
    return runtime.make_mesh(shape, mesh.axis_names, devices=list(mesh.devices.flat[:1]))


def build(
    actor: nnx.Module,
    reference: nnx.Module,
    tokenizer: Tokenizer,
    *,
    mesh: Mesh,
    settings: rl.GRPOSettings,
    output_dir: str | pathlib.Path,
    eos_ids: Sequence[int],
    vocab_size: int,
    max_turns: int = 2,
    system_prompt: str = prompting.CALCULATOR_SYSTEM_PROMPT,
    tools_prompt: str | None = None,
    reward_fns: Sequence[Any] = (),
    family: str = "gemma3",
    schedule_steps: int | None = None,
    trace: profiling.StepTrace | None = None,
) -> tuple[GRPOLearner, RLCluster, Episodes]:
    """A ready agentic ``GRPOLearner`` with the calculator, its ``RLCluster``, and the
    :class:`Episodes` its environments fill (also written to ``output_dir/episodes.jsonl``).
    ``schedule_steps``: the steps the learning-rate schedule spans, as in :func:`rl.cluster`.
    ``trace``: where the time of the first steps goes (tunix's second tracer: the one this learner
    exports, :meth:`tunixkit.profiling.StepTrace.perf_config`)."""
    from tunix.rl.agentic import agentic_grpo_learner

    out = pathlib.Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    cluster = rl.cluster(
        actor,
        reference,
        tokenizer,
        mesh=mesh,
        settings=settings,
        output_dir=out,
        eos_ids=eos_ids,
        vocab_size=vocab_size,
        family=family,
        schedule_steps=schedule_steps,
        return_logprobs=True,
        kv_cache_size=episode_cache_size(settings),
        perf_config=trace.perf_config(timelines=True) if trace else None,
    )
    if trace:
        trace.attach(cluster)
    _compat.fresh_seed_per_call(cluster, settings.seed)
    episodes = Episodes(out / "episodes.jsonl")
    # Episodes run in threads, each calling the sampler. On CPU they take turns, so that a seed
    # gives the same episodes (and the smoke run its figures); accelerators run the batch at once.
    on_cpu = mesh.devices.flat[0].platform == "cpu"
    algo = rl.algo_config(
        settings,
        agentic_grpo_learner.GRPOConfig,
        system_prompt=system_prompt,
        max_response_length=settings.max_generation_steps,
        max_concurrency=1 if on_cpu else settings.batch_size * settings.num_generations,
    )
    learner = agentic_grpo_learner.GRPOLearner(
        rl_cluster=cluster,
        algo_config=algo,
        reward_fns=list(reward_fns) or None,
        metric_fns=[episodes.metric_fn],
        chat_parser=_Parser(cluster.tokenizer),
        agent_class=CalculatorAgent,
        agent_kwargs={"tool_map": TOOLS, "tool_parser_name": "qwen", "tools_prompt": tools_prompt},
        env_class=CalculatorEnvironment,
        env_kwargs={"tool_map": TOOLS, "episodes": episodes, "max_steps": max_turns},
    )
    _compat.set_updates_per_step(learner, rl.updates_per_step(settings))
    return learner, cluster, episodes


@pipeline.stage
def stage(
    stages: pipeline.Stages,
    name: str,
    records: Sequence[dict[str, str]],
    recipe: Agentic,
    *,
    trace: profiling.StepTrace | None = None,
) -> str | None:
    """The agentic GRPO stage of a :class:`tunixkit.pipeline.Stages` run (LoRA on the shared
    reference, the previous stage's export as the start, on :func:`training_mesh` of the stages'
    mesh); returns its export (None: not finished). ``trace``: where the time of its first steps
    goes (written when they are done, or when training ends first)."""
    mesh = training_mesh(stages.mesh)
    base, lora = pipeline.start_stage(stages, name, recipe, mesh, frozen_reference=True)
    learner, _, _ = build(
        lora,
        base.model,
        base.tokenizer,
        mesh=mesh,
        settings=recipe.grpo,
        output_dir=stages.dir(name),
        eos_ids=base.eos_ids,
        vocab_size=families.vocab_size(base.config),
        max_turns=recipe.max_turns,
        tools_prompt=recipe.tools_prompt,
        family=base.family,
        schedule_steps=stages.session.schedule_steps(recipe.grpo.num_steps, label=name),
        trace=trace,
    )
    batches = data.grpo_dataset(
        records,
        batch_size=recipe.grpo.batch_size,
        num_batches=recipe.grpo.num_steps,
        seed=0,
        system_prompt=None,
        family=base.family,
    )
    return pipeline.train_stage(
        stages, name, learner, batches, lora, base, recipe, mesh, trace=trace, judged=recipe.judged
    )
