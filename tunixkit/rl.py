"""GRPO with tunix's ``RLCluster`` + ``GRPOLearner``: one call that wires them, and the curves
after.

What this module adds to tunix (and nothing more):

- :class:`GRPOSettings`: the knobs a notebook sets, with the flagship defaults (G=4, beta 0.08,
  epsilon 0.2, lr 3e-6 warmup-cosine, clip 0.1, temperature 0.9, top-k 50);
- :func:`build_grpo`: actor, reference and rollout on one mesh, rollouts that stop at
  ``<end_of_turn>`` (Gemma writes on after it otherwise), top-k clamped to the vocabulary,
  checkpoints with automatic resume and TensorBoard logs;
- :func:`curves` / :func:`plot_curves`: reward, per-function reward, KL and completion length per
  step, read from ``metrics.jsonl`` (so they span resumed sessions), as arrays and as a plot;
- :func:`heldout_reward`: sampled completions on held-out questions, scored by the same rewards.

Training itself goes through :func:`tunixkit.training.run`, like every other trainer.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tunixkit import _compat, evaluation, profiling, runlog, training
from tunixkit.rewards import RewardFn

if TYPE_CHECKING:
    from flax import nnx
    from jax.sharding import Mesh
    from matplotlib.figure import Figure
    from tunix.rl import rl_cluster as rl_cluster_lib
    from tunix.rl import trainer as rl_trainer
    from tunix.rl.grpo import grpo_learner
    from tunix.rl.rollout import base_rollout

    from tunixkit.models import LoadedModel
    from tunixkit.tokenizer import Tokenizer

__all__ = [
    "GRPOSettings",
    "HeldOut",
    "RolloutEngineUnavailable",
    "batch_sizes",
    "build_grpo",
    "cluster",
    "check_rollout_engine",
    "curves",
    "heldout_reward",
    "plot_curves",
    "window_mean",
]


@dataclasses.dataclass(frozen=True, kw_only=True)
class GRPOSettings:
    """GRPO hyper-parameters and shapes; defaults are the full-profile ones."""

    num_generations: int = 4  # G: completions per prompt
    beta: float = 0.08  # KL penalty to the reference model (0 = no reference pass)
    epsilon: float = 0.2  # PPO clip range
    num_iterations: int = 1  # policy updates per batch of rollouts
    learning_rate: float = 3e-6  # peak AdamW learning rate
    warmup_ratio: float = 0.1  # share of steps spent warming up
    clip_norm: float = 0.1  # global-norm gradient clipping
    weight_decay: float = 0.1
    temperature: float = 0.9  # rollout sampling
    top_k: int | None = 50
    top_p: float | None = 1.0
    max_prompt_length: int = 256  # prompt tokens (longer ones are cut: evaluation.prompt_fitter)
    max_generation_steps: int = 768  # rollout tokens at most
    batch_size: int = 4  # prompts per step (batch_size * G rollouts)
    mini_batch_size: int | None = None  # prompts per policy update (default: batch_size)
    micro_batch_size: int | None = None  # prompts per forward/backward (memory)
    # prompts per rollout call; None: the whole mini-batch, one sampler call a step. Decode reads
    # every weight for each token whatever the rows, so one call of all rows costs about what one
    # of a few rows costs; a smaller number only saves the rollout's memory (the plan's
    # rollout_prefill/rollout_decode programs)
    rollout_micro_batch_size: int | None = None
    num_steps: int = 3_000  # optimizer steps (the wall-clock budget may stop earlier)
    checkpoint_every: int = 100  # steps between checkpoints (resume restarts from the last)
    keep_checkpoints: int = 2
    seed: int = 42  # rollout sampling seed
    # tunix's GRPOConfig default, "kl" (log pi - log pi_ref on the sampled tokens), has a gradient
    # of zero in expectation: beta then adds noise, not a pull to the reference. "low_var_kl" is the
    # k3 estimator of DeepSeekMath's GRPO (and TRL's): never negative, its gradient pulls to pi_ref.
    kl_loss_mode: str = "low_var_kl"
    # "vanilla" (tunix's sampler), "vllm" or "sglang_jax" (see ENGINES)
    rollout_engine: str = "vanilla"

    @classmethod
    def smoke(cls) -> GRPOSettings:
        """The tiny model's (06's GRPO stage): a high learning rate, no weight decay, short
        prompts and answers, 8 prompts of 8 rollouts a step. 02 and 07 change some of them."""
        return cls(
            learning_rate=2e-3,
            beta=0.04,
            clip_norm=1.0,
            weight_decay=0.0,
            temperature=0.7,
            max_prompt_length=96,
            max_generation_steps=64,
            batch_size=8,
            num_generations=8,
            num_steps=40,
            checkpoint_every=20,
        )

    def sampled(self, config: evaluation.EvalConfig) -> evaluation.EvalConfig:
        """``config`` sampling as the rollouts do (this temperature, top-k and top-p): the
        evaluation of sampled answers, beside the greedy ones."""
        return dataclasses.replace(
            config, temperature=self.temperature, top_k=self.top_k, top_p=self.top_p
        )


# What each rollout engine needs in tunix 0.1.7 (rl_cluster.py:363-482): the module it imports when
# chosen, the pip package, and the model families tunix ships trainer-to-engine weight mappings for.
ENGINES = {
    "vanilla": {"module": None, "package": None, "families": None},
    "vllm": {
        "module": "vllm",
        "package": "vllm-tpu (Python 3.12, TPU only)",
        "families": ("llama3", "qwen2", "qwen3"),
    },
    "sglang_jax": {
        "module": "sgl_jax",
        "package": "sglang-jax (Python 3.12)",
        "families": ("llama3", "qwen2", "qwen3"),
    },
}


class RolloutEngineUnavailable(RuntimeError):
    """The chosen rollout engine cannot run here; the message says why and what to use instead."""


def check_rollout_engine(engine: str, family: str) -> None:
    """Fail early (before any model is loaded) and clearly when ``engine`` cannot serve ``family``.
    Nothing is imported: the engine's package is only looked up.

    >>> check_rollout_engine("vanilla", "gemma3")
    >>> check_rollout_engine("vLLM", "gemma3")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    tunixkit.rl.RolloutEngineUnavailable: unknown rollout engine 'vLLM'; known: vanilla, vllm,
    sglang_jax
    """
    import importlib.util

    if engine not in ENGINES:
        raise RolloutEngineUnavailable(
            f"unknown rollout engine {engine!r}; known: {', '.join(ENGINES)}"
        )
    need = ENGINES[engine]
    if need["module"] and importlib.util.find_spec(need["module"]) is None:
        raise RolloutEngineUnavailable(
            f"ROLLOUT_ENGINE={engine!r} needs the {need['module']!r} module, "
            "which is not installed "
            f"(package {need['package']}); use 'vanilla', tunix's own sampler"
        )
    if need["families"] and family not in need["families"]:
        raise RolloutEngineUnavailable(
            f"ROLLOUT_ENGINE={engine!r}: tunix 0.1.7 ships {engine} weight mappings only for "
            f"{', '.join(need['families'])}, not for {family}; use 'vanilla'"
        )


def rollout_config(
    settings: GRPOSettings,
    *,
    eos_ids: Sequence[int],
    vocab_size: int,
    return_logprobs: bool = False,
    kv_cache_size: int | None = None,
) -> base_rollout.RolloutConfig:
    """tunix ``RolloutConfig``: stops at every id in ``eos_ids``; ``top_k`` clamped to the
    vocabulary. The KV cache holds prompt + generation (multi-turn rollouts pass a larger
    ``kv_cache_size``)."""
    from tunix.rl.rollout import base_rollout

    top_k = None if settings.top_k is None else min(settings.top_k, vocab_size)
    return base_rollout.RolloutConfig(
        max_tokens_to_generate=settings.max_generation_steps,
        max_prompt_length=settings.max_prompt_length,
        kv_cache_size=kv_cache_size
        or settings.max_prompt_length + settings.max_generation_steps + 16,
        temperature=settings.temperature,
        top_k=top_k,
        top_p=settings.top_p,
        eos_tokens=list(eos_ids),
        seed=settings.seed,
        return_logprobs=return_logprobs,
    )


def cluster(
    actor: nnx.Module,
    reference: nnx.Module,
    tokenizer: Tokenizer,
    *,
    mesh: Mesh,
    settings: GRPOSettings,
    output_dir: str | pathlib.Path,
    eos_ids: Sequence[int],
    vocab_size: int,
    family: str = "gemma3",
    schedule_steps: int | None = None,
    perf_config: Any = None,
    **rollout: Any,
) -> rl_cluster_lib.RLCluster:
    """tunix's ``RLCluster`` for ``settings``: actor, reference and rollout on ``mesh``; checkpoints
    in ``output_dir/checkpoints`` (resumed from when the same folder is used again), TensorBoard
    logs in ``output_dir/tensorboard``. ``rollout``: more :func:`rollout_config` options.
    ``schedule_steps``: the steps the learning-rate schedule spans (None: ``settings.num_steps``;
    see :meth:`tunixkit.session.Session.schedule_steps`). ``perf_config``: tunix's
    ``PerfMetricsConfig`` (:meth:`tunixkit.profiling.StepTrace.perf_config`), None: no tracing."""
    from tunix.rl import rl_cluster as rl_cluster_lib

    check_rollout_engine(settings.rollout_engine, family)
    out = pathlib.Path(output_dir)
    ckpt_root, ckpt_opts = training.checkpointing(
        out / "checkpoints", every_steps=settings.checkpoint_every, keep=settings.keep_checkpoints
    )
    training.wake_rl_checkpoints(ckpt_root)  # where tunix restores from
    roles = rl_cluster_lib.Role
    cluster_config = rl_cluster_lib.ClusterConfig(
        role_to_mesh={roles.ACTOR: mesh, roles.REFERENCE: mesh, roles.ROLLOUT: mesh},
        rollout_engine=settings.rollout_engine,
        offload_to_cpu=False,
        training_config=training_config(
            settings,
            schedule_steps=schedule_steps,
            metrics_logging_options=training.metrics_logging(out / "tensorboard", flush_every=10),
            checkpoint_root_directory=ckpt_root,
            checkpointing_options=ckpt_opts,
        ),
        rollout_config=rollout_config(settings, eos_ids=eos_ids, vocab_size=vocab_size, **rollout),
    )
    cluster = rl_cluster_lib.RLCluster(
        actor=actor,
        reference=reference,
        tokenizer=tokenizer,
        cluster_config=cluster_config,
        perf_config=perf_config,
    )
    _compat.split_rollout_batches(cluster)
    return cluster


def training_config(
    settings: GRPOSettings, *, schedule_steps: int | None = None, **more: Any
) -> rl_cluster_lib.RLTrainingConfig:
    """tunix's ``RLTrainingConfig`` for ``settings``: the actor's AdamW (b2 0.99) over the
    schedule's optimizer updates, and the batch sizes (:func:`batch_sizes`). ``schedule_steps``: as
    in :func:`cluster`; ``more``: its other fields (logging, checkpoints). What :func:`cluster`
    trains with and the memory plan compiles."""
    from tunix.rl import rl_cluster as rl_cluster_lib

    mini, micro, per_call = batch_sizes(settings)  # prompts: update, forward/backward, rollout
    return rl_cluster_lib.RLTrainingConfig(
        actor_optimizer=training.optimizer(
            settings.learning_rate,
            # in optimizer updates: each GRPO step updates once per iteration and mini-batch
            (schedule_steps or settings.num_steps) * updates_per_step(settings),
            warmup_ratio=settings.warmup_ratio,
            clip_norm=settings.clip_norm,
            weight_decay=settings.weight_decay,
            b2=0.99,
        ),
        eval_every_n_steps=10**9,
        max_steps=settings.num_steps,
        mini_batch_size=mini,
        train_micro_batch_size=micro,
        rollout_micro_batch_size=per_call,
        compute_logps_micro_batch_size=micro,
        **more,
    )


def algo_config(settings: GRPOSettings, config_class: Any = None, **more: Any) -> Any:
    """tunix's ``GRPOConfig`` for ``settings`` (``config_class``: another learner's, such as the
    agentic one; ``more``: its own fields). What :func:`build_grpo` and
    :func:`tunixkit.agentic.build` train with and the memory plan compiles."""
    from tunix.rl.grpo import grpo_learner

    return (config_class or grpo_learner.GRPOConfig)(
        num_generations=settings.num_generations,
        num_iterations=settings.num_iterations,
        beta=settings.beta,
        epsilon=settings.epsilon,
        kl_loss_mode=settings.kl_loss_mode,
        **more,
    )


def policy_update(
    actor: nnx.Module,
    settings: GRPOSettings,
    *,
    pad_id: int,
    eos_id: int,
    wrap_optimizer: Callable[[Any], Any] | None = None,
) -> rl_trainer.Trainer:
    """The trainer of GRPO's policy update alone: tunix's RL ``Trainer`` over
    :func:`training_config`'s optimizer and the policy loss of :func:`algo_config`, wired as
    ``GRPOLearner`` wires them inside its ``RLCluster`` (the loss at the rollout's temperature), to
    compile the update without a cluster and its rollout engine (:mod:`tunixkit.tools.memplan`).
    ``wrap_optimizer``: applied to the optimizer, gradient accumulation included (the
    ``optax.MultiSteps`` tunix's trainer would add), before the trainer makes its state (the memory
    plan's abstract one)."""
    import optax
    from tunix.rl import function_registry
    from tunix.rl import trainer as rl_trainer

    config = training_config(settings)
    tx, accumulate = config.actor_optimizer, config.gradient_accumulation_steps
    if accumulate is not None:
        tx = optax.MultiSteps(tx, accumulate)
    config.actor_optimizer, config.gradient_accumulation_steps = None, None
    trainer = rl_trainer.Trainer(
        model=actor,
        optimizer=wrap_optimizer(tx) if wrap_optimizer else tx,
        training_config=config,
        custom_checkpoint_metadata_fn=dict,
    )
    config.gradient_accumulation_steps = accumulate
    algo = algo_config(settings)
    algo.temperature = settings.temperature  # GRPOLearner sets it from the rollout config
    loss = function_registry.get_policy_loss_fn(algo.policy_loss_fn)
    trainer.with_loss_fn(
        lambda model, train_example, algo_config: loss(
            model, train_example, algo_config=algo, pad_id=pad_id, eos_id=eos_id
        ),
        has_aux=True,
    )
    trainer.with_gen_model_input_fn(lambda x: {"train_example": x, "algo_config": algo})
    return trainer


def batch_sizes(settings: GRPOSettings) -> tuple[int, int, int]:
    """Prompts per policy update (mini-batch), per forward/backward (micro-batch) and per rollout
    call, as :func:`cluster` gives them to tunix: a rollout call never spans two mini-batches
    (tunix gathers micro-batches for it, and flushes at each mini-batch's end).

    >>> batch_sizes(GRPOSettings(batch_size=4, micro_batch_size=2))
    (4, 2, 4)
    >>> batch_sizes(GRPOSettings(batch_size=4, micro_batch_size=2, rollout_micro_batch_size=2))
    (4, 2, 2)
    """
    mini = settings.mini_batch_size or settings.batch_size
    micro = settings.micro_batch_size or mini
    rollout = settings.rollout_micro_batch_size or mini
    for name, value, whole in (
        ("mini_batch_size", mini, "batch_size"),
        ("micro_batch_size", micro, "batch_size"),
        ("rollout_micro_batch_size", rollout, "the mini-batch"),
    ):
        of = settings.batch_size if whole == "batch_size" else mini
        if of % value:
            raise ValueError(f"GRPOSettings.{name}={value} must divide {whole} ({of})")
    return mini, micro, rollout


def updates_per_step(settings: GRPOSettings) -> int:
    """The actor's optimizer updates in one GRPO step: one per iteration and mini-batch."""
    mini = settings.mini_batch_size or settings.batch_size
    return settings.num_iterations * (settings.batch_size // mini)


def build_grpo(
    actor: nnx.Module,
    reference: nnx.Module,
    tokenizer: Tokenizer,
    *,
    mesh: Mesh,
    settings: GRPOSettings,
    reward_fns: Sequence[RewardFn],
    output_dir: str | pathlib.Path,
    eos_ids: Sequence[int],
    vocab_size: int,
    family: str = "gemma3",
    schedule_steps: int | None = None,
    trace: profiling.StepTrace | None = None,
) -> tuple[grpo_learner.GRPOLearner, rl_cluster_lib.RLCluster]:
    """A ready ``GRPOLearner`` (call ``.train(dataset)``) and its ``RLCluster`` (:func:`cluster`).

    ``actor`` and ``reference`` may share a backbone (LoRA applied on the reference object, see
    :func:`tunixkit.models.apply_lora`). ``schedule_steps``: as in :func:`cluster`. ``trace``:
    where the time of the first steps goes (:class:`tunixkit.profiling.StepTrace`).
    """
    from tunix.rl.grpo import grpo_learner

    rl_cluster = cluster(
        actor,
        reference,
        tokenizer,
        mesh=mesh,
        settings=settings,
        output_dir=output_dir,
        eos_ids=eos_ids,
        vocab_size=vocab_size,
        family=family,
        schedule_steps=schedule_steps,
        perf_config=trace.perf_config() if trace else None,
    )
    if trace:
        trace.attach(rl_cluster)
    algo = algo_config(settings)
    path = pathlib.Path(output_dir) / "rollouts.jsonl"
    fns = [_logging(reward_fns[0], path, rl_cluster), *reward_fns[1:]]
    learner = grpo_learner.GRPOLearner(rl_cluster=rl_cluster, algo_config=algo, reward_fns=fns)
    # optimizer updates per batch of prompts: tunixkit.training.steps_done counts GRPO steps by it
    _compat.set_updates_per_step(learner, updates_per_step(settings))
    return learner, rl_cluster


def _logging(fn: RewardFn, path: pathlib.Path, cluster) -> RewardFn:
    """``fn``, also appending each training step's prompts and one sampled completion to ``path``
    (``rollouts.jsonl``: what the policy wrote, and on which questions, step by step)."""
    import functools
    import json

    @functools.wraps(fn)  # tunix names the metric after the function
    def logged(prompts, completions, **kwargs):
        scores = fn(prompts, completions, **kwargs)
        if str(kwargs.get("mode", "train")).lower().endswith("train"):
            asked = [str(q) for q in kwargs.get("question", prompts)]
            row = {
                "step": cluster.actor_trainer.train_steps + 1,
                "questions": list(dict.fromkeys(asked)),
                "completion": str(completions[0]),
                "score": float(scores[0]),
            }
            with path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        return scores

    return logged


def curves(metrics_file: str | pathlib.Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per-step GRPO metrics as ``{name: (steps, values)}``: ``reward`` (mean summed reward),
    ``reward/<fn>`` for each reward function, ``kl``, ``loss``, ``completion_length``,
    ``learning_rate`` (the actor's, per update), and the ``tool/...`` figures of agentic GRPO."""
    train = runlog.read_metrics(metrics_file).get("train", {})
    names = ("reward", "kl", "loss", "completion_length", "learning_rate")
    return {
        k: v for k, v in sorted(train.items()) if k in names or k.startswith(("reward/", "tool/"))
    }


def window_mean(values: Sequence[float] | np.ndarray, window: int, *, last: bool) -> float:
    """Mean of the first (or last) ``window`` values; NaN when there are none.

    >>> window_mean(np.array([1.0, 2.0, 3.0, 4.0]), 2, last=True)
    3.5
    """
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return float("nan")
    part = values[-window:] if last else values[:window]
    return float(np.mean(part))


def plot_curves(
    series: dict[str, tuple[np.ndarray, np.ndarray]] | str | pathlib.Path,
    path: str | pathlib.Path,
    *,
    smooth: int = 5,
    title: str = "GRPO",
) -> Figure | None:
    """Reward (total and per function), KL, completion length, tool use and the learning rate
    against step (``series``: :func:`curves`' or the metrics file to read them from); saved as PNG.
    None (and no file) when no step has been logged."""
    import matplotlib.pyplot as plt

    if not isinstance(series, dict):
        series = curves(series)

    panels = [
        ("reward", [k for k in series if k.startswith("reward")]),
        ("KL to reference", ["kl"]),
        ("completion tokens", ["completion_length"]),
        ("tool use (share of episodes)", [k for k in series if k.startswith("tool/")]),
        ("learning rate", ["learning_rate"]),
    ]
    # beta = 0 skips the reference pass: the KL is then logged as zeros, which is not worth a panel
    panels = [(t, [k for k in keys if k in series and np.any(series[k][1])]) for t, keys in panels]
    panels = [(t, keys) for t, keys in panels if keys]
    if not panels:
        print("plot_curves: no training step has been logged yet")
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.2), squeeze=False)
    for ax, (panel_title, keys) in zip(axes[0], panels, strict=True):
        for k in keys:
            steps, y = series[k]
            # a schedule is drawn as it is: smoothing would shift it
            w = 1 if k == "learning_rate" else max(1, min(smooth, y.size))
            smoothed = np.convolve(y, np.ones(w) / w, mode="valid")
            (raw,) = ax.plot(steps, y, alpha=0.25, lw=1)
            ax.plot(steps[w - 1 :], smoothed, lw=2, label=k, color=raw.get_color())
        ax.set_title(panel_title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if len(keys) > 1:
            ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    runlog.save_figure(fig, path)
    return fig


@dataclasses.dataclass(frozen=True)
class HeldOut:
    """Held-out rewards of sampled completions (the quantity GRPO optimises, on unseen prompts)."""

    reward: float  # mean summed reward per completion
    accuracy: float  # share of completions with the exact format and the right answer
    format_rate: float
    n: int  # completions scored (questions x samples)


def heldout_reward(
    loaded: LoadedModel,
    records: Sequence[dict[str, str]],
    reward_fns: Sequence[RewardFn],
    config: evaluation.EvalConfig,
    *,
    samples: int = 4,
    name: str = "heldout",
    output_dir: str | pathlib.Path | None = None,
    reuse: bool = False,
    latex: bool = False,
) -> HeldOut:
    """Sample ``samples`` completions per record with ``config`` (its temperature) and score them
    with ``reward_fns``, as GRPO does during training but on held-out questions. The completions
    are stored as ``predictions_<name>.jsonl`` in ``output_dir`` (and read back with ``reuse``).
    ``latex``: MATH-style answers (the accuracy as :func:`tunixkit.evaluation.evaluate` reads
    them)."""
    result = evaluation.evaluate(
        loaded,
        list(records) * samples,
        name=name,
        config=config,
        output_dir=output_dir,
        progress=False,
        reuse=reuse,
        latex=latex,
    )
    comps = [p["completion"] for p in result.predictions]
    gold = [p["gold"] for p in result.predictions]
    prompts = [loaded.chat.prompt(p["question"], config.system_prompt) for p in result.predictions]
    total = np.sum([fn(prompts, comps, answer=gold) for fn in reward_fns], axis=0)
    return HeldOut(float(np.mean(total)), result.accuracy, result.format_rate, result.n)
