"""The session a notebook runs in: one clock, one output folder, continuation, and upload.

A Kaggle session ends after 9 hours, whatever is running; a new one starts with an empty
``/kaggle/working`` and sees the last one's output only read-only, under ``/kaggle/input``. So:

- :class:`Session` counts ``SESSION_HOURS`` from the notebook's first cell. Training asks it
  :meth:`Session.must_stop` before every step: it stops while there is still time, measured from
  this run's own timings, for the final checkpoint, the export and the evaluation after training;
  :meth:`Session.fit` shrinks that evaluation instead of running past the limit.
- :func:`prepare` keeps ``OUTPUT_DIR/recipe.json`` and refuses to continue a run made with other
  settings (naming the fields that differ), and continues from ``RESUME_FROM``, a read-only copy of
  a previous session's output: its last checkpoint, metrics and stored evaluations are copied in.
- :func:`upload_to_kaggle` publishes the Orbax export as a Kaggle Model.
- :class:`Rehearsal` (``REHEARSAL = True``): the notebook runs at the recipe's real shapes for a
  few steps of every stage and a few items of every evaluation, timed, in ``OUTPUT_DIR/rehearsal``,
  and :meth:`Session.rehearsal_report` projects the whole run onto the session (steps that fit,
  when the export and the last evaluation end, peak memory, disk) into
  ``OUTPUT_DIR/rehearsal.json``. Each part is also said and appended to
  ``OUTPUT_DIR/rehearsal_events.jsonl`` as it is measured, so that a rehearsal cut short keeps what
  it measured.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import dataclasses
import json
import os
import pathlib
import shutil
import statistics
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from tunixkit import hosts, runtime

__all__ = [
    "Clock",
    "RecipeMismatch",
    "disk_usage",
    "Rehearsal",
    "ResumeError",
    "Session",
    "StageClock",
    "publish",
]

DEFAULT_HOURS = {"kaggle": 9.0, "colab": 12.0, "local": None}  # a session's hard limit, by platform
START_ENV = "TUNIXKIT_SESSION_START"  # set by the first cell: when this session's clock started
RECIPE_FILE, TIMINGS_FILE = "recipe.json", "timings.json"
STOP_FILE = "STOP"  # OUTPUT_DIR/STOP: training stops (see Session.stop_requested)
VERSION_KEY = "tunixkit"  # recipe.json: the code that wrote the run (runtime.code_id)
REHEARSAL_DIR, REHEARSAL_FILE = "rehearsal", "rehearsal.json"  # a rehearsal's run and its report
KAGGLE_WORKING = pathlib.Path("/kaggle/working")  # what a Kaggle notebook's output keeps
REHEARSAL_EVENTS = "rehearsal_events.jsonl"  # each part as it is measured (a rehearsal cut short)
_NOT_CARRIED = {
    "export",
    "checkpoints",
    "executed.ipynb",
    "previous",
    STOP_FILE,
    REHEARSAL_DIR,
}  # not copied by RESUME_FROM (nor taken for a stage's folder)


class RecipeMismatch(RuntimeError):
    """OUTPUT_DIR or RESUME_FROM holds a run made with other settings."""


class ResumeError(RuntimeError):
    """RESUME_FROM is not a previous session's output."""


@runtime_checkable
class Clock(Protocol):
    """What training (:func:`tunixkit.training.run`) asks of a session clock before and after each
    step: :class:`Session` and each stage's :class:`StageClock` are clocks, and so is a test's
    stand-in (:class:`tunixkit.testing.ScriptedClock`)."""

    timings: dict[str, float]  # seconds measured by name (``record``), kept across sessions
    rehearsal: Rehearsal | None  # REHEARSAL = True: what the run measures for the real one
    stop_file: pathlib.Path  # OUTPUT_DIR/STOP, named when it stops training

    def elapsed(self) -> float:
        """Seconds since the session's first cell."""
        ...

    def remaining(self) -> float:
        """Seconds left (infinite without a limit)."""
        ...

    def reserve(self) -> float:
        """Seconds kept for the work after training."""
        ...

    def must_stop(self, next_step_seconds: float = 0.0) -> bool:
        """Whether training must stop now to leave the reserve after one more step."""
        ...

    def stop_requested(self, steps: int) -> bool:
        """Whether the user asked training to stop (``OUTPUT_DIR/STOP``) with ``steps`` done."""
        ...

    def steps_that_fit(self, seconds_per_step: float) -> int | None:
        """How many more steps fit before training must stop (None: no limit)."""
        ...

    def record(self, name: str, seconds: float) -> None:
        """Keep a duration under ``name`` in ``timings``."""
        ...


@dataclasses.dataclass
class Session:
    """A session clock and the timings that size the work after training (see module docstring)."""

    out_dir: pathlib.Path
    hours: float | None  # None: no limit (local runs)
    started: float  # time.time() at the notebook's first cell
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    rehearsal: Rehearsal | None = None  # REHEARSAL = True: what this run measures for the real one
    # where the judged model goes (<root>/ckpts/actor/<step>/model_params); None: out_dir
    judged_root: pathlib.Path | None = None
    # a rehearsal's report that sizes the learning-rate schedules (REHEARSAL_FROM); None: the one
    # in out_dir, if any
    plan: pathlib.Path | None = None
    # prompts over their limit by where they were cut ("generate": evaluations and judged passes;
    # a GRPO stage's name), and "<where>_seen": the prompts seen there, in this session's timed
    # blocks and stages (record_cut); notebook 06 writes them to summary.json
    prompts_cut: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)

    @classmethod
    def start(cls, out_dir: str | pathlib.Path, hours: float | None = None) -> Session:
        """The clock of this notebook: ``hours`` (``SESSION_HOURS``) or the platform's limit,
        counted from the first cell (``$TUNIXKIT_SESSION_START``) or from now."""
        env = runtime.detect_environment()
        hours = DEFAULT_HOURS[env] if hours is None else hours
        started = float(os.environ.get(START_ENV) or time.time())
        if env != "local":  # a kernel restart resets the variable, not the session's clock
            started = _session_start(started)
        out = pathlib.Path(out_dir)
        stored = out / TIMINGS_FILE
        timings = json.loads(stored.read_text()) if stored.is_file() else {}
        # on Kaggle the competition's template looks in /kaggle/working/ckpts/actor, whatever
        # OUTPUT_DIR (inside /kaggle/working) is
        inside = env == "kaggle" and out.resolve().is_relative_to(KAGGLE_WORKING.resolve())
        return cls(out, hours, started, timings, judged_root=KAGGLE_WORKING if inside else None)

    def judged_dir(self) -> pathlib.Path:
        """The folder whose ``ckpts/actor/<step>/model_params`` is the judged model
        (:func:`tunixkit.checkpoints.write_judged`): ``/kaggle/working`` on Kaggle (where the
        competition's template writes its checkpoints), else ``OUTPUT_DIR``."""
        return self.judged_root or self.out_dir

    def elapsed(self) -> float:
        return time.time() - self.started

    def remaining(self) -> float:
        """Seconds left in the session (infinite without a limit)."""
        return float("inf") if self.hours is None else self.hours * 3600 - self.elapsed()

    @property
    def margin(self) -> float:
        """Seconds kept free at the very end: 2% of the session, between 2 s and 5 min."""
        return 0.0 if self.hours is None else min(300.0, max(2.0, 0.02 * self.hours * 3600))

    @contextlib.contextmanager
    def timed(
        self, name: str, *, items: int | None = None, planned: int | None = None
    ) -> Iterator[None]:
        """Measure a block and keep its seconds under ``name`` (and ``items``, the questions it
        handled, under ``<name>_items``) in ``timings.json``, so a resumed session knows them too.
        A block that was skipped (a stored result reused) in well under a second keeps the old time.
        In a rehearsal the block is also an event of the projected schedule, scaled to ``planned``
        items (default: what :meth:`sized` recorded under ``name``)."""
        t0, began = time.perf_counter(), self.elapsed()
        outermost = _PASSES.get() is None  # an enclosing block counts this one's prompts cut
        with _passes() as (batches, cut):
            yield
        seconds = time.perf_counter() - t0
        if outermost:
            self.prompts_cut.update(cut)
        if self.rehearsal is not None:
            self.rehearsal.timed(
                name, began, seconds, items=items, generate_calls=batches, planned=planned
            )
        if name in self.timings and seconds < 1.0:
            return
        if items is not None:
            self.timings[f"{name}_items"] = items
        self.record(name, seconds)

    def record(self, name: str, seconds: float) -> None:
        """Keep a duration measured elsewhere (e.g. ``LoadedModel.load_seconds`` as ``"load"``)."""
        self.timings[name] = float(seconds)
        if hosts.is_writer():  # of several processes, process 0's timings (its clock decides)
            self.out_dir.mkdir(parents=True, exist_ok=True)
            (self.out_dir / TIMINGS_FILE).write_text(json.dumps(self.timings, indent=1))

    def reserve(self) -> float:
        """Seconds to keep after training: the evaluation after (as long as the one before took),
        the export (measured, or 3x reading the model until measured), the last checkpoint
        (measured by :func:`tunixkit.training.run`, or as long as reading the model), the margin."""
        t = self.timings
        export = t.get("export", 3.0 * t.get("load", 0.0))
        checkpoint = t.get("checkpoint", t.get("load", 0.0))
        return t.get("evaluation", 0.0) + export + checkpoint + self.margin

    def must_stop(self, next_step_seconds: float = 0.0) -> bool:
        """Whether training must stop now to leave :meth:`reserve` after one more step."""
        return self.remaining() - next_step_seconds < self.reserve()

    def steps_that_fit(self, seconds_per_step: float) -> int | None:
        """How many more steps of ``seconds_per_step`` fit before training must stop (None: no
        session limit)."""
        return _steps_that_fit(self, seconds_per_step)

    def part(self, fraction: float) -> StageClock:
        """A clock for a pass that makes a stage's data: it stops once ``fraction`` of the training
        time left (after :meth:`reserve`) is spent, leaving the rest to the training it feeds."""
        left = max(0.0, self.remaining() - self.reserve())
        return StageClock(self, time.time() + left * fraction)

    @property
    def stop_file(self) -> pathlib.Path:
        return self.out_dir / STOP_FILE

    def stop_requested(self, steps: int) -> bool:
        """Whether ``OUTPUT_DIR/STOP`` asks training to stop now, ``steps`` steps into the run: an
        empty file stops at the next step, a file holding a number N once N steps are done. Training
        then ends as the session clock ends it (a last checkpoint, the export and the evaluation).
        A continuing session (``RESUME_FROM``) does not carry the file over."""
        if not self.stop_file.is_file():
            return False
        text = self.stop_file.read_text().strip()
        if not text:
            return True
        if not text.isdigit():
            raise ValueError(
                f"{self.stop_file}: expected an empty file or a step number, found {text[:40]!r}"
            )
        return steps >= int(text)

    def sized(self, n: int, *, label: str = "evaluation", batch: int | None = None) -> int:
        """How many of ``n`` items (questions, prompts) this run handles under ``label``: all of
        them, or in a rehearsal :attr:`Rehearsal.items`, or two batches when the pass goes by
        ``batch`` items at a time (the projection scales them back to ``n``)."""
        if self.rehearsal is None:
            return n
        self.rehearsal.planned[label] = n
        return min(n, self.rehearsal.items if batch is None else 2 * batch)

    def fit(self, n: int, *, label: str = "evaluation") -> int:
        """How many of ``n`` questions the evaluation after training can take in the time left
        (at the pace of the evaluation before it); says so when that is fewer than ``n``. Of
        several processes, process 0's figure (:func:`tunixkit.hosts.agree`)."""
        per_item = self.timings.get(label, 0.0) / max(1.0, self.timings.get(f"{label}_items", n))
        budget = self.remaining() - self.margin
        fit = (
            n if per_item <= 0 or budget >= per_item * n else max(1, min(n, int(budget / per_item)))
        )
        fit = int(hosts.agree(fit))  # process 0's figure on every process (one evaluation)
        if fit == n:
            return n
        print(
            f"session clock: {budget:.0f}s left, so the {label} shrinks to {fit} of {n} questions"
        )
        return fit

    def schedule_steps(self, planned: int, *, label: str) -> int:
        """The steps the learning-rate schedule of stage ``label`` spans (its warmup and decay)
        when training starts: ``planned``, or fewer when a rehearsal (``OUTPUT_DIR/rehearsal.json``
        or ``REHEARSAL_FROM``) projected that only that many fit the session, where the clock will
        stop training: a schedule sized to the plan would never decay. Says so when it differs.
        Either way :func:`tunixkit.training.run` ends it sooner when the pace of the first steps
        says fewer fit (:meth:`steps_that_fit`)."""
        path = self.plan or self.out_dir / REHEARSAL_FILE
        if self.rehearsal is not None:
            return planned
        if not path.is_file():
            if self.hours is not None:
                print(
                    f"{label}: the learning-rate schedule spans the {planned} planned steps until "
                    f"the pace of the first steps says how many fit the session (no "
                    f"{REHEARSAL_FILE}; a rehearsal's, as REHEARSAL_FROM, would size it before "
                    "the first step)"
                )
            return planned
        fit = json.loads(path.read_text()).get("stages", {}).get(label, {}).get("steps_that_fit")
        if not fit or fit >= planned:
            return planned
        print(
            f"{label}: the learning-rate schedule spans {fit} of the {planned} planned steps, "
            f"those the rehearsal ({path}) projected to fit the session; training goes on at the "
            "schedule's last rate if time is left"
        )
        return int(fit)

    def rehearsal_report(self) -> dict[str, Any] | None:
        """In a rehearsal: the projected schedule of the real run, printed and written to
        ``OUTPUT_DIR/rehearsal.json`` (see :meth:`Rehearsal.report`); else None (nothing to do)."""
        return None if self.rehearsal is None else self.rehearsal.report(self)

    def describe(self) -> str:
        if self.rehearsal is not None:
            return (
                f"REHEARSAL: {self.rehearsal.steps} steps of every stage and at most "
                f"{self.rehearsal.items} items of every evaluation, at the recipe's real shapes, "
                f"in {self.out_dir}; then {self.rehearsal.report_dir / REHEARSAL_FILE} projects "
                "the real run onto "
                + (
                    f"a {self.hours:g} h session"
                    if self.hours is not None
                    else "a session without limit"
                )
            )
        if self.hours is None:
            return "session clock: no limit (set SESSION_HOURS to enforce one)"
        return (
            f"session clock: {self.hours:g} h from the first cell, {self.remaining() / 3600:.2f} h "
            f"left; training stops in time for the checkpoint, export and evaluation"
        )


# The batched passes (tunixkit.evaluation.generate, preferences.score, the judge) run inside the
# innermost Session.timed block, each as the (items, seconds) of its batches (a rehearsal tells a
# pass's compile time, its first batch, from its pace) and the prompts it cut (record_cut). Outside
# a block nothing holds them.
_PASSES: contextvars.ContextVar[
    tuple[list[list[tuple[int, float]]], collections.Counter[str]] | None
] = contextvars.ContextVar("tunixkit_passes", default=None)


def pass_batches() -> list[tuple[int, float]]:
    """A list for one batched pass to append each batch's ``(items, seconds)`` to, held by the
    :meth:`Session.timed` block the pass runs in (a rehearsal projects the block from it).

    >>> with _passes() as (outer, _):
    ...     pass_batches().append((8, 2.5))
    ...     with _passes() as (inner, _):
    ...         pass_batches().append((8, 0.5))
    >>> outer, inner, pass_batches()  # an enclosing block holds its inner blocks' passes too
    ([[(8, 2.5)], [(8, 0.5)]], [[(8, 0.5)]], [])
    """
    timings: list[tuple[int, float]] = []
    held = _PASSES.get()
    if held is not None:
        held[0].append(timings)
    return timings


def record_cut(
    where: str, cut: int, seen: int, into: collections.Counter[str] | None = None
) -> None:
    """Count ``cut`` of ``seen`` prompts over their limit at ``where`` in ``into`` (a session's
    ``prompts_cut``) or else in the :meth:`Session.timed` block the pass runs in (its session's
    ``prompts_cut`` once the outermost block ends).

    >>> with _passes() as (_, outer):
    ...     record_cut("generate", 1, 3)
    ...     with _passes() as (_, inner):
    ...         record_cut("generate", 2, 4)
    >>> record_cut("generate", 5, 5)  # outside a block: kept nowhere
    >>> dict(outer), dict(inner)
    ({'generate': 3, 'generate_seen': 7}, {'generate': 2, 'generate_seen': 4})
    """
    held = _PASSES.get()
    if into is None and held is not None:
        into = held[1]
    if into is not None:
        into.update({where: cut, f"{where}_seen": seen})


@contextlib.contextmanager
def _passes() -> Iterator[tuple[list[list[tuple[int, float]]], collections.Counter[str]]]:
    """The batched passes that run inside the block (:func:`pass_batches`) and the prompts they cut
    (:func:`record_cut`)."""
    held: tuple[list[list[tuple[int, float]]], collections.Counter[str]] = (
        [],
        collections.Counter(),
    )
    outer = _PASSES.get()
    token = _PASSES.set(held)
    try:
        yield held
    finally:
        _PASSES.reset(token)
        if outer is not None:
            outer[0].extend(held[0])
            outer[1].update(held[1])


KAGGLE_OUTPUT_BYTES = 20 * 10**9  # what a Kaggle notebook may keep in /kaggle/working


@dataclasses.dataclass
class StageClock:
    """The session clock as one stage or pass sees it (a :class:`Clock`): it must also stop at its
    own deadline (:meth:`Session.part`, :meth:`tunixkit.pipeline.Stages.clock`)."""

    session: Session
    deadline: float  # time.time() by which this stage stops training

    # The rest of the Clock protocol is the session's.
    @property
    def timings(self) -> dict[str, float]:
        return self.session.timings

    @property
    def rehearsal(self) -> Rehearsal | None:
        return self.session.rehearsal

    @property
    def stop_file(self) -> pathlib.Path:
        return self.session.stop_file

    def elapsed(self) -> float:
        return self.session.elapsed()

    def stop_requested(self, steps: int) -> bool:
        return self.session.stop_requested(steps)

    def record(self, name: str, seconds: float) -> None:
        self.session.record(name, seconds)

    def remaining(self) -> float:
        return min(self.session.remaining(), self.deadline - time.time() + self.session.reserve())

    def reserve(self) -> float:
        return self.session.reserve()

    def must_stop(self, next_step_seconds: float = 0.0) -> bool:
        return (
            self.session.must_stop(next_step_seconds)
            or time.time() + next_step_seconds > self.deadline
        )

    def steps_that_fit(self, seconds_per_step: float) -> int | None:
        """How many more steps fit before this stage must stop (None: no session limit)."""
        return _steps_that_fit(self, seconds_per_step)


def _steps_that_fit(clock: Session | StageClock, seconds_per_step: float) -> int | None:
    """Steps of ``seconds_per_step`` that fit in ``clock``'s time left less its reserve."""
    left = clock.remaining() - clock.reserve()
    if left == float("inf"):
        return None
    return max(0, int(left // max(seconds_per_step, 1e-9)))


@dataclasses.dataclass
class Rehearsal:
    """A rehearsal (``REHEARSAL = True``): the notebook runs at the recipe's real shapes, but every
    training stage stops after :attr:`steps` steps and every evaluation or generation pass takes at
    most :attr:`items` items (:meth:`Session.sized`). What each part took is kept in the order it
    happened; :meth:`report` scales it to the real run: the first step of a stage (compiles
    included) as measured, each further step at the pace of the later ones; an evaluation's
    compiles as measured, the rest per item."""

    report_dir: pathlib.Path  # the user's OUTPUT_DIR: rehearsal.json goes there
    steps: int = 4  # training steps per stage: the first compiles, the others give the pace
    items: int = 16  # items per evaluation or pass (two generation batches at least)
    planned: dict[str, int] = dataclasses.field(default_factory=dict)  # label: the real run's items
    events: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        if hosts.is_writer():  # the file process 0 alone appends to (:meth:`_measured`)
            (pathlib.Path(self.report_dir) / REHEARSAL_EVENTS).unlink(missing_ok=True)

    def _measured(self, event: dict[str, Any]) -> None:
        """Keep ``event``; say it and append it to ``report_dir/rehearsal_events.jsonl`` at once, so
        that a rehearsal cut short (a session's limit, a kill) keeps what it measured."""
        self.events.append(event)
        if hosts.is_writer():  # of several processes, process 0's events (its clock decides)
            pathlib.Path(self.report_dir).mkdir(parents=True, exist_ok=True)
            with (pathlib.Path(self.report_dir) / REHEARSAL_EVENTS).open("a") as f:
                f.write(json.dumps(event) + "\n")
        print(
            f"rehearsal: {event['what']} took {event['seconds']:.0f} s "
            f"({event['compile_seconds']:.0f} s of it compiling); "
            f"{event['projected_seconds']:.0f} s in the real run"
        )

    def timed(
        self,
        name: str,
        began: float,
        seconds: float,
        *,
        items: int | None,
        generate_calls: Sequence[Sequence[tuple[int, float]]],
        planned: int | None = None,
    ) -> None:
        """A timed block (:meth:`Session.timed`): ``generate_calls`` are the (prompts, seconds) of
        each generation batch it ran, by call; each call's first batch over its later ones' median
        is compile time, which does not grow with the items."""
        compile_s = 0.0
        for batches in generate_calls:
            if len(batches) > 1:
                steady = statistics.median(s for _, s in batches[1:])
                compile_s += max(0.0, batches[0][1] - steady)
        planned = planned or self.planned.get(name, items or 0)
        scale = planned / items if items and planned > items else 1.0
        self._measured(
            {
                "what": name,
                "kind": name,  # evaluation, export, load, or a generation pass
                "began_s": round(began, 3),
                "seconds": round(seconds, 3),
                "items": items,
                "planned_items": planned if items is not None else None,
                "compile_seconds": round(compile_s, 3),
                "projected_seconds": round(compile_s + (seconds - compile_s) * scale, 3),
            }
        )

    def stage(
        self,
        label: str,
        began: float,
        seconds: float,
        *,
        planned_steps: int,
        steps: int,
        step_seconds: Sequence[float],
        checkpoint_every: int | None,
        checkpoint_seconds: float,
    ) -> None:
        """A training stage (:func:`tunixkit.training.run`): ``steps`` of its ``planned_steps`` in
        ``seconds``; ``step_seconds`` as the run measured them (the first ones hold the
        compiles)."""
        later = list(step_seconds[1:]) or list(step_seconds)
        pace = statistics.median(later) if later else seconds / max(1, steps)
        compile_s = max(0.0, seconds - pace * steps)
        saves = planned_steps // checkpoint_every if checkpoint_every else 0
        self._measured(
            {
                "what": label,
                "kind": "training",
                "began_s": round(began, 3),
                "seconds": round(seconds, 3),
                "steps": steps,
                "planned_steps": planned_steps,
                "seconds_per_step": round(pace, 4),
                "compile_seconds": round(compile_s, 3),
                "checkpoints": saves,
                "checkpoint_seconds": round(checkpoint_seconds, 3),
                "projected_seconds": round(
                    compile_s + pace * planned_steps + saves * checkpoint_seconds, 3
                ),
            }
        )

    def report(self, session: Session) -> dict[str, Any]:
        """The real run projected onto the session, printed and written to
        ``report_dir/rehearsal.json``: per stage its pace, compile seconds, planned steps and the
        steps that fit; when the last export and the last evaluation end; peak memory; disk."""
        elapsed = session.elapsed()
        extra, schedule = 0.0, []
        for e in self.events:  # the same order as the real run, each stretched to its real size
            start = e["began_s"] + extra
            extra += e["projected_seconds"] - e["seconds"]
            schedule.append(
                {"items": None, **e, "projected_end_s": round(start + e["projected_seconds"], 1)}
            )
        total = elapsed + extra
        limit = None if session.hours is None else session.hours * 3600 - session.margin
        training = [e for e in schedule if e["kind"] == "training"]
        stretch = sum(e["seconds_per_step"] * e["planned_steps"] for e in training)
        fits = limit is None or total <= limit
        share = 1.0 if fits or not stretch else max(0.0, 1 - (total - limit) / stretch)
        stages = {
            e["what"]: {
                "seconds_per_step": e["seconds_per_step"],
                "compile_seconds": e["compile_seconds"],
                "rehearsed_steps": e["steps"],
                "planned_steps": e["planned_steps"],
                "steps_that_fit": int(e["planned_steps"] * share)
                if stretch
                else e["planned_steps"],
                "projected_seconds": e["projected_seconds"],
            }
            for e in training
        }
        exports = [e for e in schedule if e["kind"] == "export"]
        peak, measured = runtime.peak_memory()
        limit_bytes = runtime.device_memory_limit()
        disk = disk_usage(session.out_dir)
        kept = _newest_checkpoint_bytes(session.out_dir)  # tunix keeps two: one more of each
        # the compiled programs the real run keeps beside its output (runtime.compilation_cache)
        disk += disk_usage(pathlib.Path(self.report_dir) / runtime.COMPILE_CACHE)
        report = {
            "session_hours": session.hours,
            "rehearsal_seconds": round(elapsed, 1),
            "projected_seconds": round(total, 1),
            "projected_hours": round(total / 3600, 3),
            "fits_session": fits,
            "export_ends_s": exports[-1]["projected_end_s"] if exports else None,
            "last_evaluation_ends_s": next(
                (e["projected_end_s"] for e in reversed(schedule) if e["kind"] == "evaluation"),
                None,
            ),
            "stages": stages,
            "evaluations": [  # evaluations and generation passes, in order
                {k: e[k] for k in ("what", "items", "planned_items", "compile_seconds", "seconds")}
                | {"projected_seconds": e["projected_seconds"]}
                for e in schedule
                if e["items"] is not None
            ],
            "peak_memory_bytes": peak,
            "peak_memory_measures": measured,
            "device_memory_bytes": limit_bytes,
            "fits_memory": None if limit_bytes is None else peak <= 0.95 * limit_bytes,
            "disk_bytes": disk + kept,
            "fits_disk": disk + kept <= KAGGLE_OUTPUT_BYTES,
            "schedule": schedule,
            "advice": [],
        }
        advice = report["advice"]
        if not report["fits_session"] and not stages:
            advice.append(
                f"the run needs {total / 3600:.2f} h of a {session.hours:g} h session without any "
                "training: evaluate fewer questions"
            )
        elif not report["fits_session"]:
            fit = ", ".join(f"{n} {s['steps_that_fit']}" for n, s in stages.items())
            advice.append(
                f"the run needs {total / 3600:.2f} h of a {session.hours:g} h session: the clock "
                f"would stop training early, after about {fit} steps. A real run with this "
                "rehearsal.json in its OUTPUT_DIR ends its learning-rate schedule there; or set "
                "the steps to these, or raise SESSION_HOURS (never past the platform's limit)"
            )
        if report["fits_memory"] is False:
            advice.append(
                f"peak memory {peak / 2**30:.1f} GiB is over 95% of the chip's "
                f"{limit_bytes / 2**30:.1f} GiB: lower the batch size first, then the maximum "
                "lengths; QLoRA or a smaller LoRA rank next"
            )
        if not report["fits_disk"]:
            advice.append(
                f"the run writes about {(disk + kept) / 1e9:.1f} GB, over Kaggle's 20 GB of "
                "output: keep fewer checkpoints or exports"
            )
        path = self.report_dir / REHEARSAL_FILE
        hosts.once(f"write {path}", path.write_text, json.dumps(report, indent=1, default=float))
        print(_describe_report(report, path))
        # The rehearsal's weights are of no further use: leave the disk to the real run.
        heavy = [
            p for p in session.out_dir.rglob("*") if p.name in ("export", "checkpoints", "ckpts")
        ]
        freed = sum(disk_usage(p) for p in heavy if p.is_dir())
        for p in heavy:
            shutil.rmtree(p, ignore_errors=True)
        print(f"  removed the rehearsal's exports and checkpoints ({freed / 1e9:.2f} GB)")
        return report


def _describe_report(report: dict[str, Any], path: pathlib.Path) -> str:
    hours = report["session_hours"]

    def clock(s: float | None) -> str:
        return "-" if s is None else f"{int(s // 3600)}:{int(s % 3600 // 60):02d}:{int(s % 60):02d}"

    lines = [
        f"REHEARSAL took {report['rehearsal_seconds']:.0f}s; the real run, projected onto "
        + (f"a {hours:g} h session:" if hours is not None else "a session without limit:"),
        f"  {'stage':<12} {'s/step':>8} {'compile s':>10} {'steps':>7} {'fit':>7} {'hh:mm:ss':>9}",
    ]
    for name, s in report["stages"].items():
        lines.append(
            f"  {name:<12} {s['seconds_per_step']:>8.3f} {s['compile_seconds']:>10.1f} "
            f"{s['planned_steps']:>7} {s['steps_that_fit']:>7} "
            f"{clock(s['projected_seconds']):>9}"
        )
    gib = 2**30
    device = report["device_memory_bytes"]
    lines += [
        f"  export written by {clock(report['export_ends_s'])}, last evaluation done by "
        f"{clock(report['last_evaluation_ends_s'])}, "
        f"the whole run {clock(report['projected_seconds'])}"
        f" ({'fits' if report['fits_session'] else 'does NOT fit'} the session)",
        f"  memory: {report['peak_memory_bytes'] / gib:.2f} GiB ({report['peak_memory_measures']})"
        + (f" of {device / gib:.1f} GiB" if device else ""),
        f"  disk: about {report['disk_bytes'] / 1e9:.2f} GB of output",
        *(f"  ADVICE: {a}" for a in report["advice"]),
        f"  written to {path}; set REHEARSAL = False for the real run",
    ]
    return "\n".join(lines)


def disk_usage(folder: str | pathlib.Path) -> int:
    """The bytes of the files under ``folder`` (what a Kaggle notebook's output counts)."""
    return sum(p.stat().st_size for p in pathlib.Path(folder).rglob("*") if p.is_file())


def _newest_checkpoint_bytes(folder: pathlib.Path) -> int:
    """The bytes of the newest step of every checkpoint folder under ``folder`` (stages too)."""
    roots = [folder / "checkpoints"] + [p / "checkpoints" for p in _subfolders(folder)]
    total = 0
    for root in roots:
        for steps in _committed_steps(root).values():
            total += disk_usage(max(steps, key=lambda p: int(p.name)))
    return total


def _session_start(started: float) -> float:
    """The earliest start this machine's session recorded (a file in the temp folder, which a
    kernel restart keeps and a new Kaggle/Colab session does not have), recording ``started`` if
    it is earlier."""
    import tempfile

    path = pathlib.Path(tempfile.gettempdir()) / "tunixkit-session-start"
    try:
        recorded = float(path.read_text())
    except (OSError, ValueError):
        recorded = float("inf")
    if started < recorded:
        path.write_text(repr(started))
        return started
    if recorded < started:
        print(
            f"session clock: counting from this session's first start "
            f"{(started - recorded) / 60:.0f} min ago (a restarted kernel), recorded in {path}"
        )
    return recorded


def _subfolders(folder: pathlib.Path) -> list[pathlib.Path]:
    """The folders in ``folder`` (none if it does not exist)."""
    try:
        return [p for p in folder.iterdir() if p.is_dir()]
    except FileNotFoundError:
        return []


def _committed_steps(root: pathlib.Path) -> dict[pathlib.Path, list[pathlib.Path]]:
    """``{folder: its committed step folders}`` for ``root`` (SFT, DPO: ``<step>/``) and its role
    folders (GRPO: ``actor/<step>/``). Safe while a trainer is writing (Orbax renames as it
    goes)."""
    out = {}
    for folder in [
        root,
        *(p for p in _subfolders(root) if not p.name.isdigit() and "tmp" not in p.name),
    ]:
        steps = [
            p
            for p in _subfolders(folder)
            if p.name.isdigit() and (p / "commit_success.txt").is_file()
        ]
        if steps:
            out[folder] = steps
    return out


def latest_checkpoint_step(folder: str | pathlib.Path) -> int | None:
    """The highest committed step under ``folder/checkpoints`` (``<step>/`` or ``actor/<step>/``),
    or, for a run of stages (notebook 06: ``<stage>/checkpoints``), under any stage's folder."""
    folder = pathlib.Path(folder)
    roots = [folder / "checkpoints"] + [
        p / "checkpoints" for p in _subfolders(folder) if p.name not in _NOT_CARRIED
    ]
    found = [p for root in roots for steps in _committed_steps(root).values() for p in steps]
    return max((int(p.name) for p in found), default=None)


def _releases(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[str, str] | None:
    """(the release that wrote ``old``, this one) when both are recorded and differ, else None
    (runs recorded before the release was kept are not compared)."""
    was, now = old.get(VERSION_KEY), new.get(VERSION_KEY)
    return (was, now) if was and now and was != now else None


def _same_version(old: Mapping[str, Any], new: Mapping[str, Any], what: str) -> None:
    """A run continues only with the tunixkit release that wrote it (``recipe.json``'s
    ``tunixkit``)."""
    if releases := _releases(old, new):
        was, now = releases
        raise RecipeMismatch(
            f"{what} was written by tunixkit {was}; this is tunixkit {now}. A checkpoint continues "
            "only with the code that wrote it: in a new session, set TUNIXKIT_RELEASE in the "
            "notebook's first cell to the commit that run's notebook named, to continue it, or "
            "set START_FRESH = True to begin a new one with this code (the earlier run is kept, "
            "nothing is deleted)."
        )


def _diff(
    old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "", *, versions: bool = False
) -> list[str]:
    """The fields that differ, as ``name: old -> new``; the release (``VERSION_KEY``) only with
    ``versions`` and where both record it."""
    out = []
    if versions and (releases := _releases(old, new)):
        out.append(f"{VERSION_KEY}: {releases[0]!r} -> {releases[1]!r}")
    for key in sorted((set(old) | set(new)) - {VERSION_KEY}):
        a, b = old.get(key, "<absent>"), new.get(key, "<absent>")
        if isinstance(a, dict) and isinstance(b, dict):
            out += _diff(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return out


def _copy_last_checkpoints(src: pathlib.Path, dst: pathlib.Path) -> None:
    """Copy each checkpoint folder's newest step (``checkpoints/<step>``,
    ``checkpoints/actor/<step>``, or ``checkpoints/policy/<step>`` where a trained RL run rests
    them: ``training.rest_rl_checkpoints``)."""
    for steps in _committed_steps(src).values():
        newest = max(steps, key=lambda p: int(p.name))
        shutil.copytree(newest, dst / newest.relative_to(src), dirs_exist_ok=True)


def prepare(
    out_dir: str | pathlib.Path,
    recipe: Mapping[str, Any],
    *,
    resume_from: str | None = None,
    start_fresh: bool = False,
) -> str:
    """Make ``out_dir`` ready for this run and return what was done, in a sentence.

    - ``out_dir`` holds a run with other settings: :class:`RecipeMismatch` naming each field, or
      with ``start_fresh`` that run is moved aside to ``out_dir/previous/<time>`` (nothing is lost).
    - ``resume_from`` (a previous session's output, read-only is fine) and no checkpoint here yet:
      its newest checkpoint and its files are copied in, after the same recipe check.
    """
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    recipe = json.loads(json.dumps(recipe, default=str))
    said = "a new run"
    here = out / RECIPE_FILE
    if here.is_file():
        previous = json.loads(here.read_text())
        if not start_fresh:
            _same_version(previous, recipe, f"{out} holds a run that")
        diff = _diff(previous, recipe, versions=True)
        if diff and not start_fresh:
            raise RecipeMismatch(
                f"{out} holds a run made with other settings:\n  "
                + "\n  ".join(diff)
                + "\nUse another OUTPUT_DIR, set the parameters back, or set START_FRESH = True "
                "(the old run is then moved to OUTPUT_DIR/previous/)."
            )
        if diff:
            aside = out / "previous" / time.strftime("%Y%m%d-%H%M%S")
            aside.mkdir(parents=True)
            for p in list(out.iterdir()):  # compiled programs stay: they do not depend on it
                if p.name not in ("previous", runtime.COMPILE_CACHE):
                    shutil.move(str(p), aside / p.name)
            said = f"started fresh; the earlier run was moved to {aside}"
        else:
            step = latest_checkpoint_step(out)
            said = "continuing this output folder" + (f" from step {step}" if step else "")
    if resume_from and not start_fresh and latest_checkpoint_step(out) is None:
        src = pathlib.Path(resume_from).expanduser()
        if latest_checkpoint_step(src) is None:
            raise ResumeError(
                f"RESUME_FROM={src} holds no checkpoint (expected {src}/checkpoints/<step>/). "
                "Point it at the OUTPUT_DIR of an earlier session: on Kaggle, add that notebook's "
                "output as an input and use /kaggle/input/<its name>/<its OUTPUT_DIR>; or set "
                "RESUME_FROM = None."
            )
        if (src / RECIPE_FILE).is_file():
            theirs = json.loads((src / RECIPE_FILE).read_text())
            _same_version(theirs, recipe, f"RESUME_FROM={src}")
            diff = _diff(theirs, recipe)
            if diff:
                raise RecipeMismatch(
                    f"RESUME_FROM={src} was made with other settings:\n  "
                    + "\n  ".join(diff)
                    + "\nSet the parameters as they were, or set START_FRESH = True to ignore "
                    "RESUME_FROM."
                )
        for p in src.iterdir():
            if p.name in _NOT_CARRIED or p.name.startswith("."):
                continue
            if p.is_dir():
                shutil.copytree(p, out / p.name, dirs_exist_ok=True)
            else:
                shutil.copyfile(p, out / p.name)
        _copy_last_checkpoints(src / "checkpoints", out / "checkpoints")
        _make_writable(out)
        said = f"continuing from {src} " + (
            f"at step {latest_checkpoint_step(out)}"
            if (out / "checkpoints").is_dir()
            else "(each stage continues from its own checkpoint)"
        )
    elif resume_from and latest_checkpoint_step(out) is not None and not start_fresh:
        said += f" (its own checkpoint is newer than RESUME_FROM={resume_from}, which is not used)"
    here.write_text(json.dumps(recipe, indent=1))
    return said


def _make_writable(folder: pathlib.Path) -> None:
    """Files copied from a read-only input keep its modes; training must overwrite them."""
    for p in [folder, *folder.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)


def _make_public(owner: str, model: str) -> str:
    """Create the Kaggle Model ``owner/model`` public if it does not exist yet (kagglehub's upload
    creates a missing model private); returns its visibility: "public" or "private"."""
    from kagglehub.clients import build_kaggle_client
    from kagglehub.exceptions import KaggleApiHTTPError, handle_call, handle_mutate_call
    from kagglesdk.models.types.model_api_service import ApiCreateModelRequest, ApiGetModelRequest

    with build_kaggle_client() as api:
        get = ApiGetModelRequest()
        get.owner_slug, get.model_slug = owner, model
        try:
            found = handle_call(lambda: api.models.model_api_client.get_model(get))
            return "private" if found.is_private else "public"
        except KaggleApiHTTPError as exc:
            if exc.response is None or exc.response.status_code not in (403, 404):
                raise
        create = ApiCreateModelRequest()
        create.owner_slug, create.slug, create.title = owner, model, model
        create.is_private = False
        handle_mutate_call(lambda: api.models.model_api_client.create_model(create))
        return "public"


def upload_to_kaggle(
    folder: str | pathlib.Path, handle: str | None, *, notes: str = "", public: bool = True
) -> str:
    """Upload ``folder`` (the Orbax export) as a new version of the Kaggle Model ``handle``
    (``<owner>/<model>/<framework>/<variation>``, e.g. ``me/gemma3-grpo/jax/1b``); returns it.

    ``public``: a model that does not exist yet is created public (what the multi-session track
    judges need to load it); an existing model keeps its visibility, which is printed. No licence
    is named: Gemma's terms of use apply to the weights (state them on the model's page)."""
    if not handle or handle.count("/") != 3:
        raise ValueError(
            f"KAGGLE_MODEL={handle!r}: set it to "
            "'<your Kaggle user>/<model name>/jax/<variation>', "
            "e.g. 'alice/gemma3-grpo/jax/1b' (the model is created on first upload)"
        )
    token = runtime.get_secret("KAGGLE_API_TOKEN", required=False)
    if token:
        os.environ.setdefault("KAGGLE_API_TOKEN", token)  # kagglehub reads credentials from there
    elif runtime.detect_environment() != "kaggle":
        for name in ("KAGGLE_USERNAME", "KAGGLE_KEY"):
            os.environ.setdefault(
                name, runtime.get_secret(name, purpose="uploading a Kaggle Model") or ""
            )
    import kagglehub

    owner, model = handle.split("/")[:2]
    visibility = _make_public(owner, model) if public else "private unless it existed public"
    kagglehub.model_upload(handle, str(folder), version_notes=notes)
    print(
        f"uploaded {folder} to https://www.kaggle.com/models/{owner}/{model} ({visibility}"
        + ("" if visibility == "public" else ": Settings > Visibility makes it public")
        + "; licence: Gemma's terms of use)"
    )
    return handle


def publish(
    folder: str | pathlib.Path | None,
    handle: str | None,
    *,
    notes: str = "",
    rehearsal: bool = False,
    public: bool = True,
) -> str | None:
    """The value of ``unrestricted_kaggle_model``: the Kaggle Model handle ``folder`` (the Orbax
    export) was uploaded to, or None with the reason printed (no ``KAGGLE_MODEL``, nothing to
    upload, a rehearsal's export, or a failed upload: the run's output stays on disk either way,
    nothing is lost)."""
    if rehearsal:
        print("unrestricted_kaggle_model = None: a rehearsal's export is never uploaded")
        return None
    if folder is None:
        print(
            "unrestricted_kaggle_model = None: no stage finished, so there is no export to upload"
        )
        return None
    if not handle:
        print(
            f"unrestricted_kaggle_model = None: not uploaded (set KAGGLE_MODEL = "
            f"'<user>/<model>/jax/<variation>' to publish {folder})"
        )
        return None
    try:  # of several processes, process 0 uploads
        hosts.once(f"upload {folder}", upload_to_kaggle, folder, handle, notes=notes, public=public)
    except ValueError:
        raise  # a malformed handle: said before any upload starts
    except Exception as exc:  # the run's results are on disk; a failed upload must not lose them
        print(
            f"unrestricted_kaggle_model = None: the upload to {handle} failed "
            f"({type(exc).__name__}: {str(exc)[:300]}). Upload {folder} later: "
            "tunixkit.session.upload_to_kaggle(folder, handle)"
        )
        return None
    return handle
