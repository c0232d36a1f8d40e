"""A chain of training stages in one session: SFT, then preference tuning, then GRPO (notebook 06).

Each stage trains LoRA adapters on the previous stage's merged export, checkpoints as it goes and
ends with an export of its own, which the next stage loads. :class:`Stages` keeps
``OUTPUT_DIR/stages.json``: which stages are done and where their exports are, so a rerun (or a
session continuing with ``RESUME_FROM``) skips the finished stages and continues the current one
from its last checkpoint. One session clock spans the stages; each stage gets a share of the
training time left when it starts (:meth:`Stages.clock`).

Also here, the pieces the stages need beyond the other notebooks': judged preference pairs
(:func:`judged_pairs`) and the self-improvement round (:func:`self_improve`); and for the
one-stage notebooks (01-03), whether their export or the start model is the judged model
(:func:`export_judged`, :func:`finish`). The trainers are
built by the same builders as the other notebooks' (:func:`tunixkit.training.sft_trainer`,
:func:`tunixkit.preferences.trainer`, SimPO included).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import pathlib
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tunixkit import (
    checkpoints,
    data,
    domains,
    evaluation,
    families,
    judging,
    models,
    preferences,
    profiling,
    prompting,
    rewards,
    rl,
    session,
    training,
)
from tunixkit.session import Clock, Session, StageClock

if TYPE_CHECKING:
    from flax import nnx
    from jax.sharding import Mesh

    from tunixkit.judging import Judge
    from tunixkit.models import LoadedModel
    from tunixkit.recipes import DPO, GRPO, SFT, Agentic, Pipeline

__all__ = [
    "Adoption",
    "Evaluations",
    "Exported",
    "export_judged",
    "finish",
    "Stages",
    "adopt",
    "grpo_stage",
    "improve_stage",
    "preference_stage",
    "contested",
    "sft_rows",
    "sft_stage",
    "weighted_rewards",
    "write_reasoning",
]


class Stages:
    """The stages of a pipeline and how far it got (``OUTPUT_DIR/stages.json``). ``base_path``:
    the start model's folder (``MODEL_PATH``; None: the recipe's ``model_id``), where the first
    stage starts; ``mesh``: where the stages load, train and evaluate."""

    def __init__(
        self,
        out_dir: str | pathlib.Path,
        shares: dict[str, float],
        session: Session,
        *,
        base_path: str | pathlib.Path | None = None,
        mesh: Mesh | None = None,
    ) -> None:
        self.out_dir, self.shares, self.session = pathlib.Path(out_dir), dict(shares), session
        self.base_path = None if base_path is None else str(base_path)
        self.mesh = mesh
        self.path = self.out_dir / "stages.json"
        self.state: dict[str, dict[str, Any]] = (
            json.loads(self.path.read_text()) if self.path.is_file() else {}
        )

    def dir(self, name: str) -> pathlib.Path:
        return self.out_dir / name

    def done(self, name: str) -> bool:
        return self.state.get(name, {}).get("done", False)

    def to_do(self) -> list[str]:
        """The stages not done yet, in order (what a rerun or ``RESUME_FROM`` has still to run)."""
        return [n for n in self.shares if not self.done(n)]

    def adopted(self, name: str) -> bool:
        """Whether ``name`` is done, trained (not skipped) and its model kept as the session's best
        (:meth:`decide`; a stage not compared yet counts as kept until it is)."""
        state = self.state.get(name, {})
        return bool(state.get("done")) and not state.get("skipped") and state.get("adopted", True)

    def best_before(self, name: str) -> str | None:
        """The stage whose model ``name`` starts from and is compared with: the last earlier stage
        that was adopted (None: the start model)."""
        names = list(self.shares)
        return next((n for n in reversed(names[: names.index(name)]) if self.adopted(n)), None)

    def starts(self) -> dict[str, str]:
        """Each trained stage's start: the stage it started from and was compared with
        (:meth:`best_before`), or ``"start"`` (the start model)."""
        return {
            n: self.best_before(n) or "start"
            for n in self.shares
            if self.done(n) and not self.skipped(n)
        }

    def final(self) -> str | None:
        """The stage whose model is the session's best so far, the judged one (the last adopted
        stage; None: the start model)."""
        return next((n for n in reversed(list(self.shares)) if self.adopted(n)), None)

    def skipped(self, name: str) -> str | None:
        """Why ``name`` was skipped (:meth:`skip`), or None."""
        return self.state.get(name, {}).get("skipped")

    def skip(self, name: str, why: str) -> None:
        """Mark ``name`` done without training, because ``why``: the next stage starts from the
        model this one would have started from (:meth:`start_path`), nothing is removed, and the
        session goes on (a stage with nothing to train on must not end a 9-hour run)."""
        export = self.start_path(name)
        self.state[name] = {
            **self.state.get(name, {}),
            "done": True,
            "skipped": why,
            "export": export,
            "steps": 0,
        }
        self._write()
        print(f"{name}: skipped, {why}; the next stage starts from {export or 'the start model'}")

    def clock(self, name: str, part: float = 1.0) -> StageClock:
        """This stage's share of the training time left (the time after the reserve for the final
        export and evaluation), over the shares of this and the later stages; ``part`` of it for
        a pass that makes the stage's data (the rest is left to its training)."""
        names = list(self.shares)
        later = sum(self.shares[n] for n in names[names.index(name) :])
        left = max(0.0, self.session.remaining() - self.session.reserve())
        budget = float("inf") if left == float("inf") else left * self.shares[name] / later
        return StageClock(self.session, time.time() + budget * part)

    def finish(self, name: str, export: str | pathlib.Path, **figures: Any) -> None:
        """Mark ``name`` done, with its export. Until :meth:`decide` compares it with the model it
        started from, it counts as adopted (the next stage starts from it), and the earlier export
        stays on disk (the better of the two is kept then)."""
        self.state[name] = {
            **self.state.get(name, {}),
            "done": True,
            "export": str(export),
            **figures,
        }
        self._write()

    def note(self, name: str, **figures: Any) -> None:
        """Keep ``figures`` of stage ``name`` (e.g. its data pass's report) in ``stages.json``,
        done or not, so that a rerun or a later session reports them too."""
        self.state.setdefault(name, {}).update(figures)
        self._write()

    def decide(
        self, name: str, change: tuple[float, float, int] | None, *, guard: bool = True
    ) -> bool:
        """Adopt the finished stage ``name`` as the session's best model, or not: not when
        ``change``, its paired change in held-out judged score against the model it started from
        (:meth:`best_before`; mean, half-width of the 95% interval, prompts), lies wholly below 0.
        Then the next stage starts from the better model, which stays the judged one. None: no
        comparison was made (adopted, and said so). Without ``guard`` every stage is adopted (the
        change is still recorded). The decision and its reason go to
        ``stages.json``; the export that lost is removed (each is a whole model, ~4 GB for a 1B in
        two formats, against Kaggle's 20 GB)."""
        before = self.best_before(name)
        against = before or "start"
        if change is None:
            adopted, why = True, f"adopted: no paired judged evaluation against {against}"
        else:
            gain, ci, n = change
            worse = gain + ci < 0
            adopted = not (guard and worse)
            why = (
                f"{'adopted' if adopted else 'NOT adopted'}: judged score {gain:+.3f} "
                f"(95% CI ±{ci:.3f}, {n} prompts) against {against}"
                + ("" if not worse else ", wholly below 0")
                + ("" if adopted else f"; {against} stays the best model")
                + (" (the guard is off)" if worse and adopted else "")
            )
        figures = (
            {} if change is None else dict(zip(("change", "ci", "prompts"), change, strict=True))
        )
        self.state[name].update(
            adopted=adopted, adoption={"against": against, "why": why, **figures}
        )
        self._write()
        print(f"{name}: {why}")
        names = list(self.shares)
        losers = [name] if not adopted else ["start", *names[: names.index(name)]]
        for loser in losers:
            folder = self.dir(loser) / "export"
            if folder.is_dir():
                freed = session.disk_usage(folder)
                shutil.rmtree(folder)
                print(f"{name}: removed {loser}'s export ({freed / 1e9:.2f} GB)")
        return adopted

    def _write(self) -> None:
        self.path.write_text(json.dumps(self.state, indent=1, default=float))

    def steps(self) -> int:
        """The training steps of the finished stages, together: the step the judged model
        (``ckpts/actor/<step>``) is written under, higher after every stage."""
        return sum(int(s.get("steps") or 0) for s in self.state.values() if s.get("done"))

    def ready(self, name: str) -> bool:
        """Whether every stage before ``name`` is done (a stage never starts on an unfinished
        one)."""
        names = list(self.shares)
        waiting = [n for n in names[: names.index(name)] if not self.done(n)]
        if waiting:
            print(
                f"{name}: not started, {waiting[0]} is not finished (a rerun or a session with "
                "RESUME_FROM continues it)"
            )
        elif self.session.must_stop(0.0):  # what is left is the reserve for the final evaluation
            print(
                f"{name}: not started, the session clock has run out (a session with RESUME_FROM "
                "starts it)"
            )
            return False
        return not waiting

    def run(self, name: str, build: Callable[[], str | None]) -> str | None:
        """Stage ``name``'s export (its ``hf`` folder), the stage run at most once: a stage done
        already gives its export without running again (None: it was skipped); one that is not
        :meth:`ready` is not started (None, and said why); else ``build()`` runs it and returns its
        export (None: skipped or not finished). Every stage starts here (:func:`stage`)."""
        if self.done(name):
            return None if self.skipped(name) else self.state[name]["export"]
        return build() if self.ready(name) else None

    def cached(
        self, name: str, file: str, build: Callable[[], list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        """The rows of ``<stage>/<file>``: built once by ``build`` and read back on a rerun, so
        that a resumed stage trains on the data its checkpoint was trained on. An empty list when
        ``build`` made none (nothing is written; the caller skips the stage: :meth:`skip`)."""
        path = self.dir(name) / file
        if path.is_file():
            rows = data.read_rows(path)
            print(f"{name}: read {len(rows)} rows from {path}")
            return rows
        rows = build()
        if rows:
            data.write_jsonl(rows, path)
        return rows

    def start_path(self, name: str) -> str | None:
        """The model folder ``name`` starts from: the export of the last earlier stage that was
        adopted (:meth:`best_before`), else :attr:`base_path`."""
        best = self.best_before(name)
        return self.base_path if best is None else self.state[best]["export"]

    def summary(self) -> str:
        def said(n: str) -> str:
            if not self.done(n):
                return "to do"
            if self.skipped(n):
                return "skipped"
            return (
                "done"
                + {True: ", adopted", False: ", not adopted", None: ""}[
                    self.state[n].get("adopted")
                ]
            )

        return "; ".join(f"{n}: {said(n)}" for n in self.shares)

    def publish(self, handle: str | None, notes: str) -> str | None:
        """The end of the session: say each stage's outcome and the final model, then upload the
        session's best model (the Orbax export of :meth:`final`, else the start model's when a
        stage lost to it) to the Kaggle Model ``handle`` (:func:`tunixkit.session.publish`,
        ``notes`` and the last stage as its notes); returns ``unrestricted_kaggle_model``."""
        final = self.final()
        for name, state in self.state.items():
            why = state.get("skipped") or state.get("adoption", {}).get("why", "not compared")
            print(f"{name}: {why}")
        print(f"the final model: {final or 'the start model'}; stages: {self.summary()}")
        folder = self.dir(final or "start") / "export" / "orbax"
        return session.publish(
            folder if folder.is_dir() else None,
            handle,
            notes=f"{notes}, last stage {final}",
            rehearsal=self.session.rehearsal is not None,
        )

    def report(self) -> dict[str, Any]:
        """What ``summary.json`` keeps of the stages: their state, the final stage (the judged
        model's; None: the start model), each stage's adoption and why, the self-improvement
        pass's counts and stage 1's rows without reasoning of their own (sampled, kept where the
        judge preferred)."""
        return {
            "stages": self.state,
            "final_stage": self.final(),
            "adoption": {n: s.get("adoption") for n, s in self.state.items()},
            "self_improvement": self.state.get("improve", {}).get("sampled"),
            "reasoning": self.state.get("sft", {}).get("reasoning"),
        }

    def figures(
        self, changes: Mapping[str, Any], scores: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, float]:
        """What :attr:`tunixkit.recipes.Pipeline.BARS` are checked against: each trained stage's
        paired change (``changes``, :func:`tunixkit.domains.stage_changes`) against its start
        (greedy judged; GRPO's of sampled answers) and its 95% interval's low end; after GRPO,
        ``scores``' format rate, whether GRPO was adopted, and the fall in math accuracy in units
        of its noise (two standard errors near 0.5; traces may have no math)."""
        starts, figures = self.starts(), {}
        keys = {"sft": "judged", "improve": "judged", "preference": "judged", "grpo": "sampled"}
        for stage, key in keys.items():
            if stage in starts:  # done and trained: a skipped stage measures nothing
                gain, ci, _ = changes[f"{starts[stage]}->{stage}"][key]["all"]
                figures[f"{stage}_{key}_change"] = gain
                figures[f"{stage}_{key}_change_low"] = gain - ci
        if "grpo" in scores:
            figures["format_after_grpo"] = scores["grpo"]["all"]["format"]
            figures["grpo_adopted"] = float(self.final() == "grpo")
            if "math" in scores["grpo"] and "math" in scores[starts["grpo"]]:
                acc = [scores[s]["math"]["accuracy"] for s in (starts["grpo"], "grpo")]
                noise = 2 * (0.25 / scores["grpo"]["math"]["n"]) ** 0.5
                figures["math_drop_in_noise"] = (acc[0] - acc[1]) / noise
        return figures

    def evaluate(
        self,
        name: str,
        model_id: str,
        path: str | pathlib.Path | None,
        tasks: Sequence[Mapping[str, str]],
        judge: Judge,
        config: evaluation.EvalConfig,
        *,
        samples: int = 0,
        sampling: evaluation.EvalConfig | None = None,
    ) -> domains.DomainScores:
        """:func:`tunixkit.domains.evaluate` of the model in ``path`` (a stage's export; None: the
        start model), greedy and, with ``samples``, sampled with ``sampling``; stored as
        ``domains_<name>.json`` and read back on a rerun."""
        stored = self.out_dir / f"domains_{name}.json"
        if stored.is_file():
            return domains.DomainScores(**json.loads(stored.read_text()))
        # Timed: the session keeps an evaluation's time in reserve, so the last one fits the
        # session.
        with self.session.timed("evaluation", items=len(tasks)):
            loaded = models.load_model(model_id, path=path, mesh=self.mesh, verbose=False)
            result = domains.evaluate(
                loaded,
                tasks,
                judge,
                name=name,
                config=config,
                output_dir=self.out_dir,
                samples=samples,
                sampling=sampling,
            )
        stored.write_text(json.dumps(dataclasses.asdict(result), indent=1))
        return result

    def evaluator(
        self,
        recipe: Pipeline,
        tasks: Sequence[Mapping[str, str]],
        judge: Judge,
    ) -> Callable[[str, str | pathlib.Path | None], domains.DomainScores]:
        """:meth:`evaluate` as the recipe says (its model, evaluation settings and ``eval_samples``
        answers sampled as the GRPO rollouts are): ``evaluator(name, path)``, ``path`` a stage's
        export or None for the start model."""

        def evaluate(name: str, path: str | pathlib.Path | None) -> domains.DomainScores:
            return self.evaluate(
                name,
                recipe.model_id,
                path,
                tasks,
                judge,
                recipe.eval,
                samples=recipe.eval_samples,
                sampling=recipe.grpo.sampled(recipe.eval),
            )

        return evaluate


class Evaluations(dict):
    """06's held-out evaluations by name (:meth:`Stages.evaluator`'s), the start model's first;
    :meth:`after` adds a trained stage's and adopts it or not (:func:`adopt`). Shows as their table
    (:func:`tunixkit.domains.table`)."""

    def __init__(
        self,
        stages: Stages,
        recipe: Pipeline,
        tasks: Sequence[Mapping[str, str]],
        judge: Judge,
    ) -> None:
        super().__init__()
        self.stages, self.recipe = stages, recipe
        self.evaluate = stages.evaluator(recipe, tasks, judge)
        self["start"] = self.evaluate("start", stages.base_path)

    def after(self, name: str) -> Evaluations:
        """Stage ``name``'s model evaluated, then adopted as the best so far or not (not when its
        paired judged change against its start is wholly below 0), when it trained (done, not
        skipped); returns itself, shown as the table so far."""
        if self.stages.done(name) and not self.stages.skipped(name):
            self[name] = self.evaluate(name, self.stages.state[name]["export"])
            adopt(self.stages, name, self.recipe, guard=self.recipe.guard)
        return self

    def __repr__(self) -> str:
        return f"Evaluations({list(self)})"

    def _repr_markdown_(self) -> str:
        return domains.table(list(self.values()))


def make_judge(
    judge_id: str | None,
    records: Sequence[Mapping[str, Any]],
    grader: Callable[..., Any] | None = None,
    *,
    mesh: Mesh | None = None,
) -> judging.Judge:
    """06's and 08's judge: the model ``judge_id`` (loaded on ``mesh``) grading each question with
    its domain's criteria (:class:`tunixkit.judging.JudgeRubric`, the domains read from
    ``records``); None: ``grader`` plays the judge (smoke: the synthetic tasks' rubric)."""
    if judge_id is None:
        if grader is None:
            raise ValueError("make_judge: no judge model (judge_id None) and no grader to use")
        return judging.Judge(grader, name="judge")
    judge_model = models.load_model(judge_id, mesh=mesh)
    rubric = judging.JudgeRubric(domain_of={r["prompt"]: r["domain"] for r in records})
    return judging.Judge(judging.llm_grader(judge_model, rubric=rubric), name="judge")


def sample_and_judge(
    loaded: LoadedModel,
    tasks: Sequence[dict[str, str]],
    judge: judging.Judge,
    config: evaluation.EvalConfig,
    *,
    samples: int,
    clock: Clock | None = None,
    what: str = "pass",
) -> tuple[list[str], list[list[tuple[float, evaluation.Generation]]]]:
    """``samples`` answers to each task's prompt, judged: (prompts, groups), the i-th group the
    (score, generation) of each answer to ``prompts[i]``. In chunks of a few generation batches;
    with ``clock`` (a :class:`~tunixkit.session.StageClock`) the pass stops before a chunk that
    would not end in time, keeps the tasks it finished and says how far it got: a slow pass never
    eats the session's later stages."""
    prompts = [loaded.chat.prompt(t["prompt"], config.system_prompt) for t in tasks]
    chunk = max(1, 4 * config.batch_size // samples)
    # one sampler for every chunk: each new one compiles its programs again
    sampler = evaluation.make_sampler(
        loaded, config.max_prompt_length + config.max_generation_steps
    )
    groups: list[list[tuple[float, evaluation.Generation]]] = []
    started = time.time()
    for i in range(0, len(tasks), chunk):
        per_chunk = (time.time() - started) / max(1, i // chunk)
        if i and clock is not None and clock.must_stop(per_chunk):
            print(
                f"{what}: the session clock stopped the pass after {i} of {len(tasks)} prompts "
                "(what they gave is kept; the stage trains on it)"
            )
            prompts = prompts[:i]
            break
        made = evaluation.sample_groups(
            loaded, prompts[i : i + chunk], config, samples=samples, sampler=sampler
        )
        questions = [
            t["prompt"] for t, g in zip(tasks[i : i + chunk], made, strict=True) for _ in g
        ]
        scores = iter(judge.scores(questions, [g.text for group in made for g in group]))
        groups += [[(next(scores), g) for g in group] for group in made]
    return prompts, groups


def judged_pairs(
    loaded: LoadedModel,
    tasks: Sequence[dict[str, str]],
    judge: judging.Judge,
    config: evaluation.EvalConfig,
    *,
    samples: int = 4,
    min_gap: float = 0.2,
    clock: Clock | None = None,
) -> list[dict[str, str]]:
    """Preference pairs without a ground truth: ``samples`` answers per task, graded by ``judge``;
    the best becomes *chosen* and the worst *rejected* when their scores differ by ``min_gap``.
    ``clock``: as in :func:`sample_and_judge`; in a rehearsal where no prompt's answers are that
    far apart, every prompt's best and worst are returned, so that the stage is still timed."""
    prompts, groups = sample_and_judge(
        loaded, tasks, judge, config, samples=samples, clock=clock, what="judged pairs"
    )
    pairs, near = [], []
    for prompt, group in zip(prompts, groups, strict=True):
        ranked = sorted((score, _whole(gen, loaded)) for score, gen in group)
        (low, worst), (high, best) = ranked[0], ranked[-1]
        pair = {"prompt": prompt, "chosen": best, "rejected": worst}
        (pairs if high - low >= min_gap else near).append(pair)
    print(
        f"judged pairs: {len(pairs)} of {len(prompts)} prompts had answers {min_gap:g} or more "
        "apart"
    )
    if not pairs and _rehearsing(clock):
        print(f"{_TIMED_ANYWAY}: each prompt's best and worst answer")
        return near
    return pairs


# A rehearsal with weights that cannot pass the judge (random ones, on a device check) still times
# the stage at its real shapes, on what it sampled; the real run keeps the bar.
_TIMED_ANYWAY = "a rehearsal: none passed, so the stage is timed on what was sampled instead"


def _rehearsing(clock: Clock | None) -> bool:
    return clock is not None and clock.rehearsal is not None


def _whole(gen: evaluation.Generation, loaded: LoadedModel) -> str:
    """A sampled answer as a training target: its text, ended as a turn unless the generation
    limit cut it."""
    return gen.text + ("" if gen.truncated else loaded.chat.end_of_turn)


def self_improve(
    loaded: LoadedModel,
    tasks: Sequence[dict[str, str]],
    judge: judging.Judge,
    config: evaluation.EvalConfig,
    *,
    samples: int = 4,
    threshold: float = 0.7,
    clock: Clock | None = None,
) -> tuple[list[tuple[str, str]], dict[str, float]]:
    """One round of self-improvement: sample ``samples`` answers per task, keep the best one of
    each task that the judge scores at least ``threshold``. Returns the (prompt, answer) pairs to
    train on and a report (how many were kept, and the mean judged score of what was sampled).
    ``clock``: as in :func:`sample_and_judge`; in a rehearsal where none is kept, each task's best
    answer is returned, so that the stage is still timed."""
    prompts, groups = sample_and_judge(
        loaded, tasks, judge, config, samples=samples, clock=clock, what="self-improvement"
    )
    kept, best = [], []
    for prompt, group in zip(prompts, groups, strict=True):
        score, gen = max(group, key=lambda x: x[0])
        best.append((prompt, _whole(gen, loaded)))
        if score >= threshold and not gen.truncated:
            kept.append(best[-1])
    scores = [score for group in groups for score, _ in group]
    report = {
        "prompts": len(prompts),
        "prompts_planned": len(tasks),
        "samples": len(scores),
        "kept": len(kept),
        "sampled_judged": sum(scores) / len(scores),
    }
    print(
        f"self-improvement: kept {len(kept)} of {len(prompts)} prompts "
        f"(best of {samples} judged >= {threshold:g}); "
        f"mean judged score of the samples {report['sampled_judged']:.2f}"
    )
    if not kept and _rehearsing(clock):
        print(f"{_TIMED_ANYWAY}: each prompt's best answer")
        return best, report
    return kept, report


def write_reasoning(
    loaded: LoadedModel,
    records: Sequence[dict[str, Any]],
    judge: judging.Judge,
    config: evaluation.EvalConfig,
    *,
    samples: int = 4,
    clock: Clock | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Reasoning for the rows whose data set wrote none (``reasoned: False``: the answer alone,
    :mod:`tunixkit.mix`), by rejection sampling: the model answers each such prompt ``samples``
    times, and its best answer in the format (judged, whole: not cut by the generation limit) is
    judged again with the data set's answer behind the same reasoning, so that the two differ only
    in their answer. The row's target becomes the one the judge scores higher: the model's own
    answer where it scores at least as high (``"model"``), else the data set's answer after the
    model's reasoning (``"data"``). Every kept target's reasoning is the model's, written for that
    row. Rows with no whole answer in the format, and rows the clock left unsampled, are left out;
    the other rows pass as they are. Returns (rows to train on, report: rows, sampled, kept, and by
    domain rows / sampled / model / data)."""
    todo = [r for r in records if r.get("reasoned") is False]
    kept: dict[int, dict[str, Any]] = {}
    report: dict[str, Any] = {"rows": len(todo), "sampled": 0, "kept": 0, "by_domain": {}}
    if todo:
        prompts, groups = sample_and_judge(
            loaded, todo, judge, config, samples=samples, clock=clock, what="reasoning"
        )
        best = []
        for group in groups:
            whole = [
                (s, g.text) for s, g in group if not g.truncated and rewards.has_format(g.text)
            ]
            best.append(max(whole, key=lambda x: x[0]) if whole else None)
        judged = [(i, b) for i, b in enumerate(best) if b is not None]
        references = judge.scores(
            [todo[i]["prompt"] for i, _ in judged],
            [_with_reasoning(todo[i]["response"], text, loaded) for i, (_, text) in judged],
        )
        for (i, (score, text)), reference in zip(judged, references, strict=True):
            own = score >= reference
            target = text if own else _with_reasoning(todo[i]["response"], text, loaded)
            kept[i] = {
                **todo[i],
                "response": target + loaded.chat.end_of_turn,
                "reasoned": True,
                "answer_by": "model" if own else "data",
                "reference": todo[i]["response"],
            }
        report["sampled"], report["kept"] = len(prompts), len(kept)
        for i, r in enumerate(todo):
            row = report["by_domain"].setdefault(
                r["domain"], {"rows": 0, "sampled": 0, "model": 0, "data": 0}
            )
            row["rows"] += 1
            row["sampled"] += i < len(prompts)
            if i in kept:
                row[kept[i]["answer_by"]] += 1
        print(
            f"reasoning written by the model for {report['kept']} of {len(todo)} rows without "
            f"reasoning (best of {samples}); the judge preferred the model's own answer on "
            f"{sum(d['model'] for d in report['by_domain'].values())}, the data set's after the "
            f"model's reasoning on the rest; {len(todo) - report['kept']} left out (no whole "
            f"answer in the format, or not sampled in time); by domain {report['by_domain']}"
        )
    out, k = [], 0
    for r in records:
        if r.get("reasoned") is False:
            if k in kept:
                out.append(kept[k])
            k += 1
        else:
            out.append(r)
    return out, report


def sft_rows(
    stages: Stages,
    train: Sequence[dict[str, Any]],
    recipe: Pipeline,
    judge: judging.Judge,
    sampling: evaluation.EvalConfig,
) -> list[dict[str, Any]]:
    """Stage 1's rows: the recipe's ``domain_shares`` of ``train`` (each row once; all of it without
    shares, as in smoke), the rows without reasoning of their own given the start model's
    (:func:`write_reasoning`, on half the ``"sft"`` stage's clock, timed, sized by a rehearsal,
    kept in ``sft/reasoned.jsonl`` so that a rerun trains on the same rows), then each domain's
    share exactly (:func:`tunixkit.domains.take_shares`, its table printed)."""
    session = stages.session
    shared = domains.take_shares(train, recipe.domain_shares, recipe.train_tasks, say=False)
    rows = list({id(r): r for r in shared}.values())  # each row once: the pass samples it once
    unreasoned = [r for r in rows if r.get("reasoned") is False]
    sampled = session.sized(len(unreasoned), label="reasoning")  # a rehearsal: a few
    rows = [r for r in rows if r.get("reasoned", True)] + unreasoned[:sampled]

    def reasoned() -> list[dict[str, Any]]:
        path, mesh = stages.base_path, stages.mesh
        policy = models.load_model(recipe.model_id, path=path, mesh=mesh, verbose=False)
        out, report = write_reasoning(
            policy, rows, judge, sampling, samples=recipe.samples, clock=stages.clock("sft", 0.5)
        )
        stages.note("sft", reasoning=report)  # in stages.json, and 06's summary.json
        return out

    if unreasoned and not stages.done("sft"):
        with session.timed("reasoning", items=sampled):
            rows = stages.cached("sft", "reasoned.jsonl", reasoned)
    elif unreasoned:  # stage 1 is done: the rows it trained on
        rows = stages.cached("sft", "reasoned.jsonl", list)
    return domains.take_shares(rows, recipe.domain_shares, recipe.train_tasks)


def _with_reasoning(reference: str, sampled: str, loaded: LoadedModel) -> str:
    """The data set's answer (``reference``, an answer without reasoning) behind the reasoning
    block of ``sampled``: judged beside the sample, the two differ only in their answer.

    >>> from types import SimpleNamespace
    >>> from tunixkit import families
    >>> chat = SimpleNamespace(chat=families.GEMMA_CHAT)
    >>> sampled = "<reasoning>r</reasoning><answer>A</answer>"
    >>> _with_reasoning("<answer>B</answer><end_of_turn>", sampled, chat)
    '<reasoning>r</reasoning>\\n<answer>B</answer>'
    """
    reasoning = sampled[
        sampled.index(prompting.REASONING_START) : sampled.index(prompting.REASONING_END)
        + len(prompting.REASONING_END)
    ]
    answer = reference.removesuffix(loaded.chat.end_of_turn).strip()
    return f"{reasoning}\n{answer}"


def weighted_rewards(weights: dict[str, float], judge: judging.Judge) -> list[Any]:
    """GRPO's reward functions from ``{name: weight}``: ``"judge"`` is ``judge``, any other name a
    reward of :data:`tunixkit.rewards.REWARDS`; each keeps its name, so tunix logs it on its own.

    >>> [f.__name__
    ...  for f in weighted_rewards({"structure": 1.0, "judge": 2.0, "relevance": 0.0}, None)]
    ['structure', 'judge']
    """
    known = {"judge": judge, **rewards.REWARDS}
    unknown = sorted(n for n in weights if n not in known)
    if unknown:
        raise ValueError(f"reward_weights: unknown reward(s) {unknown}; known: {sorted(known)}")
    return [rewards.weighted(known[n], w, name=n) for n, w in weights.items() if w]


@dataclasses.dataclass(frozen=True)
class StageSettings:
    """What one stage trains with (:func:`stage_settings`): the stages build their trainers from
    it and the memory plan compiles it, so no stage's value is written twice."""

    kind: str  # its trainer: "sft", "dpo" (the preference stage: ``algorithm``) or "grpo"
    model_id: str
    lora_rank: int | None  # None: full fine-tuning
    lora_alpha: float
    steps: int
    learning_rate: float
    checkpoint_every: int
    batch_size: int = 0  # SFT rows or preference pairs a step
    max_len: int = 0  # SFT tokens a row
    max_prompt_length: int = 0  # the preference stage's, as long as GRPO's prompts
    max_response_length: int = 0
    algorithm: str = "dpo"  # "dpo", "orpo" or "simpo"
    beta: float = 0.1
    lambda_orpo: float = 0.1  # ORPO's preference-loss weight (tunix's default)
    simpo_gamma: float = 0.0
    lora_modules: str | None = None  # a qwix regex; None: the family's
    grpo: rl.GRPOSettings | None = None
    eval_every: int = 10**9  # a stage is evaluated after it (Evaluations), not by its trainer
    qlora: bool = False
    clip_norm: float | None = 1.0  # global-norm gradient clipping (training.optimizer's default)


def stage_settings(
    recipe: Pipeline | Agentic, name: str, *, steps: int | None = None
) -> StageSettings:
    """The settings stage ``name`` trains with, from ``recipe``: "sft" (``sft_*``, at
    ``sft_lora_rank``), "improve" (``improve_*``), "preference" (``preference_*``, ``algorithm``)
    and "grpo" (``recipe.grpo``), the last three at ``lora_rank``. ``steps``: an SFT stage's
    steps instead of the recipe's (its checkpoints follow).

    >>> from tunixkit import recipes
    >>> s = stage_settings(recipes.Pipeline.full(), "preference")
    >>> s.kind, s.steps, s.lora_rank, s.checkpoint_every
    ('dpo', 2400, 64, 800)
    """
    common = dict(model_id=recipe.model_id, lora_alpha=recipe.lora_alpha)
    if name in ("sft", "improve"):
        first = name == "sft"
        n = steps if steps is not None else recipe.sft_steps if first else recipe.improve_steps
        return StageSettings(
            "sft",
            **common,
            lora_rank=recipe.sft_lora_rank if first else recipe.lora_rank,
            steps=n,
            learning_rate=recipe.sft_learning_rate if first else recipe.improve_learning_rate,
            checkpoint_every=max(10, n // 4),
            batch_size=recipe.batch_size,
            max_len=recipe.max_len,
        )
    if name == "preference":
        return StageSettings(
            "dpo",
            **common,
            lora_rank=recipe.lora_rank,
            steps=recipe.preference_steps,
            learning_rate=recipe.preference_learning_rate,
            checkpoint_every=max(10, recipe.preference_steps // 3),
            batch_size=recipe.preference_batch_size,
            max_prompt_length=recipe.grpo.max_prompt_length,
            max_response_length=recipe.max_response_length,
            algorithm=recipe.algorithm,
            beta=recipe.beta,
            simpo_gamma=recipe.simpo_gamma,
        )
    if name == "grpo":
        g = recipe.grpo
        return StageSettings(
            "grpo",
            **common,
            lora_rank=recipe.lora_rank,
            steps=g.num_steps,
            learning_rate=g.learning_rate,
            checkpoint_every=g.checkpoint_every,
            lora_modules=getattr(recipe, "grpo_lora_modules", None),
            grpo=g,
        )
    raise ValueError(f"unknown stage {name!r}; known: sft, improve, preference, grpo")


def train_stage(
    stages: Stages,
    name: str,
    trainer: Any,
    batches: Sequence[Any],
    lora: nnx.Module,
    base: LoadedModel,
    recipe: Pipeline | Agentic,
    mesh: Mesh | None,
    *,
    metric_names: Sequence[str] = ("loss",),
    trace: profiling.StepTrace | None = None,
    judged: bool = True,
) -> str | None:
    """Train the stage's ``trainer`` (any tunix trainer) on ``batches`` under the stage's clock,
    its metrics in the stage's folder (``trace``: finished when training ends), then export the
    model (its ``export/hf`` is returned), mark the stage done and (with ``judged``) make it the
    judged model until :func:`adopt` decides. A stage the session clock stopped is finished with
    the steps it trained: the clock stopped it in time for this export and the evaluation after it
    (a session killed before the export continues the stage from its checkpoint next time). Not
    finished: a stage ``OUTPUT_DIR/STOP`` stopped (the next run continues it), or one that trained
    no step."""
    result = training.run(
        trainer,
        batches,
        mesh=mesh,
        metrics_file=stages.dir(name) / "metrics.jsonl",
        metric_names=metric_names,
        session=stages.clock(name),
        label=name,
    )
    if trace:
        trace.finish(result.trained)
    if result.stopped == "stop requested" or result.steps == 0:
        why = "OUTPUT_DIR/STOP" if result.steps else "no training step fit the session"
        print(f"{name}: not finished ({why}); a rerun or a session with RESUME_FROM continues it")
        return None
    with stages.session.timed("export"):  # the session keeps the last export's time in reserve
        exports = models.export(
            lora,
            base,
            stages.dir(name) / "export",
            lora_rank=stage_settings(recipe, name).lora_rank,
            lora_alpha=recipe.lora_alpha,
            mesh=mesh,
        )
    stages.finish(name, exports["hf"], steps=result.steps, stopped=result.stopped)
    if result.stopped == "session clock":
        print(
            f"{name}: the session clock stopped training after {result.steps} steps; the stage is "
            "finished with them (exported, evaluated, judged)"
        )
    if judged:
        path = checkpoints.write_judged(
            exports["orbax"], stages.session.judged_dir(), stages.steps()
        )
        print(f"{name}: the judged model is now {path}")
    return str(exports["hf"])


@dataclasses.dataclass(frozen=True)
class Exported:
    """A one-stage run's export (:func:`export_judged`): ``export/hf``, ``export/orbax``, and the
    judged copy written from it at training step ``step`` by the session ``clock``."""

    hf: pathlib.Path
    orbax: pathlib.Path
    judged: pathlib.Path
    step: int
    clock: session.Session


def export_judged(
    model: nnx.Module,
    base: LoadedModel,
    clock: session.Session,
    step: int,
    recipe: SFT | GRPO | DPO | None = None,
    *,
    mesh: Mesh | None = None,
) -> Exported:
    """Export a one-stage run's trained ``model`` (the LoRA of ``recipe``, its ``lora_rank`` and
    ``lora_alpha``, merged into ``base``; without a recipe, ``model`` itself) to
    ``OUTPUT_DIR/export/{hf,orbax}`` (:func:`tunixkit.models.export`) and write it as the judged
    model at ``step`` (:func:`tunixkit.checkpoints.write_judged`, under ``clock.judged_dir()``),
    its path printed. Timed as the session's ``export`` (kept in reserve), and run before the final
    evaluation, so a session that runs out of time still leaves a model. :func:`finish` then
    keeps the better model and uploads it."""
    lora = (
        {} if recipe is None else {"lora_rank": recipe.lora_rank, "lora_alpha": recipe.lora_alpha}
    )
    with clock.timed("export"):
        exports = models.export(model, base, clock.out_dir / "export", mesh=mesh, **lora)
        judged = checkpoints.write_judged(exports["orbax"], clock.judged_dir(), step=step)
    print(f"the judged model: {judged}")
    return Exported(exports["hf"], exports["orbax"], judged, step, clock)


@dataclasses.dataclass(frozen=True)
class Adoption:
    """What :func:`finish` decided: whether training's model stays the judged one, why, where the
    judged model is, its Orbax export (what a Kaggle Model upload takes) and the handle it was
    uploaded to (None: not uploaded)."""

    adopted: bool
    why: str
    judged: pathlib.Path
    orbax: pathlib.Path
    kaggle_model: str | None = None

    def report(self) -> dict[str, Any]:
        """What ``summary.json`` keeps of it."""
        return {"adopted": self.adopted, "why": self.why, "judged": str(self.judged)}


def finish(
    exported: Exported,
    before: evaluation.EvalResult,
    after: evaluation.EvalResult,
    *,
    start: LoadedModel,
    kaggle_model: str | None,
    notes: str,
    mesh: Mesh | None = None,
) -> Adoption:
    """The end of a one-stage run, after its final evaluation: :func:`_keep_better` decides
    whether ``exported`` or the ``start`` model is the judged model, then that model's Orbax export
    is uploaded to ``kaggle_model`` (:func:`tunixkit.session.publish`; ``notes`` say what it is, and
    whether it is the start model). The :class:`Adoption` holds the handle
    (``unrestricted_kaggle_model``)."""
    clock = exported.clock
    kept = _keep_better(
        before,
        after,
        judged=exported.judged,
        orbax=exported.orbax,
        start=start,
        out_dir=clock.out_dir,
        judged_dir=clock.judged_dir(),
        step=exported.step,
        mesh=mesh,
    )
    handle = session.publish(
        kept.orbax,
        kaggle_model,
        notes=notes + ("" if kept.adopted else ": not adopted, the start model"),
        rehearsal=clock.rehearsal is not None,
    )
    return dataclasses.replace(kept, kaggle_model=handle)


def _keep_better(
    before: evaluation.EvalResult,
    after: evaluation.EvalResult,
    *,
    judged: pathlib.Path,
    orbax: pathlib.Path,
    start: LoadedModel,
    out_dir: str | pathlib.Path,
    judged_dir: str | pathlib.Path,
    step: int,
    mesh: Any = None,
    alpha: float = 0.05,
) -> Adoption:
    """The trained model (already written as the judged one, ``judged``) stays the judged model
    unless it is worse than the model training started from on the same questions (``before``:
    ``start``'s evaluation, ``after``: the export's): fewer right, and McNemar's paired test says
    that is unlikely to be chance (p < ``alpha``). Then ``start``, exported once into
    ``out_dir/start/export``, is written as the judged model in its place (``judged_dir``, at
    ``step``), and the run ends with the better model. Printed either way. ``orbax``: the trained
    model's Orbax export; the :class:`Adoption` names the better model's, the one to upload."""
    p = evaluation.paired(before, after)
    worse = p.difference < 0 and p.p_value < alpha
    why = (
        f"greedy accuracy {before.accuracy:.3f} -> {after.accuracy:.3f} on the same {after.n} "
        f"questions ({p.only_a} right only before training, {p.only_b} only after; McNemar "
        f"p = {p.p_value:.3g})"
    )
    if not worse:
        print(f"adopted: {why}; the judged model is the trained one: {judged}")
        return Adoption(True, why, judged, pathlib.Path(orbax))
    export_dir = pathlib.Path(out_dir) / "start" / "export"
    orbax = export_dir / "orbax"
    if not (orbax / "params").is_dir():
        fresh = models.load_model(
            start.model_id, path=start.path, mesh=mesh, dtype=start.dtype, verbose=False
        )
        orbax = models.export(fresh.model, fresh, export_dir, mesh=mesh)["orbax"]
    path = checkpoints.write_judged(orbax, judged_dir, step)
    why += f", worse with p < {alpha}"
    print(f"NOT adopted: {why}; the judged model is the start model again: {path}")
    return Adoption(False, why, path, orbax)


def adopt(
    stages: Stages,
    name: str,
    recipe: Pipeline | Agentic,
    *,
    guard: bool = True,
) -> bool:
    """Whether the finished stage ``name`` is adopted as the session's best model
    (:meth:`Stages.decide`), from the paired change of its held-out greedy judged score against the
    model it started from (``domains_<name>.jsonl`` of :meth:`Stages.evaluate`; without both
    evaluations it is adopted, and said so). A stage that is not adopted gives the judged copy
    back to the better model: an earlier stage's export, or the start model (``stages.base_path``,
    else ``recipe.model_id``), exported once for it into ``OUTPUT_DIR/start/export``. Decided once:
    a rerun reads the decision back. ``guard``: :meth:`Stages.decide`'s."""
    if "adopted" in stages.state[name]:
        return bool(stages.state[name]["adopted"])
    before = stages.best_before(name) or "start"
    evaluated = all((stages.out_dir / f"domains_{n}.jsonl").is_file() for n in (before, name))
    change = domains.paired_change(stages.out_dir, before, name)["all"] if evaluated else None
    if stages.decide(name, change, guard=guard):
        return True
    if before == "start":
        orbax = stages.dir("start") / "export" / "orbax"
        if not (orbax / "params").is_dir():
            with stages.session.timed("export"):
                path, mesh = stages.base_path, stages.mesh
                start = models.load_model(recipe.model_id, path=path, mesh=mesh, verbose=False)
                orbax = models.export(start.model, start, stages.dir("start") / "export")["orbax"]
    else:
        orbax = pathlib.Path(stages.state[before]["export"]).parent / "orbax"
    judged = checkpoints.write_judged(orbax, stages.session.judged_dir(), stages.steps())
    print(f"{name}: the judged model is {before}'s again: {judged}")
    return False


def stage(body: Callable[..., str | None]) -> Callable[..., str | None]:
    """A stage function ``body(stages, name, ...)`` run through :meth:`Stages.run`: done, skipped,
    ready and not started are decided there, once, and ``body`` only trains."""

    @functools.wraps(body)
    def run(stages: Stages, name: str, *args: Any, **kwargs: Any) -> str | None:
        return stages.run(name, lambda: body(stages, name, *args, **kwargs))

    return run


def start_stage(
    stages: Stages,
    name: str,
    recipe: Pipeline | Agentic,
    mesh: Mesh | None,
    *,
    frozen_reference: bool = False,
) -> tuple[LoadedModel, nnx.Module]:
    """(the loaded start model, the model to train), on ``mesh``: the stage's start
    (:meth:`Stages.start_path`, else ``recipe.model_id``), with LoRA of the stage's rank on it (on
    its :func:`stage_settings`' ``lora_modules``), or itself. Full fine-tuning with
    ``frozen_reference`` (GRPO's KL, DPO) trains a second copy instead."""
    path = stages.start_path(name)
    base = models.load_model(recipe.model_id, path=path, mesh=mesh, verbose=False)
    settings = stage_settings(recipe, name)
    model = models.trainable(
        base,
        lora_rank=settings.lora_rank,
        lora_alpha=settings.lora_alpha,
        lora_modules=settings.lora_modules,
        reference=frozen_reference,
        mesh=mesh,
        verbose=False,
    )
    return base, model


@stage
def sft_stage(
    stages: Stages,
    name: str,
    pairs: Sequence[tuple[str, str]],
    recipe: Pipeline | Agentic,
    *,
    steps: int | None = None,
    judged: bool = True,
) -> str | None:
    """A LoRA SFT stage on (prompt, completion) ``pairs`` with :func:`stage_settings` (``steps``:
    instead of the recipe's); returns its export (None: not finished). ``judged``: as in
    :func:`train_stage`."""
    s = stage_settings(recipe, name, steps=steps)
    mesh = stages.mesh
    base, lora = start_stage(stages, name, recipe, mesh)
    batches = training.sft_dataset(
        pairs, base.tokenizer, num_batches=s.steps, max_len=s.max_len, batch_size=s.batch_size
    )
    config = training.trainer_config(
        stages.dir(name),
        max_steps=s.steps,
        eval_every=s.eval_every,
        checkpoint_every=s.checkpoint_every,
        description=name,
    )
    trainer = training.sft_trainer(
        lora,
        training.optimizer(s.learning_rate, stages.session.schedule_steps(s.steps, label=name)),
        config,
        pad_id=base.tokenizer.pad_id(),
    )
    return train_stage(stages, name, trainer, batches, lora, base, recipe, mesh, judged=judged)


@stage
def improve_stage(
    stages: Stages,
    name: str,
    tasks: Sequence[dict[str, str]],
    judge: judging.Judge,
    sampling: evaluation.EvalConfig,
    recipe: Pipeline,
    *,
    replay: Sequence[tuple[str, str]] = (),
) -> str | None:
    """A self-improvement stage: :func:`self_improve` on ``tasks`` with the model the stage starts
    from (half the stage's time at most), the kept answers written to ``<name>/kept.jsonl`` (a
    resumed stage trains on the same ones), then a short SFT (``recipe.improve_*``) on them and
    as many ``replay`` pairs (earlier traces: the kept answers crowd into the easy domains, and on
    them alone the model forgets the rest). Skipped, and said, when none is kept."""

    def kept() -> list[dict[str, Any]]:
        start, mesh = stages.start_path(name), stages.mesh
        policy = models.load_model(recipe.model_id, path=start, mesh=mesh, verbose=False)
        kept, report = self_improve(
            policy,
            tasks,
            judge,
            sampling,
            samples=recipe.samples,
            threshold=recipe.improve_threshold,
            clock=stages.clock(name, part=0.5),
        )
        stages.note(name, sampled=report)  # in stages.json: a rerun reports it too
        return [{"prompt": p, "completion": c} for p, c in kept]

    with stages.session.timed(name, items=len(tasks)):
        rows = stages.cached(name, "kept.jsonl", kept)
    if not rows:  # the session goes on with the next stage
        stages.skip(name, "no sampled answer was kept (see the counts above)")
        return None
    pairs = [(r["prompt"], r["completion"]) for r in rows] + list(replay[: len(rows)])
    return sft_stage(stages, name, pairs, recipe)


@stage
def preference_stage(
    stages: Stages,
    name: str,
    tasks: Sequence[dict[str, str]],
    judge: judging.Judge,
    sampling: evaluation.EvalConfig,
    recipe: Pipeline,
) -> str | None:
    """A LoRA DPO / ORPO / SimPO stage (``recipe.algorithm``) on the pairs :func:`judged_pairs`
    makes of ``tasks`` with the model the stage starts from (half the stage's time at most),
    written to ``<name>/pairs.jsonl`` (a resumed stage trains on the same ones; GRPO's
    :func:`contested` reads them). Skipped, and said, when the judge told no prompt's answers
    apart."""

    def judged() -> list[dict[str, str]]:
        start, mesh = stages.start_path(name), stages.mesh
        policy = models.load_model(recipe.model_id, path=start, mesh=mesh, verbose=False)
        clock = stages.clock(name, part=0.5)
        return judged_pairs(policy, tasks, judge, sampling, samples=recipe.samples, clock=clock)

    with stages.session.timed("pairs", items=len(tasks)):
        pairs = stages.cached(name, "pairs.jsonl", judged)
    if not pairs:  # the session goes on with GRPO, on every training prompt
        stages.skip(name, "the judge told no prompt's answers apart")
        return None
    s = stage_settings(recipe, name)
    mesh = stages.mesh
    base, lora = start_stage(stages, name, recipe, mesh, frozen_reference=s.algorithm == "dpo")
    batches = preferences.preference_dataset(
        pairs,
        base.tokenizer,
        batch_size=s.batch_size,
        num_batches=s.steps,
        max_prompt_length=s.max_prompt_length,
        max_response_length=s.max_response_length,
    )
    trainer = preferences.trainer(
        s,
        lora,
        base.model,
        output_dir=stages.dir(name),
        schedule_steps=stages.session.schedule_steps(s.steps, label=name),
        description=name,
    )
    metric_names = ("loss", "rewards/margin", "rewards/accuracy")
    return train_stage(
        stages, name, trainer, batches, lora, base, recipe, mesh, metric_names=metric_names
    )


def contested(
    records: Sequence[dict[str, str]],
    pairs_file: str | pathlib.Path,
    system_prompt: str | None,
    *,
    family: str = "gemma3",
) -> list[dict[str, str]]:
    """GRPO's rows (``question``, ``answer``: a math answer for the checker, "" for the other
    domains, which the judge and the rubric reward; ``domain``; counted by domain) of the
    ``records`` whose prompt appears in ``pairs_file`` (:func:`judged_pairs`' JSONL: the prompts
    on which the judge told the model's samples apart), or of all of them when the file is
    missing; ``family``: the chat template the pairs' prompts were written in. GRPO learns only
    where a group's rewards differ: on prompts every sample already aces (or all fail alike) each
    advantage is 0 and the step is spent on the KL term. A domain none of whose prompts is in the
    file keeps as many of its first prompts as the mean per domain (said): its other rewards may
    still tell its samples apart.

    >>> import tempfile
    >>> pairs = pathlib.Path(tempfile.mkdtemp()) / "pairs.jsonl"
    >>> _ = data.write_jsonl([{"prompt": prompting.format_prompt("a1", None)}], pairs)
    >>> rows = [{"domain": d, "prompt": f"{d}{i}"} for d in "ab" for i in (1, 2)]
    >>> contested(rows, pairs, None)[1]
    GRPO prompts: 1 of 4, those on which the judge told samples apart (pairs.jsonl)
    GRPO prompts: 1 each of b too (the judge told none apart; other rewards may)
    GRPO prompts by domain: {'a': 1, 'b': 1}
    {'question': 'b1', 'answer': '', 'domain': 'b'}
    """
    path = pathlib.Path(pairs_file)
    if not path.is_file():
        print(f"GRPO prompts: all {len(records)} ({path} not found)")
        return _grpo_rows(records)
    seen = {row["prompt"] for row in data.read_rows(path, required=("prompt",))}
    kept = [
        r
        for r in records
        if prompting.format_prompt(r["prompt"], system_prompt, family=family) in seen
    ]
    if not kept:
        print(f"GRPO prompts: none of {len(records)} is in {path}; training on all of them")
        return _grpo_rows(records)
    print(
        f"GRPO prompts: {len(kept)} of {len(records)}, "
        f"those on which the judge told samples apart ({path.name})"
    )
    # a domain none of whose prompts the judge told apart still trains: its other rewards (the
    # answer checker on math, the rubric checks) may tell samples apart where the judge did not
    told = {r.get("domain", "general") for r in kept}
    each = max(1, len(kept) // len(told))
    missing = [
        d for d in dict.fromkeys(r.get("domain", "general") for r in records) if d not in told
    ]
    for d in missing:
        kept += [r for r in records if r.get("domain", "general") == d][:each]
    if missing:
        print(
            f"GRPO prompts: {each} each of {'/'.join(missing)} too (the judge told none apart; "
            "other rewards may)"
        )
    return _grpo_rows(kept)


def _grpo_rows(records: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    rows = [
        {
            "question": r["prompt"],
            "answer": r.get("answer", ""),
            "domain": r.get("domain", "general"),
        }
        for r in records
    ]
    print(f"GRPO prompts by domain: {domains.by_domain(rows)}")
    return rows


@stage
def grpo_stage(
    stages: Stages,
    name: str,
    records: Sequence[dict[str, str]],
    reward_fns: Sequence[rl.RewardFn],
    recipe: Pipeline,
    *,
    trace: profiling.StepTrace | None = None,
) -> str | None:
    """A GRPO stage (LoRA on the shared reference, KL) with ``reward_fns``, its prompts under the
    recipe's system prompt; returns its export. ``trace``: where the time of its first steps goes
    (written when they are done, or when the stage's training ends first)."""
    mesh, system_prompt = stages.mesh, recipe.eval.system_prompt
    base, lora = start_stage(stages, name, recipe, mesh, frozen_reference=True)
    learner, _ = rl.build_grpo(
        lora,
        base.model,
        base.tokenizer,
        mesh=mesh,
        settings=recipe.grpo,
        reward_fns=reward_fns,
        output_dir=stages.dir(name),
        eos_ids=base.eos_ids,
        vocab_size=families.vocab_size(base.config),
        family=base.family,
        schedule_steps=stages.session.schedule_steps(recipe.grpo.num_steps, label=name),
        trace=trace,
    )
    limit = recipe.grpo.max_prompt_length
    prompts = {
        prompting.format_prompt(r["question"], system_prompt, family=base.family) for r in records
    }
    lengths = [len(base.tokenizer.encode(p)) + 1 for p in prompts]  # + BOS
    evaluation.count_cut(name, lengths, limit, how=evaluation.CUT_HOW, clock=stages.session)
    batches = data.grpo_dataset(
        records,
        batch_size=recipe.grpo.batch_size,
        num_batches=recipe.grpo.num_steps,
        seed=0,
        system_prompt=system_prompt,
        family=base.family,
        fit=evaluation.prompt_fitter(base.tokenizer, limit),
    )
    return train_stage(stages, name, learner, batches, lora, base, recipe, mesh, trace=trace)
