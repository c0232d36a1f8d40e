"""Training glue shared by the notebooks: SFT batches, optimizer, wall-clock budget, metric curves.

The trainers are tunix's (``PeftTrainer``, ``DPOTrainer``, ``DistillationTrainer``,
``GRPOLearner``); this module only builds what they take:

- :func:`sft_dataset`: prompt/target pairs -> fixed-shape ``TrainingInput`` batches (loss on the
  target only), with a report of truncated examples rather than silent clipping; optionally
  packed, several examples to a row (tunix 0.1.7's trainer has no packing of its own);
- :func:`model_inputs_fn`: the ``gen_model_input_fn`` that adds positions and the causal mask
  (block-diagonal for packed rows);
- :func:`optimizer`: AdamW with warmup-cosine and gradient clipping, the schedule's end a number in
  the optimizer state (:func:`set_horizon`, :func:`schedule_horizon`, :func:`learning_rate`);
- :func:`checkpointing`, :func:`metrics_logging`, :func:`trainer_config`: tunix trainer options for
  resume and TensorBoard;
- :func:`run`: the one training loop of every notebook, for every tunix trainer (SFT, DPO,
  distillation, GRPO): resume, the session clock (which also ends the learning-rate schedule where
  the first steps' pace says the clock will stop training), metrics on disk;

Metrics on disk (``metrics.jsonl``), their plots and the weights digest are in
:mod:`tunixkit.runlog`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import pathlib
import shutil
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.struct import dataclass as flax_dataclass

from tunixkit import _compat, hosts, runtime
from tunixkit.runlog import MetricsFile, RLMetricsFile
from tunixkit.session import Clock
from tunixkit.tokenizer import Tokenizer

if TYPE_CHECKING:
    import grain
    import orbax.checkpoint as ocp
    from flax import nnx
    from tunix.sft import metrics_logger, peft_trainer

__all__ = [
    "sft_trainer",
    "PackedInput",
    "RunResult",
    "learning_rate",
    "optimizer",
    "run",
    "schedule_horizon",
    "set_horizon",
    "sft_dataset",
    "trainer_config",
]


def tokenize_pair(
    tokenizer: Tokenizer, prompt: str, target: str, max_len: int
) -> tuple[np.ndarray, np.ndarray, bool]:
    """``[BOS] prompt target`` (BOS if the tokenizer has one) padded to ``max_len``; mask is 1 on
    target tokens. Returns (ids, mask, truncated)."""
    p, t = tokenizer.with_bos(tokenizer.encode(prompt)), tokenizer.encode(target)
    ids, mask = (p + t)[:max_len], ([0] * len(p) + [1] * len(t))[:max_len]
    pad = tokenizer.pad_id()
    truncated = len(p) + len(t) > max_len
    return (
        np.array(ids + [pad] * (max_len - len(ids)), np.int32),
        np.array(mask + [0] * (max_len - len(mask)), np.int32),
        truncated,
    )


def sft_dataset(
    pairs: Sequence[tuple[str, str]],
    tokenizer: Tokenizer,
    *,
    max_len: int,
    batch_size: int,
    num_batches: int | None = None,
    seed: int = 0,
    packing: bool = False,
    verbose: bool = True,
) -> grain.MapDataset[PackedInput | peft_trainer.TrainingInput]:
    """A reproducible grain dataset of SFT batches from (prompt, target) pairs.

    Examples longer than ``max_len`` are truncated (and counted in the printed report); with
    ``num_batches`` the data is shuffled and repeated to that many batches. ``packing`` fills each
    row of ``max_len`` tokens with as many whole examples as fit (first fit, in order), each its own
    segment (:class:`PackedInput`); :func:`model_inputs_fn` then keeps them apart.
    """
    import grain
    from tunix.sft import peft_trainer

    encoded = [tokenize_pair(tokenizer, p, t, max_len) for p, t in pairs]
    n_trunc = sum(e[2] for e in encoded)
    if verbose and n_trunc:
        print(
            f"sft_dataset: {n_trunc}/{len(encoded)} examples longer than max_len={max_len} "
            "were truncated"
        )
    ds = grain.MapDataset.source(
        [{"input_tokens": ids, "input_mask": mask} for ids, mask, _ in encoded]
    )
    if num_batches is not None:  # packed: as many epochs as it takes to fill num_batches of rows
        ds = ds.shuffle(seed=seed).repeat(
            None if packing else -(-num_batches * batch_size // max(len(encoded), 1))
        )
    if packing:
        rows = _pack(
            ds,
            max_len,
            tokenizer.pad_id(),
            None if num_batches is None else num_batches * batch_size,
        )
        if verbose:
            used = sum(int(r["segment_ids"].max()) for r in rows)
            print(f"sft_dataset: {used} examples packed into {len(rows)} rows of {max_len} tokens")
        ds = grain.MapDataset.source(rows)
    ds = ds.batch(batch_size, drop_remainder=num_batches is not None)
    if num_batches is not None:
        ds = ds[:num_batches]
    return ds.map(lambda b: PackedInput(**b) if packing else peft_trainer.TrainingInput(**b))


@flax_dataclass
class PackedInput:
    """A batch of packed rows: ``segment_ids`` 1, 2, ... for each example in a row, 0 for
    padding."""

    input_tokens: Any  # [B, L]
    input_mask: Any  # [B, L], 1 on tokens that carry loss
    segment_ids: Any  # [B, L]


def _pack(
    items: Iterable[dict[str, np.ndarray]], max_len: int, pad: int, rows_wanted: int | None = None
) -> list[dict[str, np.ndarray]]:
    """First-fit packing of padded examples into rows of ``max_len`` tokens (order kept in a row;
    only the last 64 rows stay open, so it streams and is reproducible); with ``rows_wanted`` it
    stops once that many rows are closed."""
    rows: list[dict[str, np.ndarray]] = []
    fill: list[int] = []
    for item in items:
        if rows_wanted is not None and len(rows) >= rows_wanted + 64:
            break
        n = int(np.count_nonzero(item["input_tokens"] != pad)) or 1
        r = next(
            (i for i in range(max(0, len(rows) - 64), len(rows)) if fill[i] + n <= max_len), None
        )
        if r is None:
            rows.append(
                {
                    "input_tokens": np.full(max_len, pad, np.int32),
                    "input_mask": np.zeros(max_len, np.int32),
                    "segment_ids": np.zeros(max_len, np.int32),
                }
            )
            fill.append(0)
            r = len(rows) - 1
        o, row = fill[r], rows[r]
        row["input_tokens"][o : o + n] = item["input_tokens"][:n]
        row["input_mask"][o : o + n] = item["input_mask"][:n]
        row["input_mask"][o] = 0  # token o would be predicted from the previous segment: no target
        row["segment_ids"][o : o + n] = int(row["segment_ids"].max()) + 1
        fill[r] += n
    return rows if rows_wanted is None else rows[:rows_wanted]


def model_inputs_fn(pad_id: int) -> Callable[[Any], dict[str, Any]]:
    """``gen_model_input_fn`` for tunix trainers: tokens and mask plus positions and the causal
    mask; for :class:`PackedInput` batches, positions restart at each segment and the mask is
    block-diagonal (a token sees only its own example), which gives each packed example exactly
    the loss it has alone (tunix's Gemma takes any [B, L, L] mask)."""
    from tunix.sft import utils as sft_utils

    def fn(x) -> dict[str, Any]:
        if not isinstance(x, PackedInput):
            valid = x.input_tokens != pad_id
            return {
                "input_tokens": x.input_tokens,
                "input_mask": x.input_mask,
                "positions": sft_utils.build_positions_from_mask(valid),
                "attention_mask": sft_utils.make_causal_attn_mask(valid),
            }
        seg = x.segment_ids
        idx = jnp.broadcast_to(jnp.arange(seg.shape[-1], dtype=jnp.int32), seg.shape)
        start = jnp.concatenate(
            [jnp.ones_like(seg[:, :1], bool), seg[:, 1:] != seg[:, :-1]], axis=1
        )
        positions = idx - jax.lax.cummax(jnp.where(start, idx, 0), axis=1)
        same = (seg[:, :, None] == seg[:, None, :]) & (seg[:, :, None] > 0)
        causal = jnp.tril(jnp.ones((seg.shape[-1],) * 2, bool))[None]
        return {
            "input_tokens": x.input_tokens,
            "input_mask": x.input_mask,
            "positions": positions,
            "attention_mask": same & causal,
        }

    return fn


class ScheduleState(NamedTuple):
    """The state of :func:`optimizer`'s learning-rate schedule (:func:`schedule_rate`): the updates
    done, the update at which it reaches its end rate (:func:`set_horizon` moves it), its peak
    rate and warmup share."""

    count: Any  # int32 scalar
    horizon: Any  # int32 scalar
    peak: Any  # float32 scalar
    warmup_ratio: Any  # float32 scalar


def schedule_rate(
    peak: float,
    warmup_ratio: float,
    count: Any,
    horizon: Any,
    *,
    end_ratio: float = 0.1,
    xp: Any = jnp,
) -> Any:
    """The learning rate at update ``count`` of a warmup-cosine schedule that ends at update
    ``horizon``: linear from 0 to ``peak`` over ``warmup_ratio`` of the horizon (at least one
    update), then cosine down to ``end_ratio * peak``, which it keeps after the horizon. The same
    values as ``optax.warmup_cosine_decay_schedule``, with the horizon a traced number. ``xp``:
    ``jax.numpy`` (traced in the step) or ``numpy`` (on the host, for the metrics)."""

    count, horizon = xp.asarray(count, xp.float32), xp.asarray(horizon, xp.float32)
    warmup = xp.maximum(1.0, xp.floor(warmup_ratio * horizon))
    decay = xp.maximum(horizon, warmup + 1.0) - warmup
    t = xp.clip(count - warmup, 0.0, decay)
    cosine = end_ratio + (1.0 - end_ratio) * 0.5 * (1.0 + xp.cos(xp.pi * t / decay))
    return xp.where(count < warmup, peak * count / warmup, peak * cosine)


def _scale_by_schedule(
    peak: float, warmup_ratio: float, horizon: int
) -> optax.GradientTransformation:
    """``optax.scale_by_learning_rate`` of :func:`schedule_rate`, the horizon kept in the state."""

    def init(params: Any) -> ScheduleState:
        del params
        return ScheduleState(
            jnp.zeros([], jnp.int32),
            jnp.asarray(horizon, jnp.int32),
            jnp.asarray(peak, jnp.float32),
            jnp.asarray(warmup_ratio, jnp.float32),
        )

    def update(updates: Any, state: ScheduleState, params: Any = None) -> tuple[Any, Any]:
        del params
        rate = schedule_rate(state.peak, state.warmup_ratio, state.count, state.horizon)
        updates = jax.tree.map(lambda g: jnp.asarray(-rate, g.dtype) * g, updates)
        count = optax.safe_int32_increment(state.count)
        return updates, ScheduleState(count, state.horizon, state.peak, state.warmup_ratio)

    return optax.GradientTransformation(init, update)


def optimizer(
    learning_rate: float,
    total_steps: int,
    *,
    warmup_ratio: float = 0.1,
    clip_norm: float | None = 1.0,
    weight_decay: float = 0.0,
    b2: float = 0.999,
) -> optax.GradientTransformation:
    """AdamW on a warmup-cosine schedule over ``total_steps`` updates (to a tenth of the peak),
    after global-norm gradient clipping. The schedule's horizon lives in the optimizer state, so
    :func:`run` can end it earlier once the first steps' pace says fewer updates fit the session
    (:func:`set_horizon`), without a new compile."""

    adamw = optax.chain(
        optax.scale_by_adam(b2=b2),
        optax.add_decayed_weights(weight_decay),
        _scale_by_schedule(learning_rate, warmup_ratio, max(1, int(total_steps))),
    )
    return optax.chain(optax.clip_by_global_norm(clip_norm), adamw) if clip_norm else adamw


def _schedule_states(trainer: Any) -> list[ScheduleState]:
    """The :class:`ScheduleState` (of ``nnx`` variables) in a tunix trainer's optimizer (a GRPO
    learner's: its actor's), through optax's chains and ``MultiSteps``."""

    if hasattr(trainer, "rl_cluster"):
        trainer = trainer.rl_cluster.actor_trainer
    tree = trainer.optimizer.opt_state
    found = jax.tree.leaves(tree, is_leaf=lambda x: isinstance(x, ScheduleState))
    return [x for x in found if isinstance(x, ScheduleState)]


def schedule_horizon(trainer: Any) -> int | None:
    """The update at which the trainer's learning-rate schedule ends (None: not :func:`optimizer`'s
    schedule)."""
    states = _schedule_states(trainer)
    return int(np.asarray(states[0].horizon.get_value())) if states else None


def learning_rate(trainer: Any) -> float:
    """The rate of the trainer's next update under :func:`optimizer`'s schedule."""
    (state,) = _schedule_states(trainer)
    count, horizon, peak, warmup_ratio = (np.asarray(v.get_value()) for v in state)
    return float(schedule_rate(peak, warmup_ratio, count, horizon))


def set_horizon(trainer: Any, updates: int) -> None:
    """End the trainer's learning-rate schedule at update ``updates`` from its next step on: the
    same compiled step reads the new horizon (a number in the optimizer state, checkpointed with
    it). Call between steps, from the thread that trains."""

    for state in _schedule_states(trainer):
        old = state.horizon.get_value()
        state.horizon.set_value(jax.device_put(np.int32(max(1, updates)), old.sharding))


def checkpointing(
    directory: str | pathlib.Path, *, every_steps: int, keep: int = 2
) -> tuple[str, ocp.CheckpointManagerOptions]:
    """(checkpoint_root_directory, CheckpointManagerOptions) for tunix trainers; resume is
    automatic."""
    import orbax.checkpoint as ocp

    opts = ocp.CheckpointManagerOptions(save_interval_steps=every_steps, max_to_keep=keep)
    return str(pathlib.Path(directory).resolve()), opts


# tunix writes an RL learner's checkpoints to <root>/actor/<step>/model_params (rl_cluster.py: the
# role's name is appended to the root): LoRA-only states that a harness globbing the judged model's
# pattern (ckpts/actor/<step>/model_params) could pick up. Once a run has trained, they rest in
# <root>/policy instead; rl.cluster wakes them (back to actor/) before tunix restores from them.
RL_ROLE_DIR, RL_RESTING_DIR = "actor", "policy"


def rest_rl_checkpoints(root: str | pathlib.Path) -> None:
    """Move an RL run's checkpoints (``root/actor``) to ``root/policy``, out of the judged model's
    ``actor/<step>/model_params`` pattern (the trainer has closed them: tunix's learner closes its
    cluster at the end of ``train``)."""
    root = pathlib.Path(root)
    src, dst = root / RL_ROLE_DIR, root / RL_RESTING_DIR
    if src.is_dir():
        if dst.exists():
            shutil.rmtree(dst)
        src.rename(dst)


def wake_rl_checkpoints(root: str | pathlib.Path) -> None:
    """Move ``root/policy`` back to ``root/actor``, where tunix's RL cluster restores from (a run
    continuing, or a rerun of a finished one, which then trains nothing)."""
    root = pathlib.Path(root)
    src, dst = root / RL_RESTING_DIR, root / RL_ROLE_DIR
    if src.is_dir() and not dst.exists():
        src.rename(dst)


def metrics_logging(
    log_dir: str | pathlib.Path, flush_every: int = 10, *, run_name: str = ""
) -> metrics_logger.MetricsLoggerOptions:
    """Logging options for tunix trainers: TensorBoard always, W&B only when the user set it up.

    W&B is used when a ``WANDB_API_KEY`` secret exists and ``WANDB_MODE`` is not ``disabled``; it
    never prompts. Both backends go quiet once closed: tunix registers them as JAX monitoring
    listeners for good, and a closed W&B run would otherwise make the next compilation (an
    evaluation after training) raise ``You must call wandb.init() before wandb.log()``.
    """
    import os

    from metrax import logging as metrax_logging
    from tunix.sft import metrics_logger

    log_dir = str(pathlib.Path(log_dir).resolve())
    factories = [
        lambda: _Closable(
            metrax_logging.TensorboardBackend(log_dir=log_dir, flush_every_n_steps=flush_every)
        )
    ]
    use_wandb = os.environ.get("WANDB_MODE") != "disabled" and runtime.get_secret(
        "WANDB_API_KEY", purpose="optional Weights & Biases logging", required=False
    )
    if use_wandb:
        os.environ["WANDB_API_KEY"] = use_wandb  # wandb reads it from there, no login prompt
        factories.append(
            lambda: _Closable(metrax_logging.WandbBackend(project="tunixkit", name=run_name))
        )
    return metrics_logger.MetricsLoggerOptions(
        log_dir=log_dir,
        flush_every_n_steps=flush_every,
        backend_kwargs={"custom_backend": factories},
    )


def trainer_config(
    output_dir: str | pathlib.Path | None,
    *,
    max_steps: int,
    eval_every: int,
    checkpoint_every: int,
    description: str,
    config_cls: type[peft_trainer.TrainingConfig] | None = None,
    **fields: Any,
) -> peft_trainer.TrainingConfig:
    """A tunix trainer config (``PeftTrainer``'s ``TrainingConfig`` or ``config_cls``, e.g. DPO's)
    with checkpoints in ``output_dir/checkpoints`` (resumed automatically) and TensorBoard logs in
    ``output_dir/tensorboard`` (None: neither, as the memory plan compiles it); ``fields`` are the
    config class's own settings."""
    from tunix.sft import peft_trainer

    cls = config_cls or peft_trainer.TrainingConfig
    if output_dir is None:
        return cls(eval_every_n_steps=eval_every, max_steps=max_steps, **fields)
    out = pathlib.Path(output_dir)
    root, opts = checkpointing(out / "checkpoints", every_steps=checkpoint_every)
    return cls(
        eval_every_n_steps=eval_every,
        max_steps=max_steps,
        checkpoint_root_directory=root,
        checkpointing_options=opts,
        pbar_description=description,
        metrics_logging_options=metrics_logging(out / "tensorboard", run_name=out.name),
        **fields,
    )


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What :func:`run` did: steps restored from a checkpoint, steps after it, why it ended."""

    resumed_from: int  # steps the trainer had done when this run started (its restored checkpoint)
    steps: int  # steps done by the end (restored ones included)
    seconds: float  # this run's training wall time
    # why it ended: "done" (all steps), "session clock" (stopped in time), "stop requested"
    # (OUTPUT_DIR/STOP) or "data" (the batches ran out)
    stopped: str

    @property
    def trained(self) -> int:
        """Steps trained by this run."""
        return self.steps - self.resumed_from

    def ended_well(self, hours: float | None) -> bool:
        """Whether it ended as a run may: every step, a STOP file, a rehearsal's few steps, or the
        session clock of a session with a limit (``hours``); not when the batches ran out.

        >>> RunResult(0, 5, 1.0, "session clock").ended_well(None)
        False
        """
        return self.stopped in ("done", "stop requested", "rehearsal") or bool(
            hours and self.stopped == "session clock"
        )


def sft_trainer(
    model: nnx.Module,
    optimizer: optax.GradientTransformation,
    config: peft_trainer.TrainingConfig,
    *,
    pad_id: int,
) -> peft_trainer.PeftTrainer:
    """tunix's ``PeftTrainer`` for supervised fine-tuning (LoRA, QLoRA or every weight), fed the
    batches of :func:`sft_dataset` (packed or not) through :func:`model_inputs_fn`. The one SFT
    builder: notebooks 01 and 06, the smoke warm start and the memory plan build theirs here."""
    from tunix.sft import peft_trainer

    return peft_trainer.PeftTrainer(model, optimizer, config).with_gen_model_input_fn(
        model_inputs_fn(pad_id)
    )


def steps_done(trainer: Any) -> int:
    """Optimizer steps a tunix trainer has done, restored ones included; for a ``GRPOLearner``,
    GRPO steps (one batch of prompts each, whatever its inner updates)."""
    if hasattr(trainer, "rl_cluster"):
        return trainer.rl_cluster.actor_trainer.train_steps // _compat.updates_per_step(trainer)
    return trainer.train_steps


class _Feed:
    """The batches a trainer pulls, from the first: tunix skips the ones its checkpoint already
    trained on (``skip``). After each step (:meth:`step_ended`) and before each new one it asks the
    session clock, and ends the data (the trainer then saves a last checkpoint) when one more step
    would eat the time kept for after. The run's last step, whichever ends it, gets an eval loss."""

    def __init__(
        self,
        batches: Sequence[Any],
        *,
        skip: int,
        session: Clock | None,
        label: str,
        eval_at_end: bool,
    ) -> None:
        self.batches, self.skip, self.session, self.label = batches, skip, session, label
        self.eval_at_end = eval_at_end
        self.step_seconds: list[float] = []
        self.stopped = "data"
        self.decided: bool | None = None  # step_ended's answer for the next batch (None: not asked)
        self.hooked = False  # whether the trainer calls step_ended (not a GRPOLearner)
        self.last: float | None = None  # when the last step ended (or the first began)
        self.last_steps = skip  # the steps done at that time
        self.ended: float | None = None  # when the trainer asked past the last batch
        self.trainer: Any = None  # the trainer run() trains (set there)
        self.paced = False  # whether the schedule was sized from the first steps' pace
        # the schedule's (peak, warmup share, horizon) as last read; () without one; None: unread
        self.schedule: tuple[float, ...] | None = None
        self.rows: Callable[[Any], Any] = lambda batch: batch  # the part of a batch fed here

    def __iter__(self) -> Iterator[Any]:
        try:
            yield from self._batches()
        finally:
            self.ended = time.perf_counter()

    def _must_stop(self, steps: int) -> bool:
        """Whether to stop with ``steps`` steps done: the session clock leaves no time for another
        step, or ``OUTPUT_DIR/STOP`` asks to stop (``stopped`` says which). Of several processes,
        process 0's clock and files decide for all (:func:`tunixkit.hosts.agree`): a process that
        stopped alone would leave the others waiting in the next step's collectives."""
        if self.session is None:
            return False
        reason = None
        rehearsal = self.session.rehearsal
        if rehearsal is not None and steps - self.skip >= rehearsal.steps:
            reason = "rehearsal"
        elif self.session.stop_requested(steps):
            reason = "stop requested"
        elif self.session.must_stop(max(self.step_seconds[-3:], default=0.0)):
            reason = "session clock"
        agreed = int(hosts.agree(np.int32(-1 if reason is None else STOPS.index(reason))))
        if agreed < 0:
            return False
        self.stopped = STOPS[agreed]
        return True

    def _batches(self) -> Iterator[Any]:
        for i, batch in enumerate(self.batches):
            if i >= self.skip:
                stop = self._must_stop(i) if self.decided is None else self.decided
                self.decided = None
                if stop and self.stopped == "rehearsal":
                    print(f"{self.label}: a rehearsal, stopping after {i - self.skip} steps")
                    return
                if stop and self.stopped == "stop requested":
                    print(
                        f"{self.label}: stopping after {i} of the run's batches: "
                        f"{self.session.stop_file} asks to stop"
                    )
                    return
                if stop:
                    print(
                        f"{self.label}: stopping after {i} of the run's batches: "
                        f"{self.session.remaining():.0f}s are left and "
                        f"{self.session.reserve():.0f}s are kept for the checkpoint, export and "
                        "evaluation after training"
                    )
                    return
                if self.last is None or not self.hooked:  # without the hook, steps end here
                    now = time.perf_counter()
                    if self.last is not None:
                        self.step_seconds.append(now - self.last)
                    self.last = now
            yield self.rows(batch)

    def step_ended(self, trainer: Any) -> None:
        """Called by the trainer's hook after each optimizer step (tunix 0.1.7 calls it from the
        second step of a run on, before the step's checkpoint and eval). When this step is the
        run's last (all batches done, or no time for another) and its eval loss would not be
        measured, tunix's eval is made due at this step: ``eval_every_n_steps`` is read each
        step."""
        now, steps = time.perf_counter(), steps_done(trainer)
        if self.last is not None and steps > self.last_steps:
            self.step_seconds.append((now - self.last) / (steps - self.last_steps))
        self.last, self.last_steps = now, steps
        self.decided = steps < len(self.batches) and self._must_stop(steps)
        if self.eval_at_end and (steps >= len(self.batches) or self.decided):
            _compat.make_eval_due(trainer, steps)

    def size_schedule(self, trainer: Any) -> None:
        """Before a step, in the thread that trains: once :data:`PACE_STEPS` steps after the first
        are timed, end the learning-rate schedule (:func:`set_horizon`) at the step where the
        session clock will stop training, when that comes before the schedule's end (so the rate
        has decayed by then), and say so. Not in a rehearsal, nor without a session limit."""
        if self.paced or self.session is None or len(self.step_seconds) < 1 + PACE_STEPS:
            return
        self.paced = True
        if self.session.rehearsal is not None:
            return
        pace = statistics.median(self.step_seconds[1:])
        more = self.session.steps_that_fit(pace)
        # process 0's figure on every process: the schedule's horizon is part of the update
        more = int(hosts.agree(np.int32(-1 if more is None else more)))
        more = None if more < 0 else more
        horizon = None if more is None else schedule_horizon(self.trainer)
        if more is None or horizon is None:
            return
        updates = _compat.updates_per_step(self.trainer)
        steps = steps_done(self.trainer)
        fit = min(len(self.batches), steps + more)
        paced = f"{self.label}: {pace:.2f} s a step (the median of the steps after the first)"
        if fit * updates >= horizon:
            print(
                f"{paced}: the learning-rate schedule's {horizon // updates} steps fit the session"
            )
            return
        set_horizon(trainer, fit * updates)
        self.schedule = None  # read again with the new horizon
        print(
            f"{paced}, so about {fit} of the {len(self.batches)} planned steps fit the session: "
            f"the learning-rate schedule now ends at step {fit} (was {horizon // updates}), where "
            "the clock will stop training"
        )

    def rate(self, trainer: Any) -> float | None:
        """The learning rate of the update ``trainer`` makes next (None: not :func:`optimizer`'s
        schedule), computed on the host: reading it from the optimizer state would wait for the
        step in flight, which tunix overlaps with preparing the next. The state is read once, and
        again after :meth:`size_schedule` moves the horizon."""
        if self.schedule is None:
            states = _schedule_states(trainer)
            self.schedule = (
                tuple(
                    float(np.asarray(v.get_value()))
                    for v in (states[0].peak, states[0].warmup_ratio, states[0].horizon)
                )
                if len(states) == 1
                else ()
            )
        if not self.schedule:
            return None
        peak, warmup, horizon = self.schedule
        return float(schedule_rate(peak, warmup, trainer.train_steps, horizon, xp=np))


# why a run stopped early, by the index process 0 sends the others (:meth:`_Feed._must_stop`)
STOPS = ("rehearsal", "stop requested", "session clock")
PACE_STEPS = 3  # steps timed after the first (compiles) before the pace sizes the schedule


class _RunHooks(MetricsFile):
    """:class:`tunixkit.runlog.MetricsFile` that also tells the feed each step has ended."""

    def __init__(self, feed: _Feed, *args: Any) -> None:
        super().__init__(*args)
        self.feed = feed
        feed.hooked = True

    def on_train_step_end(self, train_ctx: Any, train_step: int, train_loss: Any) -> None:
        super().on_train_step_end(train_ctx, train_step, train_loss)
        self.feed.step_ended(train_ctx)


def run(
    trainer: Any,
    batches: Sequence[Any],
    eval_batches: Iterable[Any] | None = None,
    *,
    mesh: Any = None,
    metrics_file: str | pathlib.Path,
    metric_names: Sequence[str] = ("loss",),
    on_eval: Callable[[], dict[str, float]] | None = None,
    session: Clock | None = None,
    label: str = "training",
) -> RunResult:
    """Train any tunix trainer (``PeftTrainer``, ``DPOTrainer``, ``DistillationTrainer`` or a
    ``GRPOLearner``) on ``batches``, the run's whole reproducible batch sequence, one per step.

    The trainer restored its last checkpoint when it was built; tunix then skips the batches that
    checkpoint had trained on, so a rerun (or a session continuing with ``RESUME_FROM``) trains
    exactly the remaining steps on the batches an uninterrupted run would have seen. Metrics go to
    ``metrics_file`` (kept across sessions, :class:`tunixkit.runlog.MetricsFile`); ``session``
    (a :class:`tunixkit.session.Clock`: the session's, or a stage's) stops training in time for the
    work after it.
    """
    resumed_from = steps_done(trainer)
    if resumed_from:
        print(f"{label}: resuming from the checkpoint at step {resumed_from}")
    rl = hasattr(trainer, "rl_cluster")
    feed = _Feed(
        batches,
        skip=resumed_from,
        session=session,
        label=label,
        eval_at_end=eval_batches is not None and not rl,
    )
    feed.trainer = trainer
    # of several processes, each feeds its own rows of a batch to a trainer that shards them
    if hosts.count() > 1 and mesh is not None and _compat.shards_input_as_it_comes(trainer):
        axis = tuple(trainer.config.data_sharding_axis)
        feed.rows = functools.partial(hosts.own_rows, mesh=mesh, axis=axis)
        if eval_batches is not None:
            eval_batches = [feed.rows(b) for b in eval_batches]
    if rl:
        _check_grpo_skip(trainer, resumed_from)
        RLMetricsFile(metrics_file, before_step=feed.size_schedule, rate=feed.rate).attach(
            trainer.rl_cluster
        )
    else:
        trainer.with_training_hooks(
            _RunHooks(feed, metrics_file, metric_names, on_eval, feed.size_schedule, feed.rate)
        )
    start, began = time.perf_counter(), session.elapsed() if session is not None else 0.0
    with runtime.mesh_context(mesh) if mesh is not None else contextlib.nullcontext():
        trainer.train(feed, eval_batches)
    if feed.ended is not None and session is not None:  # the trainer's last checkpoint and close
        session.record("checkpoint", time.perf_counter() - feed.ended)
    steps = steps_done(trainer)
    if rl and (root := trainer.rl_cluster.cluster_config.training_config.checkpoint_root_directory):
        rest_rl_checkpoints(root)
    stopped = "done" if steps >= len(batches) else feed.stopped
    result = RunResult(resumed_from, steps, time.perf_counter() - start, stopped)
    rehearsal = session.rehearsal if session is not None else None
    if rehearsal is not None:  # what the real run's steps of this stage will take
        rehearsal.stage(
            label,
            began,
            (feed.ended or time.perf_counter()) - start,
            planned_steps=len(batches) - resumed_from,
            steps=result.trained,
            step_seconds=feed.step_seconds,
            checkpoint_every=_checkpoint_every(trainer),
            checkpoint_seconds=session.timings.get("checkpoint", 0.0),
        )
    print(
        f"{label}: {steps} of {len(batches)} steps ({result.trained} in this run, "
        f"{result.seconds:.0f}s); ended: {stopped}"
    )
    return result


def _checkpoint_every(trainer: Any) -> int | None:
    """The steps between a tunix trainer's checkpoints (a GRPO learner's: its actor's)."""
    config = getattr(trainer, "config", None)
    if hasattr(trainer, "rl_cluster"):
        config = trainer.rl_cluster.cluster_config.training_config
    options = getattr(config, "checkpointing_options", None)
    every = getattr(options, "save_interval_steps", None)
    updates = _compat.updates_per_step(trainer)
    return max(1, every // updates) if every else None


def _check_grpo_skip(learner: Any, resumed_from: int) -> None:
    """tunix 0.1.7 fast-forwards ``actor.iter_steps`` micro-batches on resume, which is the right
    number of prompt batches only with one update per batch (``num_iterations=1``, no
    mini-batches)."""
    if resumed_from and _compat.updates_per_step(learner) != 1:
        raise NotImplementedError(
            "resuming GRPO with num_iterations > 1 or mini_batch_size < batch_size: tunix 0.1.7 "
            "would skip the wrong number of batches; train without them, or start this run afresh"
        )


class _Closable:
    """A metrax logging backend that ignores scalars after ``close()``."""

    def __init__(self, backend: Any) -> None:
        self._backend, self._open = backend, True

    def log_scalar(self, event: str, value: Any, **kwargs: Any) -> None:
        if self._open:
            self._backend.log_scalar(event, value, **kwargs)

    def close(self) -> None:
        if self._open:
            self._open = False
            self._backend.close()
