"""Training glue shared by the notebooks: SFT batches, optimizer, wall-clock budget, metric curves.

The trainers are tunix's (``PeftTrainer``, ``DPOTrainer``, ``DistillationTrainer``,
``GRPOLearner``); this module only builds what they take:

- :func:`sft_dataset`: prompt/target pairs -> fixed-shape ``TrainingInput`` batches (loss on the
  target only), with a report of truncated examples rather than silent clipping;
- :func:`model_inputs_fn`: the ``gen_model_input_fn`` that adds positions and the causal mask;
- :func:`optimizer`: AdamW with warmup-cosine and gradient clipping;
- :func:`within_budget`: wraps a dataset so training stops in time (the 9-hour Kaggle session);
- :func:`checkpointing`, :func:`metrics_logging`, :func:`trainer_config`: tunix trainer options for
  resume and TensorBoard; :func:`run`: train (on a mesh, within a budget) and say what happened;

Metrics on disk (``metrics.jsonl``), their plots and the weights digest are in :mod:`tunixkit.runlog`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from tunixkit.runlog import MetricsFile


def tokenize_pair(
    tokenizer, prompt: str, target: str, max_len: int
) -> tuple[np.ndarray, np.ndarray, bool]:
    """``[BOS] prompt target`` padded to ``max_len``; mask is 1 on target tokens. Returns (ids, mask, truncated)."""
    p = [tokenizer.bos_id()] + list(
        tokenizer.EncodeAsIds(prompt)
        if hasattr(tokenizer, "EncodeAsIds")
        else tokenizer.encode(prompt, add_special_tokens=False)
    )
    t = list(
        tokenizer.EncodeAsIds(target)
        if hasattr(tokenizer, "EncodeAsIds")
        else tokenizer.encode(target, add_special_tokens=False)
    )
    ids, mask = (p + t)[:max_len], ([0] * len(p) + [1] * len(t))[:max_len]
    pad = pad_id(tokenizer)
    truncated = len(p) + len(t) > max_len
    return (np.array(ids + [pad] * (max_len - len(ids)), np.int32),
            np.array(mask + [0] * (max_len - len(mask)), np.int32), truncated)  # fmt: skip


def pad_id(tokenizer) -> int:
    """The padding id of a SentencePiece or Hugging Face tokenizer."""
    return tokenizer.pad_id() if hasattr(tokenizer, "pad_id") else tokenizer.pad_token_id


def sft_dataset(
    pairs: Sequence[tuple[str, str]],
    tokenizer,
    *,
    max_len: int,
    batch_size: int,
    num_batches: int | None = None,
    seed: int = 0,
    verbose: bool = True,
):
    """A reproducible grain dataset of ``peft_trainer.TrainingInput`` batches from (prompt, target) pairs.

    Examples longer than ``max_len`` are truncated (and counted in the printed report); with
    ``num_batches`` the data is shuffled and repeated to that many batches.
    """
    import grain
    from tunix.sft import peft_trainer

    encoded = [tokenize_pair(tokenizer, p, t, max_len) for p, t in pairs]
    n_trunc = sum(e[2] for e in encoded)
    if verbose and n_trunc:
        print(
            f"sft_dataset: {n_trunc}/{len(encoded)} examples longer than max_len={max_len} were truncated"
        )
    items = [{"input_tokens": ids, "input_mask": mask} for ids, mask, _ in encoded]
    ds = grain.MapDataset.source(items)
    if num_batches is not None:
        ds = ds.shuffle(seed=seed).repeat(-(-num_batches * batch_size // max(len(items), 1)))
    ds = ds.batch(batch_size, drop_remainder=num_batches is not None)
    if num_batches is not None:
        ds = ds[:num_batches]
    return ds.map(lambda b: peft_trainer.TrainingInput(**b))


def model_inputs_fn(pad_id: int) -> Callable[[Any], dict[str, Any]]:
    """``gen_model_input_fn`` for tunix trainers: tokens and mask plus positions and causal mask."""
    from tunix.sft import utils as sft_utils

    def fn(x) -> dict[str, Any]:
        valid = x.input_tokens != pad_id
        return {"input_tokens": x.input_tokens, "input_mask": x.input_mask,
                "positions": sft_utils.build_positions_from_mask(valid),
                "attention_mask": sft_utils.make_causal_attn_mask(valid)}  # fmt: skip

    return fn


def optimizer(
    learning_rate: float,
    total_steps: int,
    *,
    warmup_ratio: float = 0.1,
    clip_norm: float | None = 1.0,
    weight_decay: float = 0.0,
    b2: float = 0.999,
):
    """AdamW on a warmup-cosine schedule, after global-norm gradient clipping."""
    import optax

    warmup = max(1, int(warmup_ratio * total_steps))
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=learning_rate, warmup_steps=warmup,
        decay_steps=max(total_steps, warmup + 1), end_value=0.1 * learning_rate,
    )  # fmt: skip
    adamw = optax.adamw(schedule, b2=b2, weight_decay=weight_decay)
    return optax.chain(optax.clip_by_global_norm(clip_norm), adamw) if clip_norm else adamw


def within_budget(
    data: Iterable[Any], seconds: float | None, *, label: str = "training"
) -> Iterator[Any]:
    """Yield from ``data`` until ``seconds`` have passed since the first item, then stop (and say so).

    Trainers end when their data ends, then save: this is how a run fits a session's time limit.
    """
    start = time.monotonic()
    for i, item in enumerate(data):
        if seconds is not None and time.monotonic() - start > seconds:
            print(
                f"within_budget: {label} stopped after {i} batches, wall-clock budget of {seconds:.0f}s reached"
            )
            return
        yield item


def checkpointing(directory: str | pathlib.Path, *, every_steps: int, keep: int = 2):
    """(checkpoint_root_directory, CheckpointManagerOptions) for tunix trainers; resume is automatic."""
    import orbax.checkpoint as ocp

    opts = ocp.CheckpointManagerOptions(save_interval_steps=every_steps, max_to_keep=keep)
    return str(pathlib.Path(directory).resolve()), opts


def metrics_logging(log_dir: str | pathlib.Path, flush_every: int = 10, *, run_name: str = ""):
    """Logging options for tunix trainers: TensorBoard always, W&B only when the user set it up.

    W&B is used when a ``WANDB_API_KEY`` secret exists and ``WANDB_MODE`` is not ``disabled``; it
    never prompts. Both backends go quiet once closed: tunix registers them as JAX monitoring
    listeners for good, and a closed W&B run would otherwise make the next compilation (an
    evaluation after training) raise ``You must call wandb.init() before wandb.log()``.
    """
    import os

    from metrax import logging as metrax_logging
    from tunix.sft import metrics_logger

    from tunixkit import runtime

    log_dir = str(pathlib.Path(log_dir).resolve())
    factories = [lambda: _Closable(metrax_logging.TensorboardBackend(log_dir=log_dir,
                                                                     flush_every_n_steps=flush_every))]  # fmt: skip
    use_wandb = os.environ.get("WANDB_MODE") != "disabled" and runtime.get_secret(
        "WANDB_API_KEY", purpose="optional Weights & Biases logging", required=False
    )
    if use_wandb:
        os.environ["WANDB_API_KEY"] = use_wandb  # wandb reads it from there, no login prompt
        factories.append(
            lambda: _Closable(metrax_logging.WandbBackend(project="tunixkit", name=run_name))
        )
    return metrics_logger.MetricsLoggerOptions(
        log_dir=log_dir, flush_every_n_steps=flush_every,
        backend_kwargs={"custom_backend": factories},
    )  # fmt: skip


def trainer_config(
    output_dir: str | pathlib.Path,
    *,
    max_steps: int,
    eval_every: int,
    checkpoint_every: int,
    description: str,
    config_cls: Any = None,
    **fields: Any,
):
    """A tunix trainer config (``PeftTrainer``'s ``TrainingConfig`` or ``config_cls``, e.g. DPO's)
    with checkpoints in ``output_dir/checkpoints`` (resumed automatically) and TensorBoard logs in
    ``output_dir/tensorboard``; ``fields`` are the config class's own settings."""
    from tunix.sft import peft_trainer

    out = pathlib.Path(output_dir)
    root, opts = checkpointing(out / "checkpoints", every_steps=checkpoint_every)
    return (config_cls or peft_trainer.TrainingConfig)(
        eval_every_n_steps=eval_every, max_steps=max_steps, checkpoint_root_directory=root,
        checkpointing_options=opts, pbar_description=description,
        metrics_logging_options=metrics_logging(out / "tensorboard", run_name=out.name), **fields,
    )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What :func:`run` did: steps before (restored from a checkpoint) and after, and its wall time."""

    resumed_from: int
    steps: int
    seconds: float


def run(
    trainer: Any,
    train_ds: Iterable[Any],
    eval_ds: Iterable[Any] | None = None,
    *,
    mesh: Any = None,
    metrics_file: str | pathlib.Path,
    metric_names: Sequence[str] = ("loss",),
    on_eval: Callable[[], dict[str, float]] | None = None,
    budget_seconds: float | None = None,
) -> RunResult:
    """Train a tunix ``PeftTrainer`` (or subclass) on ``mesh`` until its data, ``max_steps`` or the
    wall-clock budget ends; metrics are appended to ``metrics_file`` (:class:`MetricsFile`).

    The trainer restored its last checkpoint when it was built and skips the batches it already
    trained on, so a rerun continues where the last one stopped.
    """
    from tunixkit import runtime

    resumed_from = trainer.train_steps
    if resumed_from:
        print(f"resuming from the checkpoint at step {resumed_from}")
    trainer.with_training_hooks(MetricsFile(metrics_file, metric_names, on_eval))
    start = time.perf_counter()
    with runtime.mesh_context(mesh) if mesh is not None else contextlib.nullcontext():
        trainer.train(within_budget(train_ds, budget_seconds), eval_ds)
    result = RunResult(resumed_from, trainer.train_steps, time.perf_counter() - start)
    print(
        f"{result.steps} steps ({result.steps - resumed_from} in this run) in {result.seconds:.0f}s"
    )
    return result


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
