"""The presets of notebook 06_multidomain_pipeline (:class:`Pipeline`), and its tasks for the
profile (:func:`pipeline_tasks`)."""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from tunixkit import domains, evaluation, mix, models, prompting, rl, runtime
from tunixkit.evaluation import Bar
from tunixkit.recipes._base import _MLP_LORA, _Presets, gsm8k
from tunixkit.runtime import Runtime

__all__ = ["Pipeline", "Tasks", "pipeline_tasks"]


# the parameters of 06, 08 and 09 alike: the start model, the judge and the traces
TRACE_PARAMETERS = {
    "MODEL_ID": "model_id",
    "MODEL_PATH": "inputs.model_path",
    "JUDGE_ID": "judge_id",
    "TRACES": "inputs.traces",
    "DOMAIN_FIELD": "inputs.domain_field",
    "TRACE_FIELDS": "inputs.trace_fields",
}


# Prompt lengths fit the data: a summarization prompt carries its document, so 1,024 tokens hold the
# system prompt (~60) and a document of ~700 words (news articles, abstracts); 256
# (EvalConfig.full) dropped the system prompt and the text, 512 a long article's start. Prompts
# still longer are left-truncated, counted (Session.prompts_cut) and written to summary.json's
# prompts_cut by notebook 06. The preference stage uses the same prompt length.
_PROMPT_TOKENS = 1024

# each GRPO reward's weight in both profiles (full adds length_target)
_REWARD_WEIGHTS = {
    "judge": 4.0,
    "structure": 1.0,
    "length_limit": 1.0,
    "repetition": 1.0,
    "no_boilerplate": 1.0,
    "relevance": 0.5,
    "answer_match": 1.0,
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Pipeline(_Presets):
    """06_multidomain_pipeline: SFT, a self-improvement round, preference tuning, then GRPO with
    rubric and judge rewards, on every domain of the competition, in one session."""

    PARAMETERS: ClassVar[dict[str, str | tuple[str, ...]]] = {  # start_notebook
        **TRACE_PARAMETERS,
        "MIX_NONCOMMERCIAL": "inputs.mix_noncommercial",
        "ALGORITHM": "algorithm",
        "PREFERENCE_BETA": "beta",
        "SIMPO_GAMMA": "simpo_gamma",
        "PREFERENCE_BATCH": "preference_batch_size",
        "LORA_RANK": "lora_rank",
        "SFT_STEPS": "sft_steps",
        "GRPO_STEPS": "num_steps",
        "GRPO_CHECKPOINT_EVERY": "grpo.checkpoint_every",
        "TRAIN_TASKS": "train_tasks",
        "HELDOUT_PER_DOMAIN": "heldout_per_domain",
        "IMPROVE_PROMPTS": "improve_prompts",
        "PAIR_PROMPTS": "pair_prompts",
        "GENERATION_STEPS": (
            "eval.max_generation_steps",
            "grpo.max_generation_steps",
            "max_response_length",
        ),
        "TEMPERATURE": "grpo.temperature",
        "GRPO_LEARNING_RATE": "grpo.learning_rate",
        "GRPO_BETA": "grpo.beta",
        "SHARES": "shares",
        "DOMAIN_SHARES": "domain_shares",
        "REWARD_WEIGHTS": "reward_weights",
        "GUARD": "guard",
        "JUDGE_CHECK": "judge_check",
        "SYSTEM_PROMPT": "eval.system_prompt",
    }

    # The last cell's bars, each stage against the model it started from (the runs behind them,
    # trained and untrained: docs/tuning.md#no-learning)
    BARS: ClassVar[tuple[Bar, ...]] = (
        Bar(
            "sft_judged_change_low",
            ">",
            0.0,
            "SFT raised the judged score (95% interval's low end)",
        ),
        Bar(
            "improve_judged_change_low",
            ">",
            0.0,
            "self-improvement raised the judged score (95% interval's low end)",
        ),
        # its smoke gain, +0.046 (±0.042) at 120 prompts, is too small for an interval bar
        Bar("preference_judged_change", ">", 0.0, "preference tuning raised the judged score"),
        Bar(
            "grpo_sampled_change_low",
            ">",
            0.0,
            "GRPO raised the judged score of sampled answers (95% interval's low end)",
        ),
        Bar("format_after_grpo", ">=", 0.9, "format after GRPO", guard=True),
        Bar("grpo_adopted", ">=", 1.0, "GRPO adopted (its judged change not below 0)", guard=True),
        Bar("math_drop_in_noise", "<=", 1.0, "math accuracy not lost beyond 2 SE", guard=True),
    )

    model_id: str = "gemma-3-1b-it"  # where stage 1 starts
    # a judge model id (None: the smoke profile's rubric grader)
    judge_id: str | None = "gemma-3-1b-it"
    lora_rank: int = 64  # LoRA rank of the self-improvement, preference and GRPO stages
    lora_alpha: float = 64.0
    sft_lora_rank: int | None = 64  # stage 1's LoRA rank; None: full fine-tuning
    # smoke: synthetic tasks made (held-out prompts and their repeats are taken out); full: traces
    # used at most
    train_tasks: int = 20000
    # smoke: SFT traces keeping their answer; the rest get a weak one (Tasks)
    good_share: float = 1.0
    heldout_per_domain: int = 50  # held-out distinct prompts per domain for every evaluation
    # answers sampled per held-out prompt in every evaluation (0: greedy only)
    eval_samples: int = 2
    sft_steps: int = 1200
    sft_learning_rate: float = 1e-4
    batch_size: int = 16
    max_len: int = 1024  # SFT tokens per row
    improve_prompts: int = 512  # self-improvement: prompts sampled
    # ... and the judged score (0..1) an answer must reach to be kept
    improve_threshold: float = 0.8
    improve_steps: int = 200  # SFT steps on what was kept
    improve_learning_rate: float = 3e-5
    algorithm: str = "simpo"  # "dpo", "orpo" or "simpo"
    beta: float = 2.0  # DPO's KL strength (SimPO's reward scale)
    # SimPO's target reward margin (the SimPO paper's gamma/beta ~ 0.25-0.5)
    simpo_gamma: float = 0.5
    preference_steps: int = 2400  # 4 pairs a step: 9,600 pairs seen, ~9 passes over 1,024
    preference_learning_rate: float = 5e-6
    pair_prompts: int = 1024  # prompts sampled for judged pairs
    samples: int = 4  # answers sampled per prompt (self-improvement and pairs)
    max_response_length: int = 768
    # pairs per preference step: each pair is two rows of prompt + response (memory:
    # docs/memory.md). 4 pairs = 8 rows of 1,024 + 768 tokens over 8 chips, one row per chip:
    # compiled for an H200, two such rows took 13.8 GiB of temporaries (~6.9 a row;
    # bench/results/memplan_gpu.json), so 16 pairs, 4 rows a chip, were judged too many. The
    # v5e-8's own compile of 4 pairs: 7.3 GiB a chip with the judge (memplan_tpu_aot)
    preference_batch_size: int = 4
    grpo: rl.GRPOSettings = rl.GRPOSettings(
        max_prompt_length=_PROMPT_TOKENS, micro_batch_size=2, num_steps=1500, checkpoint_every=50
    )
    # qwix regex of the GRPO stage's adapted modules; None: the family's
    grpo_lora_modules: str | None = None
    # weight of each GRPO reward, by name; length_target: answers under ~600 tokens, none left open
    reward_weights: dict[str, float] = dataclasses.field(
        default_factory=lambda: {**_REWARD_WEIGHTS, "length_target": 1.0}
    )
    # each stage's share of the training time
    shares: dict[str, float] = dataclasses.field(
        default_factory=lambda: {"sft": 0.3, "improve": 0.1, "preference": 0.2, "grpo": 0.4}
    )
    eval: evaluation.EvalConfig = dataclasses.replace(
        evaluation.EvalConfig.full(),
        system_prompt=prompting.DOMAINS_SYSTEM_PROMPT,
        max_prompt_length=_PROMPT_TOKENS,
    )
    # a finished stage whose paired held-out judged change against its start is wholly below 0 is
    # not adopted: the next stage starts from, and the session submits, the better model
    # (pipeline.adopt); False: every finished stage is adopted
    guard: bool = True
    # a domain the judge fails its calibration on: "ignore" (scored 0 there, not graded: the other
    # rewards train it), "stop" (before any training) or "warn" (used as it is):
    # domains.act_on_calibration
    judge_check: str = "ignore"
    # stage 1's rows trained without the system prompt (prompting.sft_pairs), so the format
    # holds under the judges' own prompt too
    plain_share: float = 0.25
    # each domain's share of stage 1's rows, honoured exactly (domains.take_shares: a domain
    # short of rows repeats them, twice at most, then the total shrinks); None: the rows as they
    # come. The judges weight math and code down; GRPO's answer reward trains math further
    domain_shares: dict[str, float] | None = dataclasses.field(
        default_factory=lambda: {
            "creative": 0.2,
            "ideation": 0.2,
            "summarization": 0.2,
            "science": 0.2,
            "math": 0.1,
            "code": 0.1,
        }
    )

    @classmethod
    def smoke(cls) -> Pipeline:
        # Held-out prompts are distinct and never trained on; GRPO raises the sampled score on every
        # run, greedy answers barely move (the runs behind it: docs/tuning.md#06-pipeline-smoke).
        # Stage 1 fine-tunes every weight in smoke: the tiny model's other-domain words have
        # untrained embeddings that adapters cannot change (docs/tuning.md#06-stage-1-smoke); full
        # trains LoRA.
        return cls(
            model_id="tiny-gemma3-sft",
            judge_id=None,
            lora_rank=16,
            lora_alpha=16.0,
            sft_lora_rank=None,
            train_tasks=3000,
            good_share=0.5,
            heldout_per_domain=20,
            eval_samples=4,
            sft_steps=300,
            sft_learning_rate=3e-3,
            max_len=144,
            improve_prompts=120,
            improve_threshold=0.9,
            improve_steps=20,
            improve_learning_rate=3e-4,
            # SimPO's learning rate: docs/tuning.md#06-simpo-smoke
            preference_steps=30,
            preference_learning_rate=1e-4,
            pair_prompts=240,
            max_response_length=64,
            preference_batch_size=16,
            grpo=rl.GRPOSettings.smoke(),
            grpo_lora_modules=_MLP_LORA,
            reward_weights=dict(_REWARD_WEIGHTS),
            shares={"sft": 0.35, "improve": 0.1, "preference": 0.15, "grpo": 0.4},
            eval=dataclasses.replace(
                evaluation.EvalConfig.smoke(), system_prompt=prompting.DOMAINS_SYSTEM_PROMPT
            ),
            # the stand-in rubric grader fails code's calibration by design (it misses absent tags
            # there, tests/test_pipeline.py); the learning bars were measured with it in use
            judge_check="warn",
            # every row under the system prompt: the learning bars were measured so
            plain_share=0.0,
            domain_shares=None,
        )

    @classmethod
    def one_chip(cls) -> Pipeline:
        # One 16 GiB chip (Colab v5e-1) holds the policy, the judge and one stage's activations.
        # Compiled by the TPU's own compiler for one v5e chip (memplan --topology v5e:1x1,
        # bench/results/memplan_tpu_aot.json's rechecks), the judge resident: SFT at 2 rows of
        # 1,024 (the same rows in 8x the steps) 10.8 GiB, one SimPO pair of 1,024 + 768 12.3 (12.1
        # at rank 32): they fit. GRPO with G=4 rows of 1,024 + 768 took 17.4 GiB, G=2 14.4 (the
        # limit), G=2 with 512-token answers 14.8, G=2 with 768-token prompts 14.3 (a summarization
        # document cut); G=2 with LoRA rank 32 took 14.1, the most spare (0.3 GiB) with prompts and
        # answers whole: each prompt's two answers are compared, 4 prompts a step keep its 8 rows.
        # The model cell's plan stops before loading when a change does not fit; run
        # REHEARSAL = True first.
        full = cls.full()
        return dataclasses.replace(
            full,
            lora_rank=32,
            batch_size=2,
            sft_steps=8 * full.sft_steps,
            preference_batch_size=1,
            preference_steps=4 * full.preference_steps,
            # rollouts one prompt a call, as the plan was compiled (not the whole step: unplanned)
            grpo=dataclasses.replace(
                full.grpo,
                num_generations=2,
                batch_size=4,
                micro_batch_size=1,
                rollout_micro_batch_size=1,
            ),
        )


@dataclasses.dataclass(frozen=True)
class Tasks:
    """06's prompts with their reference answers (``records``: prompt, response, domain; math rows
    carry their ``answer``), and in smoke the grader that plays the judge (``grader``: a
    deterministic rubric of the synthetic tasks; None in full, where the judge is a model) and each
    domain's weak answer (``weak``: well-formed but empty, :data:`tunixkit.testing.WEAK`)."""

    records: list[dict[str, Any]]
    grader: Callable[..., Any] | None = None
    weak: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def uneven(self, rows: Sequence[dict[str, Any]], good_share: float) -> list[dict[str, Any]]:
        """SFT traces as uneven as real instruction data is, so that SFT learns both kinds of
        answer and the stages after it have something to choose: in smoke all but ``good_share``
        of each domain's answers are its weak one (:func:`tunixkit.testing.uneven`); in full the
        rows as they are."""
        return runtime.smoke_kit().uneven(rows, good_share) if self.weak else list(rows)

    def good(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """The (prompt, target) pairs whose target is not a weak answer (all of them in full)."""
        return [pair for pair in pairs if pair[1] not in self.weak.values()]


def pipeline_tasks(
    rt: Runtime,
    recipe: Pipeline,
    data_dir: str | pathlib.Path,
    cell: Mapping[str, Any] | None = None,
) -> Tasks:
    """06's tasks for the profile (08 and 09 take the same). Smoke: ``recipe.train_tasks``
    synthetic tasks of every domain, made offline, and their rubric grader. Full: enough rows of
    each domain for its share of ``train_tasks`` (``recipe.domain_shares``), from the traces (a
    file or a Hugging Face id: :func:`tunixkit.domains.load_traces`) or, without them, the default
    public mix (:func:`tunixkit.mix.load_mix`), plus GSM8K's train and test rows as math.

    ``cell``: the notebook's parameters (``globals()``), as :func:`start_notebook` takes them; it
    reads ``TRACES``, ``TRACE_FIELDS``, ``DOMAIN_FIELD``, ``MIX_PATHS`` (local copies of the mix's
    data sets), ``MIX_NONCOMMERCIAL`` and ``GSM8K_PATH`` (a local copy), each absent or None as
    unset. Offline, the error names the parameter to set (``TRACES``, ``MIX_PATHS``,
    ``GSM8K_PATH``)."""
    cell = cell or {}
    traces = cell.get("TRACES")
    if rt.smoke:
        kit = runtime.smoke_kit()
        made = kit.synthetic_tasks(recipe.train_tasks, seed=0)
        return Tasks([t.record() for t in made], kit.rubric_grader(made), kit.WEAK)
    shares = recipe.domain_shares or dict.fromkeys(domains.DOMAINS, 1.0)
    per_domain = {d: -(-recipe.train_tasks * w // sum(shares.values())) for d, w in shares.items()}
    if traces is None:  # the default public mix
        family = models.get_spec(recipe.model_id).family
        with runtime.parameter_for_a_copy("MIX_PATHS", "a copy of each data set (by its id)"):
            rows = mix.load_mix(
                int(max(per_domain.values())),
                paths=cell.get("MIX_PATHS"),
                family=family,
                noncommercial=bool(cell.get("MIX_NONCOMMERCIAL")),
            )
    else:
        with runtime.parameter_for_a_copy("TRACES"):  # offline: the error names the parameter
            rows = domains.load_traces(
                traces,
                fields=cell.get("TRACE_FIELDS") or ("prompt", "response"),
                domain_field=cell.get("DOMAIN_FIELD") or "domain",
                limit=recipe.train_tasks,
            )
    load = dict(data_dir=data_dir, path=cell.get("GSM8K_PATH"))
    math = gsm8k(rt, "train", limit=max(1, int(per_domain.get("math", 0))), **load)
    math += gsm8k(rt, "test", limit=recipe.heldout_per_domain, **load)
    return Tasks(rows + domains.math_tasks(math))
