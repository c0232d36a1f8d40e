"""What a training run leaves on disk: its metrics across resumed sessions, their plot, a weights
digest.

- :class:`MetricsFile`: a tunix ``TrainingHooks`` that appends every logged step to
  ``OUTPUT_DIR/metrics.jsonl`` (tunix keeps its history in memory only, so a resumed run's curves
  would start at the resume); :class:`RLMetricsFile` does the same for GRPO's ``RLCluster``;
- :func:`read_metrics` / :func:`plot_metrics`: that file as arrays, and as train/eval curves (PNG);
- :func:`digest`: a fingerprint of the trained weights (did a resumed run end where a straight one
  did?);
- :func:`write_summary` / :func:`save_figure`: a notebook's ``summary.json`` and its PNGs, written
  once (of several processes, by process 0: :func:`tunixkit.hosts.once`).
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from tunix.sft import hooks

from tunixkit import hosts

if TYPE_CHECKING:
    from flax import nnx
    from matplotlib.figure import Figure

__all__ = [
    "MetricsFile",
    "RLMetricsFile",
    "digest",
    "plot_metrics",
    "read_metrics",
    "save_figure",
    "write_summary",
]


class MetricsFile(hooks.TrainingHooks):
    """A tunix ``TrainingHooks`` that appends each logged step's metrics to a JSONL file.

    tunix keeps its metric history in memory; this file survives a restart, so curves and
    first/last figures span every session of a resumed run. Of several processes (a multi-host
    run), process 0 writes it. Rows:
    ``{"mode", "step", <name>: value}`` with the latest value of each of ``names`` that the trainer
    logged (``loss`` by default; DPO adds ``rewards/margin`` and ``rewards/accuracy``).
    """

    def __init__(
        self,
        path: str | pathlib.Path,
        names: Sequence[str] = ("loss",),
        on_eval: Callable[[], dict[str, float]] | None = None,
        before_step: Callable[[Any], None] | None = None,
        rate: Callable[[Any], float | None] | None = None,
    ) -> None:
        self.path, self.names, self.on_eval = pathlib.Path(path), tuple(names), on_eval
        self.before_step = before_step  # called with the trainer before each training step
        # the learning rate of the trainer's next update (None: unknown), logged as learning_rate
        self.rate, self._rates = rate, {}
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def _write(self, trainer: Any, mode: str, step: int) -> None:
        log, prefix = trainer.metrics_logger, trainer.metrics_prefix
        row: dict[str, Any] = {"mode": mode, "step": int(step)}
        for name in self.names:
            if log.metric_exists(prefix, name, mode):
                row[name] = float(np.asarray(log.get_metric_history(prefix, name, mode))[-1])
        if mode == "train" and (rate := self._rates.pop(int(step), None)) is not None:
            row["learning_rate"] = rate  # the rate this step's update used
        if mode == "eval" and self.on_eval is not None:
            row |= {k: float(v) for k, v in self.on_eval().items()}
        if hosts.is_writer():  # every process measured the row (on_eval may be a collective)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")

    def on_train_step_end(self, train_ctx: Any, train_step: int, train_loss: Any) -> None:
        self._write(train_ctx, "train", train_step)

    def on_eval_step_end(self, train_ctx: Any, eval_loss: Any) -> None:
        self._write(train_ctx, "eval", train_ctx.train_steps)

    def on_train_start(self, train_ctx: Any) -> None: ...
    def on_train_end(self, train_ctx: Any) -> None: ...
    def on_train_step_start(self, train_ctx: Any) -> None:
        if self.before_step is not None:
            self.before_step(train_ctx)
        # tunix writes a step's metrics a step late (to overlap them with the next): by step
        if self.rate is not None and (rate := self.rate(train_ctx)) is not None:
            self._rates[train_ctx.train_steps + 1] = rate

    def on_eval_step_start(self, train_ctx: Any) -> None: ...


class RLMetricsFile:
    """GRPO's per-step metrics into the same JSONL file: an ``RLCluster`` external metrics logger
    (rewards, each reward function, completion length) plus a :class:`MetricsFile` on its actor
    trainer (loss, KL). Rows carry tunix's step, which a resumed run restores: its steps go on from
    the checkpoint's (an offset added to it once labelled a run resumed at 2 with steps 5 to 8)."""

    # the summed reward (GRPO; the environment's in agentic GRPO), completion length; and as they
    # are, the per-step figures tunixkit's metric functions log under ``tool/``
    NAMES = {
        "rewards/score/mean": "reward",
        "trajectory_rewards/mean": "reward",
        "completions/mean_length": "completion_length",
    }
    KEEP = ("tool/",)

    def __init__(
        self,
        path: str | pathlib.Path,
        *,
        before_step: Callable[[Any], None] | None = None,
        rate: Callable[[Any], float | None] | None = None,
    ) -> None:
        self.path, self.before_step = pathlib.Path(path), before_step
        self.rate = rate  # the actor's learning rate (:class:`MetricsFile`'s ``rate``)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def attach(self, cluster: Any) -> None:
        cluster.with_external_metrics_logger(self)
        hooks = MetricsFile(self.path, ("loss", "kl"), before_step=self.before_step, rate=self.rate)
        cluster.actor_trainer.with_training_hooks(hooks)

    def __call__(self, buffer: Any) -> None:
        row: dict[str, Any] = {
            "mode": str(buffer.mode),
            # tunix restores its step count from the checkpoint: a resumed run goes on from it
            "step": int(buffer.global_steps) + 1,
        }
        for name, (values, op) in buffer.metrics.items():
            key = self.NAMES.get(name)
            fn = (
                name.split("/", 1)[1]
                if name.startswith("rewards/") and name.count("/") == 1
                else None
            )
            if key is None and fn is not None and fn not in ("sum", "mean", "min", "max"):
                key = f"reward/{fn}"  # one reward function's mean
            if key is None and name.startswith(self.KEEP):
                key = name
            if key is None:
                continue
            value = np.asarray(values, dtype=float)
            row[key] = float(op(value) if op is not None else value.mean())
        if len(row) > 2 and hosts.is_writer():
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")


def read_metrics(path: str | pathlib.Path) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """``{mode: {name: (steps, values)}}`` from a :class:`MetricsFile`, sorted by step; a step
    logged twice (a resumed run repeats the evaluation at its start) keeps its last value."""
    table: dict[str, dict[str, dict[int, float]]] = {}
    path = pathlib.Path(path)
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    for n, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
            mode, step = row.pop("mode"), int(row.pop("step"))
        except (ValueError, KeyError) as e:
            raise ValueError(f"{path}:{n}: not a metrics row ({e}): {line[:80]!r}") from e
        for name, value in row.items():
            table.setdefault(mode, {}).setdefault(name, {})[step] = float(value)
    return {
        mode: {
            name: (np.array(sorted(v)), np.array([v[s] for s in sorted(v)]))
            for name, v in names.items()
        }
        for mode, names in table.items()
    }


def plot_metrics(
    metrics: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]],
    path: str | pathlib.Path,
    *,
    names: Sequence[str] = ("loss",),
    title: str = "",
) -> Figure:
    """One panel per metric name, train and eval curves together, and the learning rate's when it
    was logged; saved to ``path`` (PNG)."""
    import matplotlib.pyplot as plt

    names = [*names, *(["learning_rate"] if "learning_rate" not in names else [])]
    shown = [n for n in names if any(n in metrics.get(m, {}) for m in ("train", "eval"))]
    fig, axes = plt.subplots(
        1, max(len(shown), 1), figsize=(5 * max(len(shown), 1), 3.6), squeeze=False
    )
    for ax, name in zip(axes[0], shown, strict=False):
        for mode, style in (("train", "-"), ("eval", "o-")):
            if name in metrics.get(mode, {}):
                steps, values = metrics[mode][name]
                ax.plot(steps, values, style, label=mode, markersize=4, alpha=0.9)
        ax.set(title=name, xlabel="step")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)
    return fig


def digest(model: nnx.Module, *, trainable_only: bool = True) -> str:
    """SHA-256 (first 16 hex digits) of a model's parameters in path order: LoRA params when it has
    any, else all params. Equal digests mean bit-identical weights (e.g. a resumed run ended where
    an uninterrupted one did)."""
    import hashlib

    import jax
    from flax import nnx

    state = nnx.state(model, nnx.LoRAParam) if trainable_only else nnx.state(model, nnx.Param)
    if trainable_only and not jax.tree.leaves(state):
        state = nnx.state(model, nnx.Param)
    h = hashlib.sha256()
    for path, leaf in sorted(
        jax.tree_util.tree_flatten_with_path(state)[0], key=lambda kv: str(kv[0])
    ):
        h.update(str(path).encode())
        h.update(np.ascontiguousarray(hosts.host_value(leaf)).tobytes())
    return h.hexdigest()[:16]


def save_figure(fig: Figure, path: str | pathlib.Path) -> pathlib.Path:
    """``fig`` as a PNG at ``path``, written once (of several processes, by process 0)."""
    hosts.once(f"write {path}", fig.savefig, path, dpi=110)
    return pathlib.Path(path)


def write_summary(out_dir: str | pathlib.Path, summary: dict[str, Any]) -> pathlib.Path:
    """A notebook's ``OUTPUT_DIR/summary.json`` (values JSON cannot hold as their ``str``), written
    once (of several processes, by process 0); returns its path."""
    path = pathlib.Path(out_dir) / "summary.json"
    text = json.dumps(summary, indent=2, default=str)
    hosts.once(f"write {path}", path.write_text, text)
    return path
