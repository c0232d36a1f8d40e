"""Where a GRPO step's time goes: tunix's own perf tracer over the first steps of a run.

tunix 0.1.7's ``RLCluster`` records spans around each part of a GRPO step when it is given a
``PerfMetricsConfig`` (``perf/trace.py``; the learner's ``rl_learner.py`` and ``grpo_learner.py``
open them): on the learner's producer thread ``rollout``, ``refer_inference`` (the reference's
log-probabilities, with a KL term), ``old_actor_inference`` (with ``num_iterations`` > 1) and
``advantage_computation`` (the rewards, a judge's calls included, and the advantages); on the main
thread the ``actor_training`` groups (forward, backward, optimizer) and their ``peft_train_step``;
each device gets a span that ends when its arrays are ready. Every timeline carries the step's
``global_step`` group, so the k-th one of each is the same step.

:class:`StepTrace` hands tunix the config, keeps what it records for the first ``steps`` GRPO
steps, then writes them and stops tracing (:func:`tunixkit._compat.stop_perf_tracing`: the tracer
keeps every span in memory otherwise). It writes to its folder:

- ``trace.json``: the Chrome trace event format (open it in ``ui.perfetto.dev`` or
  ``chrome://tracing``): host threads (the step's groups and spans) and devices;
- ``steps.json``: per traced step, the seconds of each phase of :data:`PHASES` and ``other``, the
  rest of the step's time on the host (checkpoints, metrics, Python between the parts).

The first traced step of a run includes compiling. A notebook shows the rows as a table (the
trace itself, :meth:`StepTrace._repr_markdown_`) and a plot (:meth:`StepTrace.plot`).

Agentic GRPO (07) exports only tunix's second tracer (``perf/experimental``: ``perf_config(
timelines=True)``): a timeline per host thread and per device, committed at the end of each GRPO
step, spans named ``rollout``, ``reference_inference``, ``advantage_computation``, ``peft_train``,
``environment`` (the tool's calls), ``weight_sync`` and ``data_loading``, with no step group. There
a step's ``seconds`` run from one export to the next, each phase is the time any thread was in it
(the episodes' threads sample side by side and ahead of the update, so the phases can add up to
more than the step), and ``other`` is the time no phase covers; the trace is written by tunix's own
``PerfettoTraceWriter`` (``perfetto_trace_v2_<time>.pb``, for ``ui.perfetto.dev``) instead of
``trace.json``.
"""

from __future__ import annotations

import json
import pathlib
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import jax

from tunixkit import _compat, hosts, runlog

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from tunix.perf.metrics import PerfMetricsConfig, PerfSpanQuery
    from tunix.rl.rl_cluster import RLCluster

__all__ = ["StepTrace"]

# (column, tunix's span name, what it is); "update" is a group of spans, the rest are spans
PHASES = (
    ("rollout", "rollout", "sampling the answers"),
    ("reference", "refer_inference", "the reference model's log-probabilities (the KL term)"),
    ("old policy", "old_actor_inference", "the policy's log-probabilities before the update"),
    ("rewards", "advantage_computation", "the rewards (a judge's calls too) and advantages"),
    ("update", "actor_training", "forward, backward and the optimizer step"),
    ("weight sync", "weight_sync", "the trained weights copied to the sampler"),
    ("data", "data_loading", "the next batch of prompts"),
    ("tools", "environment", "the environment's steps: the tool's calls (agentic GRPO)"),
)
GROUP_PHASES = ("actor_training",)
# the phases with a device span (begun with the host's, ended when its arrays are ready): the
# device's own time, where the host's span of a part dispatched without waiting (the reference's
# log-probabilities) ends at once and the part that waits for its result is charged with it
DEVICE_PHASES = (
    ("rollout", "rollout"),
    ("reference", "refer_inference"),
    ("old policy", "old_actor_inference"),
    ("update", "peft_train_step"),
)


def _walk(node: Any) -> Iterator[Any]:
    """``node`` and everything below it (a tunix ``SpanGroup``'s tree of groups and spans)."""
    yield node
    for inner in getattr(node, "inner", ()):
        yield from _walk(inner)


def _is_group(node: Any) -> bool:
    return hasattr(node, "inner")


def _seconds(groups: Sequence[Any], name: str, *, group: bool) -> float:
    return sum(
        n.duration
        for g in groups
        for n in _walk(g)
        if n is not g and n.name == name and _is_group(n) == group
    )


def breakdown(query: PerfSpanQuery) -> list[dict[str, float]]:
    """Per ``global_step`` of ``query`` (a tunix ``PerfSpanQuery``): ``step`` (its index in the
    trace, from 1), ``seconds`` (the whole step, on the main thread), each phase of
    :data:`PHASES` as the host waited for it and ``other`` (what the phases leave of the step),
    then ``device <phase>`` for those of :data:`DEVICE_PHASES` (the first device's time). A step
    still running when the trace was written, or one in which no phase but ``data`` ran (a resumed
    run's last, untrained), is left out."""
    threads = [t for t in query.get_timeline_ids() if t.startswith("thread-")]
    devices = sorted(t for t in query.get_timeline_ids() if not t.startswith("thread-"))
    rows = []
    for k, step in enumerate(query().main().all_groups("global_step").get()):
        if step.end == float("inf"):
            continue  # a step still running when the trace was written
        groups = [query().timeline(t).nth_group("global_step", k).get() for t in threads]
        host = [g for found in groups for g in found]
        row = {"step": k + 1, "seconds": step.duration}
        for column, name, _ in PHASES:
            if name in GROUP_PHASES:  # the main thread's (every timeline repeats its groups)
                row[column] = _seconds([step], name, group=True)
            else:
                row[column] = _seconds(host, name, group=False)
        if not any(row[c] for c, _, _ in PHASES if c != "data"):
            continue  # only the data loader ran in it: the step a resumed run opens and ends
        row["other"] = step.duration - sum(row[c] for c, _, _ in PHASES)
        on_device = (
            query().timeline(devices[0]).nth_group("global_step", k).get() if devices else []
        )
        for column, name in DEVICE_PHASES:
            row[f"device {column}"] = _seconds(on_device, name, group=False)
        rows.append(row)
    return rows


# the span names of tunix's second tracer (the agentic learner's), by column of PHASES
TIMELINE_NAMES = {
    "rollout": "rollout",
    "reference": "reference_inference",
    "old policy": "old_actor_inference",
    "rewards": "advantage_computation",
    "update": "peft_train",
    "weight sync": "weight_sync",
    "data": "data_loading",
    "tools": "environment",
}


def _union(intervals: Sequence[tuple[float, float]]) -> float:
    """Seconds covered by ``intervals`` ((begin, end) pairs), overlaps counted once.

    >>> _union([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)])
    4.0
    """
    total, reach = 0.0, float("-inf")
    for begin, end in sorted(intervals):
        if end > reach:
            total += end - max(begin, reach)
            reach = end
    return total


def _timeline_spans(timelines: dict[str, Any], k: int) -> tuple[list[Any], list[Any]]:
    """The finished spans of step ``k``: on the host threads, and on the first device."""
    hosts = [t for t in timelines if t.startswith("host-")]
    devices = sorted(t for t in timelines if not t.startswith("host-") and "_queue" not in t)

    def spans(tid: str) -> list[Any]:
        steps = timelines[tid].committed_steps
        return [s for s in steps[k].values() if s.ended] if k < len(steps) else []

    return [s for t in hosts for s in spans(t)], spans(devices[0]) if devices else []


def timeline_breakdown(timelines: dict[str, Any], marks: Sequence[float]) -> list[dict[str, float]]:
    """:func:`breakdown`'s rows from tunix's second tracer: ``timelines`` (its timelines by id)
    and ``marks`` (the time of each step's export, from the tracer's ``perf_counter``)."""
    rows = []
    for k, mark in enumerate(marks):
        host, device = _timeline_spans(timelines, k)
        if not host:
            continue
        start = marks[k - 1] if k else min(s.begin for s in host)
        row = {"step": k + 1, "seconds": mark - start}
        for column, _, _ in PHASES:
            name = TIMELINE_NAMES[column]
            row[column] = _union([(s.begin, s.end) for s in host if s.name == name])
        named = set(TIMELINE_NAMES.values())
        covered = _union([(s.begin, s.end) for s in host if s.name in named])
        row["other"] = max(0.0, row["seconds"] - covered)
        for column, _ in DEVICE_PHASES:
            name = TIMELINE_NAMES[column]
            row[f"device {column}"] = sum(s.duration for s in device if s.name == name)
        rows.append(row)
    return rows


def _timeline_trace(timelines: dict[str, Any], folder: pathlib.Path, cluster: RLCluster) -> str:
    """Write tunix's second tracer's ``timelines`` with tunix's own Perfetto writer (a track per
    host thread and per device, the devices under their roles' tracks); returns the file."""
    from tunix.perf.experimental.trace_writer import PerfettoTraceWriter

    roles = {
        getattr(role, "value", str(role)): mesh.devices.flatten().tolist()
        for role, mesh in cluster.cluster_config.role_to_mesh.items()
    }
    begun = time.time_ns()
    PerfettoTraceWriter(str(folder), role_to_devices=roles).write_timelines(timelines)
    written = [f for f in folder.glob("perfetto_trace_v2_*.pb") if f.stat().st_mtime_ns >= begun]
    if not written:  # tunix's writer logs its failures and goes on: say so here
        raise RuntimeError(f"tunix's PerfettoTraceWriter wrote no trace under {folder}")
    return str(max(written, key=lambda f: f.stat().st_mtime_ns))


def chrome_trace(query: PerfSpanQuery) -> dict[str, Any]:
    """``query``'s spans in the Chrome trace event format: one process for the host's threads
    (groups and spans), one for the devices (their spans), times in microseconds from the first."""
    main = query.get_main_thread_id()
    ids = query.get_timeline_ids()
    hosts = [main] + sorted(t for t in ids if t.startswith("thread-") and t != main)
    devices = sorted(t for t in ids if not t.startswith("thread-"))
    nodes = []
    for tid, timeline in enumerate(hosts + devices, start=1):
        root = query().timeline(timeline).get()[0]
        pid = 1 if timeline in hosts else 2
        nodes += [
            (pid, tid, n)
            for n in _walk(root)
            if n is not root and n.end != float("inf") and (pid == 1 or not _is_group(n))
        ]
    start = min((n.begin for _, _, n in nodes), default=0.0)
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "host"}},
        {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "devices"}},
    ]
    for tid, timeline in enumerate(hosts + devices, start=1):
        label = f"main ({timeline})" if timeline == main else timeline
        pid = 1 if timeline in hosts else 2
        events.append(
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": label}}
        )
    for pid, tid, n in nodes:
        events.append(
            {
                "name": n.name,
                "cat": "group" if _is_group(n) else "device" if pid == 2 else "host",
                "ph": "X",
                "pid": pid,
                "tid": tid,
                "ts": round((n.begin - start) * 1e6, 3),
                "dur": round(n.duration * 1e6, 3),
            }
        )
    return {"traceEvents": events, "displayTimeUnit": "ms"}


class StepTrace:
    """Trace the first ``steps`` GRPO steps of a run (0: none) with tunix's perf tracer, then
    write ``trace.json`` and ``steps.json`` to ``folder`` and stop tracing.

    Give :meth:`perf_config` to the ``RLCluster`` and :meth:`attach` the cluster
    (:func:`tunixkit.rl.build_grpo` does both with ``trace=``). tunix calls the export after every
    step; the trace is written after the ``steps``-th, or by :meth:`finish` when training ended
    first (the session clock, the last batch): call it after training either way."""

    def __init__(self, folder: str | pathlib.Path, steps: int) -> None:
        self.folder = pathlib.Path(folder)
        self.steps = max(0, int(steps))
        self.cluster: RLCluster | None = None
        self.query: PerfSpanQuery | None = None
        self.timelines: dict[str, Any] | None = None  # tunix's second tracer's (agentic GRPO)
        self.marks: list[float] = []  # when each of its steps was exported
        self.seen = 0  # steps tunix exported while traced
        self.trained = 0  # steps trained by the run it traced (given to finish by who ran it)
        self.rows: list[dict[str, float]] = []
        self.done = self.steps == 0

    @property
    def complete(self) -> bool:
        """Whether a run that trained has a row for each of its first steps (:attr:`steps`, or as
        many as it trained), each with rollout and update time (agentic GRPO's timeline gives the
        reference pass and the update together): what a notebook's checks assert."""
        if not self.steps or not self.trained:
            return True
        timed = ("reference", "update") if self.timelines is not None else ("update",)
        return len(self.rows) == min(self.steps, self.trained) and all(
            r["rollout"] > 0 and sum(r[k] for k in timed) > 0 for r in self.rows
        )

    def perf_config(self, timelines: bool = False) -> PerfMetricsConfig | None:
        """The ``perf_config`` for tunix's ``RLCluster`` (None when nothing is traced);
        ``timelines``: tunix's second tracer instead, the only one its agentic learner exports."""
        if self.done:
            return None
        from tunix.perf.metrics import PerfMetricsConfig

        if timelines:
            return PerfMetricsConfig(custom_export_fn_v2=self._export_timelines)
        return PerfMetricsConfig(custom_export_fn=self._export)

    def attach(self, cluster: RLCluster) -> None:
        """The cluster built with :meth:`perf_config` (its tracer is stopped when written)."""
        self.cluster = cluster

    def _export(self, query: PerfSpanQuery) -> dict[str, Any]:
        """tunix's export hook, called on the main thread after every GRPO step."""
        if not self.done:
            self.query, self.seen = query, self.seen + 1
            if self.seen >= self.steps:
                self.finish()
        return {}  # no metrics of its own: the figures go to steps.json

    def _export_timelines(self, timelines: Any) -> dict[str, Any]:
        """tunix's second tracer's export hook, called on the main thread after every step."""
        if not self.done:
            self.timelines, self.seen = dict(timelines), self.seen + 1
            self.marks.append(time.perf_counter())
            if self.seen >= self.steps:
                self.finish()
        return {}

    def finish(self, trained: int | None = None) -> list[dict[str, float]]:
        """Write what was traced and stop tracing (once); returns the rows of ``steps.json``.
        ``trained``: the steps the traced run trained (``RunResult.trained``), kept as
        :attr:`trained` so that a check can tell a run whose steps were never exported (no rows)
        from one that trained none."""
        if trained is not None:
            self.trained = trained
        if self.done or self.cluster is None or (self.query is None and self.timelines is None):
            return self.rows
        if self.timelines is not None:
            self.cluster.perf_v2.synchronize()
        if not hosts.is_writer():  # of several processes, each traced its own devices
            self.folder = self.folder / f"process_{jax.process_index()}"
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.timelines is not None:
            self.cluster.perf_v2.synchronize()
            self.rows = timeline_breakdown(self.timelines, self.marks)
            written = _timeline_trace(self.timelines, self.folder, self.cluster)
        else:
            self.cluster.perf.synchronize()  # the device spans still waiting for their arrays
            self.rows = breakdown(self.query)
            written = str(self.folder / "trace.json")
            pathlib.Path(written).write_text(json.dumps(chrome_trace(self.query)))
        (self.folder / "steps.json").write_text(json.dumps(self.rows, indent=1))
        _compat.stop_perf_tracing(self.cluster)
        self.done = True
        print(
            f"traced {len(self.rows)} GRPO step(s): {written} "
            "(ui.perfetto.dev), seconds by phase in "
            f"{self.folder / 'steps.json'}; tracing stopped"
        )
        return self.rows

    def _repr_markdown_(self) -> str:
        """A notebook shows the traced steps as a table: seconds by phase and each phase's share
        of the steps after the first (the first compiles)."""
        return _table(self.rows) or "no GRPO step was traced in this session"

    def plot(self, path: str | pathlib.Path, title: str = "") -> Figure | None:
        """Each traced step as a bar of its phases' seconds, saved to ``path``; None (and no file)
        when no step was traced."""
        return _plot(self.rows, path, title) if self.rows else None


def _columns(rows: Sequence[dict[str, float]]) -> list[str]:
    """The phases with any time in ``rows`` (a run without a KL term has no reference pass)."""
    return [c for c, _, _ in PHASES if any(r[c] > 0 for r in rows)] + ["other"]


def _table(rows: Sequence[dict[str, float]]) -> str:
    """A Markdown table of :func:`breakdown`'s rows: seconds by phase and each phase's share of
    the steps after the first (the first compiles); "" without rows.

    >>> rows = [{"step": 1, "seconds": 9.0, "rollout": 5.0, "update": 3.0, "other": 1.0},
    ...         {"step": 2, "seconds": 2.0, "rollout": 1.5, "update": 0.4, "other": 0.1}]
    >>> rows = [dict({c: 0.0 for c, _, _ in PHASES}, **r) for r in rows]
    >>> print(_table(rows))
    | step | seconds | rollout | update | other |
    |---|---|---|---|---|
    | 1 (compiles) | 9.00 | 5.00 | 3.00 | 1.00 |
    | 2 | 2.00 | 1.50 | 0.40 | 0.10 |
    | share after step 1 | | 75% | 20% | 5% |
    """
    if not rows:
        return ""
    columns = _columns(rows)
    out = [
        "| step | seconds | " + " | ".join(columns) + " |",
        "|---|---|" + "---|" * len(columns),
    ]
    for r in rows:
        step = f"{r['step']:.0f}" + (" (compiles)" if r["step"] == 1 else "")
        cells = " | ".join(f"{r[c]:.2f}" for c in columns)
        out.append(f"| {step} | {r['seconds']:.2f} | {cells} |")
    later = [r for r in rows if r["step"] > 1]
    total = sum(r["seconds"] for r in later)
    if total > 0:
        shares = " | ".join(f"{sum(r[c] for r in later) / total:.0%}" for c in columns)
        out.append(f"| share after step 1 | | {shares} |")
    timed = [c for c, _ in DEVICE_PHASES if any(r.get(f"device {c}", 0) > 0 for r in later)]
    if timed:  # the host charges a part dispatched without waiting to the part that waits for it
        mean = ", ".join(
            f"{c} {sum(r[f'device {c}'] for r in later) / len(later):.2f} s" for c in timed
        )
        out.append(f"\nOn the device, a step after the first (mean): {mean}.")
    return "\n".join(out)


def _plot(rows: Sequence[dict[str, float]], path: str | pathlib.Path, title: str = "") -> Figure:
    """Each traced step as a bar of its phases' seconds (stacked), saved to ``path``; the first
    step (compiling) beside the others on a scale of its own."""
    import matplotlib.pyplot as plt

    columns = _columns(rows)
    later = [r for r in rows if r["step"] > 1]
    panels = [("step 1 (compiles)", [r for r in rows if r["step"] == 1])]
    panels += [("the steps after", later)] if later else []
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6), squeeze=False)
    colors = plt.get_cmap("tab10").colors
    for ax, (name, part) in zip(axes[0], panels, strict=True):
        labels = [str(int(r["step"])) for r in part]
        bottom = [0.0] * len(part)
        for i, c in enumerate(columns):
            values = [r[c] for r in part]
            ax.bar(labels, values, bottom=bottom, label=c, color=colors[i % len(colors)])
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.set_title(name)
        ax.set_xlabel("traced step")
        ax.set_ylabel("seconds")
    axes[0][-1].legend(fontsize=8, loc="upper right")
    fig.suptitle(title or "Where each traced GRPO step's time went")
    fig.tight_layout()
    runlog.save_figure(fig, path)
    return fig
