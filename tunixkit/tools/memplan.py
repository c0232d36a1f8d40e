"""Memory plan: does a recipe fit the chip, before a 9-hour session is spent finding out?

Each step program tunix runs for a recipe is *compiled* at the real model shape with abstract
weights (``jax.ShapeDtypeStruct``, never allocated) on the recipe's mesh, and XLA's
``memory_analysis()`` gives its per-device bytes: SFT update; DPO reference log-probs and update;
distillation teacher forward and update; GRPO rollout (prefill, decode), reference log-probs and
update. The trainers are tunix's own, built on abstract state; their jitted steps are lowered.
Persistent state that a program does not take as an argument (the optimizer state during a
rollout, the reference's backbone) is added from the sharded abstract state.

tunix skips its activation-sharding constraints when the platform is CPU
(``tunix/utils/sharding_utils.py:40``; the copies in ``tunix/models/gemma/model.py:217`` and in
tunix's Llama3, Qwen2 and Qwen3 modules):
:func:`sharding_constraints` restores them for the compile, so emulated CPU devices plan what a TPU
mesh runs. On a TPU/GPU host the programs compile for the real chips (a notebook's model cell);
on CPU (the command line, CI) for N emulated devices, whose numbers are upper bounds: the CPU
compiler upcasts bf16 and fuses less (gemma-3-1b SFT step 16x512: 13.0 GiB on CPU vs 5.4 on a
TPU v5e ahead-of-time compile, see ``bench/results/memplan.json``).

    python -m tunixkit.tools.memplan sft --model gemma-3-1b-it --devices 8 --chip v5e
    python -m tunixkit.tools.memplan pipeline   # notebook 06: every stage, the judge resident
    python -m tunixkit.tools.memplan agentic    # notebook 07: the warm start and agentic GRPO

Notebook 06 runs four stages on one mesh with its judge model resident throughout:
:func:`plan_stages` plans each stage as the kind it trains (SFT, SFT, preference, GRPO) with the
judge's weights counted in every step and the judge's own scoring pass planned beside GRPO's
state (``judge_score``), and :func:`check_stages` stops the notebook before the weights load.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import resource
import sys
import time
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tunixkit import (
    _compat,
    agentic,
    distill,
    families,
    judging,
    models,
    pipeline,
    preferences,
    recipes,
    rl,
    runtime,
    training,
)
from tunixkit.recipes._base import _override

__all__ = [
    "DoesNotFit",
    "Plan",
    "StepReport",
    "check",
    "check_stages",
    "plan_stages",
    "chip_of",
    "plan",
    "sharding_constraints",
    "tpu_slice_mesh",
]

GIB = 2**30
CHIPS = {
    "v5e": 16 * GIB,
    "v6e": 32 * GIB,
    "v2": 8 * GIB,
    "v3": 8 * GIB,
    "h100": 80 * GIB,
    "h200": 141 * GIB,
}
KINDS = ("sft", "dpo", "distill", "grpo")
PAD_ID, EOS_ID = 0, 1  # any ids give the same programs
HEADROOM = 0.9  # XLA plans buffers statically; keep 10% for fragmentation and the runtime
KNOBS = {  # what to turn down when a recipe does not fit, by recipe kind
    "sft": "a smaller batch_size or max_len, QLORA = True, or a lower LORA_RANK",
    "dpo": "a smaller batch_size or max_response_length, or a lower LORA_RANK",
    "distill": "a smaller batch_size or max_len (the [batch, len, vocab] logits dominate)",
    "grpo": (
        "a smaller micro_batch_size (rows = micro x G), rollout_micro_batch_size (the rollout's "
        "rows = it x G) or max_generation_steps, or NUM_GENERATIONS"
    ),
}


@dataclasses.dataclass
class StepReport:
    """Per-device bytes of one compiled program, and what compiling it cost."""

    name: str
    shapes: str
    argument: int
    output: int
    temp: int
    alias: int  # donated argument bytes the outputs reuse
    code: int  # generated code (lives in device memory on TPU)
    resident_other: int  # persistent state in memory that is not an argument of this program
    compile_s: float

    @property
    def peak(self) -> int:
        return (
            self.argument + self.output + self.temp + self.code - self.alias + self.resident_other
        )


class DoesNotFit(RuntimeError):
    """The memory plan says the recipe does not fit the chip: raised before any weights load."""


@dataclasses.dataclass
class Plan:
    """The steps of one recipe on one chip: :meth:`verdict` says whether it fits and what to try."""

    kind: str
    model_id: str
    chip: str
    devices: int
    platform: str
    persistent: dict[str, int]  # per-device bytes of each piece of persistent state
    steps: list[StepReport]
    stage: str = ""  # the notebook stage this plan is for (see plan_stages)
    notebook: str = ""  # the notebook whose stage it is: "06" or "07"
    device_kind: str = ""  # the device the steps were compiled for ("NVIDIA H200", "cpu", ...)

    @property
    def peak(self) -> int:
        return max(s.peak for s in self.steps)

    @property
    def spare(self) -> float:
        """GiB per device left under the chip's memory (less 10% headroom); negative: short."""
        return (HEADROOM * CHIPS[self.chip] - self.peak) / GIB

    @property
    def worst(self) -> str:
        """The step at the peak."""
        return max(self.steps, key=lambda s: s.peak).name

    @property
    def knobs(self) -> str:
        """The recipe fields to turn down, for the step at the peak."""
        if self.worst == "judge_score":
            return JUDGE_KNOBS
        return _stage_knobs(self.notebook).get(self.stage) or KNOBS[self.kind]

    def verdict(self) -> str:
        worst = self.worst
        what = f"stage {self.stage} ({self.kind})" if self.stage else self.kind
        knobs = self.knobs
        bound = " (CPU compile: an upper bound)" if self.platform == "cpu" else ""
        if self.spare >= 0:
            return (
                f"{what} on {self.model_id}: fits a {self.chip} chip with {self.spare:.1f} GiB "
                f"to spare (peak {self.peak / GIB:.1f} GiB in {worst}){bound}"
            )
        if self.platform == "cpu":
            return (
                f"{what} on {self.model_id}: the CPU upper bound, {self.peak / GIB:.1f} GiB in "
                f"{worst}, exceeds a {self.chip} chip by {-self.spare:.1f} GiB; TPU compiles "
                "typically need ~2.4x less (plan it for the TPU: --topology v5e:2x4 compiles for "
                "one here with libtpu, and the notebooks' model cell plans on the chip). If it "
                f"does not fit there, try {knobs}"
            )
        return (
            f"{what} on {self.model_id}: does not fit a {self.chip} chip: "
            f"{self.peak / GIB:.1f} GiB in "
            f"{worst}, {-self.spare:.1f} GiB too many; try {knobs}"
        )

    def table(self) -> str:
        rows = [
            "| step | shapes | peak GiB/device | temp | arguments | other resident | compile s |",
            "|---|---|---|---|---|---|---|",
        ]
        rows += [
            f"| {s.name} | {s.shapes} | **{s.peak / GIB:.2f}** | {s.temp / GIB:.2f} | "
            f"{s.argument / GIB:.2f} | {s.resident_other / GIB:.2f} | {s.compile_s:.0f} |"
            for s in self.steps
        ]
        return "\n".join([self.verdict(), *rows])

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for s, sd in zip(self.steps, d["steps"], strict=True):
            sd["peak"] = s.peak
        return d | {"peak": self.peak, "spare_gib": self.spare, "verdict": self.verdict()}


def _mesh_and_shard(x, spec):
    """tunix's ``sharding_utils.shard`` without its CPU shortcut."""
    import jax
    from jax.interpreters import pxla

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        mesh = pxla.thread_resources.env.physical_mesh
    if mesh.empty:
        return jax.numpy.asarray(x)
    return jax.lax.with_sharding_constraint(
        x, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*spec))
    )


@contextlib.contextmanager
def sharding_constraints(mesh) -> Iterator[None]:
    """Enter ``mesh`` as tunix reads it (the legacy ``with mesh:``) with tunix's activation-sharding
    helpers applying their constraints even though the platform is CPU; all restored on exit."""
    import importlib

    patched = []
    for name in (  # each model module with a shard() of its own that skips CPU
        "tunix.utils.sharding_utils",
        "tunix.models.gemma.model",
        "tunix.models.llama3.model",
        "tunix.models.qwen2.model",
        "tunix.models.qwen3.model",
    ):
        mod = importlib.import_module(name)
        patched.append((mod, mod.shard))
        mod.shard = lambda x, s, eager=False: _mesh_and_shard(x, s)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        mesh.__enter__()
    try:
        yield
    finally:
        mesh.__exit__(None, None, None)
        for mod, fn in patched:
            mod.shard = fn


def _config(model_id: str, layers: int | None):
    """(family, tunix config) of a released model id, optionally cut to ``layers``."""
    spec = models.get_spec(model_id)
    if spec.preset is None:
        cfg = runtime.smoke_kit().config(model_id)
    else:
        cfg = getattr(families.get(spec.family).config_cls(), spec.preset)()
    if layers is not None:
        cfg = dataclasses.replace(cfg, num_layers=layers)
        if hasattr(cfg, "attention_types"):
            cfg = dataclasses.replace(cfg, attention_types=tuple(cfg.attention_types)[:layers])
    return spec.family, cfg


def _abstract(model_id: str, layers: int | None, mesh):
    """The model with bf16 ShapeDtypeStruct weights placed on ``mesh`` (nothing allocated)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    family, cfg = _config(model_id, layers)
    model = nnx.eval_shape(lambda: families.get(family).model_cls()(cfg, rngs=nnx.Rngs(0)))

    def floats(a):  # tunixkit loads the weights in bfloat16
        return (
            jax.ShapeDtypeStruct(a.shape, jnp.bfloat16)
            if jnp.issubdtype(a.dtype, jnp.floating)
            else a
        )

    nnx.update(model, jax.tree.map(floats, nnx.state(model)))
    _place(model, mesh)
    return model, family, cfg


def _place(obj, mesh) -> None:
    """Give every abstract variable the sharding ``models.shard`` would give the real one."""
    import jax
    from flax import nnx

    state = nnx.state(obj)
    place = lambda a, s: jax.ShapeDtypeStruct(  # noqa: E731
        a.shape, a.dtype, sharding=models.fit_sharding(a, s)
    )
    nnx.update(obj, jax.tree.map(place, state, nnx.get_named_sharding(state, mesh)))


def _lora(
    model,
    mesh,
    *,
    family: str,
    rank: int,
    alpha: float | None,
    qlora: bool = False,
    modules: str | None = None,
):
    """qwix LoRA (QLoRA) under ``nnx.eval_shape``, as ``models.apply_lora`` adds it."""
    import qwix
    from flax import nnx

    provider = models.lora_provider(
        model.config, family=family, rank=rank, alpha=alpha, modules=modules, qlora=qlora
    )
    lora = nnx.eval_shape(
        lambda m: qwix.apply_lora_to_model(
            m, provider, rngs=nnx.Rngs(params=0), **m.get_model_input()
        ),
        model,
    )
    _place(lora, mesh)
    return lora


def _abstract_optimizer(tx):
    """``tx`` whose ``init`` returns ShapeDtypeStructs (the trainer builds abstract state)."""
    import jax
    import optax

    return optax.GradientTransformation(lambda params: jax.eval_shape(tx.init, params), tx.update)


def _bytes(tree) -> int:
    import jax
    import numpy as np

    return sum(
        int(np.prod(x.sharding.shard_shape(x.shape) if getattr(x, "sharding", None) else x.shape))
        * jax.dtypes.itemsize_bits(x.dtype)
        // 8
        for x in jax.tree.leaves(tree)
    )


def _state(obj, *filters) -> int:
    from flax import nnx

    return _bytes(nnx.state(obj, *filters))


def _batch(mesh, shape, dtype, *, sharded: bool = True):
    """A batch leaf as tunix's ``shard_input`` places it, or unsharded (an uncommitted array)."""
    import jax
    import numpy as np
    from tunix.sft import sharding_utils

    if not sharded:
        return jax.ShapeDtypeStruct(tuple(shape), dtype)
    probe = np.broadcast_to(np.zeros((), np.dtype(dtype)), tuple(shape))  # a view: no memory
    s = sharding_utils.get_sharding(probe, mesh=mesh, pspec=jax.sharding.PartitionSpec("fsdp"))
    return jax.ShapeDtypeStruct(tuple(shape), dtype, sharding=s)


def _compile(
    name: str, shapes: str, lower: Callable[[], Any], resident_other: int, verbose: bool
) -> StepReport:
    t0 = time.perf_counter()
    m = lower().compile().memory_analysis()
    r = StepReport(
        name,
        shapes,
        m.argument_size_in_bytes,
        m.output_size_in_bytes,
        m.temp_size_in_bytes,
        m.alias_size_in_bytes,
        m.generated_code_size_in_bytes,
        resident_other,
        time.perf_counter() - t0,
    )
    if verbose:
        print(
            f"  {name} [{shapes}]: {r.peak / GIB:.2f} GiB/device, compiled in {r.compile_s:.0f}s",
            flush=True,
        )
    return r


def _train_step(trainer):
    """The trainer's own jitted step (``PeftTrainer.jit_train_and_eval_step``) with model and
    optimizer bound; its ``_shard_optimizer`` is skipped (the abstract state is placed already)."""
    trainer._shard_optimizer = lambda mesh: None
    step, _ = trainer.jit_train_and_eval_step(cache_nnx_graph=False)
    return lambda *inputs: step.func.lower(*step.args, *inputs)


def _others(persistent: dict[str, int], *args: str) -> int:
    return sum(v for k, v in persistent.items() if k not in args)


def _lora_pieces(model, optimizer) -> dict[str, int]:
    from flax import nnx

    lora = _state(model, nnx.LoRAParam)
    return {"backbone": _state(model) - lora, "lora": lora, "optimizer": _state(optimizer)}


def _sft(rec, mesh, model_id, layers, verbose, jnp):
    from tunix.sft import peft_trainer

    base, family, _ = _abstract(model_id, layers, mesh)
    model = _lora(
        base, mesh, family=family, rank=rec.lora_rank, alpha=rec.lora_alpha, qlora=rec.qlora
    )
    config = peft_trainer.TrainingConfig(eval_every_n_steps=rec.eval_every, max_steps=rec.steps)
    tx = _abstract_optimizer(training.optimizer(rec.learning_rate, rec.steps))
    trainer = training.sft_trainer(model, tx, config, pad_id=PAD_ID)
    _place(trainer.optimizer, mesh)
    persistent = _lora_pieces(trainer.model, trainer.optimizer)
    b, n = rec.batch_size, rec.max_len
    x = peft_trainer.TrainingInput(
        input_tokens=_batch(mesh, (b, n), jnp.int32), input_mask=_batch(mesh, (b, n), jnp.int32)
    )
    lower = _train_step(trainer)
    kind = f"{'QLoRA' if rec.qlora else 'LoRA'} r{rec.lora_rank}"
    return persistent, [_compile("sft_update", f"{b}x{n} {kind}", lambda: lower(x), 0, verbose)]


def _dpo(rec, mesh, model_id, layers, verbose, jnp):
    from tunix.sft.dpo import dpo_trainer

    reference, family, _ = _abstract(model_id, layers, mesh)
    actor = _lora(reference, mesh, family=family, rank=rec.lora_rank, alpha=rec.lora_alpha)
    trainer = preferences.trainer(rec, actor, reference, wrap_optimizer=_abstract_optimizer)
    _place(trainer.optimizer, mesh)
    persistent = _lora_pieces(trainer.model, trainer.optimizer)
    if (
        rec.algorithm == "dpo"
    ):  # after one step the actor's backbone is a separate buffer (see README)
        persistent["reference"] = _state(reference)
    b2, p, r = 2 * rec.batch_size, rec.max_prompt_length, rec.max_response_length
    n, reports = p + r, []
    if rec.algorithm == "dpo":  # DPOTrainer._prepare_inputs: on the batch before it is sharded
        raw = lambda shape, dt: _batch(mesh, shape, dt, sharded=False)  # noqa: E731
        args = (
            raw((b2, n), jnp.int32),
            raw((b2, n), jnp.int32),
            raw((b2, n, n), jnp.bool_),
            r,
            raw((b2, r), jnp.int32),
        )
        reports.append(
            _compile(
                "reference_logps",
                f"{b2}x({p}+{r})",
                lambda: dpo_trainer.compute_logps.lower(reference, *args),
                _others(persistent, "reference"),
                verbose,
            )
        )
    ref = (
        (lambda: _batch(mesh, (b2 // 2,), jnp.float32))
        if rec.algorithm == "dpo"
        else (lambda: None)
    )
    ex = dpo_trainer.TrainExample(
        input_ids=_batch(mesh, (b2, n), jnp.int32),
        positions=_batch(mesh, (b2, n), jnp.int32),
        attention_mask=_batch(mesh, (b2, n, n), jnp.bool_),
        ref_chosen_logps=ref(),
        ref_rejected_logps=ref(),
        completion_mask=_batch(mesh, (b2, r), jnp.int32),
        logits_to_keep=r,
    )
    lower = _train_step(trainer)
    reports.append(
        _compile(
            f"{rec.algorithm}_update",
            f"{b2}x({p}+{r}) LoRA r{rec.lora_rank}",
            lambda: lower(ex),
            _others(persistent, "backbone", "lora", "optimizer"),
            verbose,
        )
    )
    return persistent, reports


def _distill(rec, mesh, model_id, layers, verbose, jnp):
    from flax import nnx
    from tunix.distillation import distillation_trainer as dt

    teacher, _, tcfg = _abstract(rec.teacher_id, layers, mesh)
    student, _, _ = _abstract(model_id, layers, mesh)
    config = dt.TrainingConfig(eval_every_n_steps=rec.eval_every, max_steps=rec.steps)
    strategy = distill.strategy(
        families.vocab_size(tcfg), temperature=rec.temperature, alpha=rec.alpha
    )
    tx = _abstract_optimizer(training.optimizer(rec.learning_rate, rec.steps))
    trainer = distill.trainer(student, teacher, strategy, tx, config, pad_id=PAD_ID)
    _place(trainer.optimizer, mesh)
    persistent = {
        "teacher": _state(teacher),
        "student": _state(trainer.model),
        "optimizer": _state(trainer.optimizer),
    }
    b, n = rec.batch_size, rec.max_len
    toks, mask = _batch(mesh, (b, n), jnp.int32), _batch(mesh, (b, n), jnp.int32)

    def teacher_forward(t, x):  # DistillationTrainer._prepare_inputs runs this (op by op in tunix)
        return trainer.strategy.get_teacher_outputs(t, trainer.gen_model_input_fn(x)["inputs"])

    x = dt.TrainingInput(input_tokens=toks, input_mask=mask)
    reports = [
        _compile(
            "teacher_forward",
            f"{b}x{n}",
            lambda: nnx.jit(teacher_forward).lower(teacher, x),
            _others(persistent, "teacher"),
            verbose,
        )
    ]
    x = dt.TrainingInput(
        input_tokens=toks,
        input_mask=mask,
        teacher_output=_batch(mesh, (b, n - 1, families.vocab_size(tcfg)), jnp.bfloat16),
    )
    lower = _train_step(trainer)
    reports.append(
        _compile(
            "distill_update",
            f"{b}x{n} full fine-tuning",
            lambda: lower(x),
            _others(persistent, "student", "optimizer"),
            verbose,
        )
    )
    return persistent, reports


class _Tokenizer:  # what tunix's tokenizer adapter asks for; the compiled programs never call it
    def encode(self, text, **kw):
        return [2]

    def decode(self, ids, **kw):
        return ""

    def bos_id(self):
        return 2

    def eos_id(self):
        return EOS_ID

    def pad_id(self):
        return PAD_ID


def _sampler(
    model, cfg, rows, prompt, steps, cache_size, *, eos, logprobs=False, last=True, **sampling
):
    """A tunix ``Sampler`` over ``model`` and the state its prefill and decode take: ``rows``
    prompts of ``prompt`` tokens, ``steps`` new ones, a ``cache_size`` cache; ``sampling``:
    temperature, top_p, top_k. ``last``: its prefill projects the last prompt position only, as
    the RL cluster's rollouts do (``_compat.prefill_last_position``); else tunix's own."""
    import jax
    import jax.numpy as jnp
    from tunix.generate import sampler as sampler_lib

    cache = sampler_lib.CacheConfig(
        cache_size=cache_size,
        num_layers=cfg.num_layers,
        num_kv_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim,
    )
    sampler = sampler_lib.Sampler(model, _Tokenizer(), cache)
    if last:
        _compat.prefill_last_position(sampler)
    sampler.eos_ids = jnp.array(eos)
    state = jax.eval_shape(  # Sampler.__call__ builds this state eagerly, unsharded
        lambda ids, seed: sampler.init_sample_state(
            ids,
            total_sampling_steps=prompt + steps,
            include_logits=False,
            forbidden_token_ids=None,
            seed=seed,
            beam_size=None,
            include_logprobs=logprobs,
            **sampling,
        ),
        jax.ShapeDtypeStruct((rows, prompt), jnp.int32),
        jax.ShapeDtypeStruct((2,), jnp.uint32),
    ).replace(num_input_tokens=jnp.array(prompt, dtype=jnp.int32))
    return sampler, state


def _judge_score(judge, mesh, resident_other: int, verbose: bool) -> StepReport:
    """The judge's scoring pass as ``judging.llm_grader`` runs it: one forward pass of its batch of
    rubric prompts at the prompt limit (``judging.JUDGE_BATCH`` x ``judging.JUDGE_PROMPT_LENGTH``,
    rows split over the mesh as ``evaluation.ChoiceScorer`` places them), the score digits' logits
    read at the last position only (``_compat.choice_logprobs``), with ``resident_other`` bytes
    held beside it. Compiled as the grader runs it: outside ``with mesh:``."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    rows, length = judging.JUDGE_BATCH, judging.JUDGE_PROMPT_LENGTH
    state = nnx.state(judge)
    ids, mask = _compat.split_rows(
        (
            jax.ShapeDtypeStruct((rows, length), jnp.int32),
            jax.ShapeDtypeStruct((rows, length), jnp.bool_),
        ),
        mesh,
    )
    choices = jax.ShapeDtypeStruct((len(judging.SCORE_DIGITS),), jnp.int32)
    fn = _compat.choice_logprobs(judge)
    return _compile(
        "judge_score",
        f"{rows} rows, prompt {length}",
        lambda: fn.lower(state, ids, mask, choices),
        resident_other,
        verbose,
    )


def _grpo(rec, mesh, model_id, layers, verbose, jnp):
    from flax import nnx
    from tunix.rl import common
    from tunix.rl.grpo import grpo_learner

    s = rec.grpo
    reference, family, cfg = _abstract(model_id, layers, mesh)
    actor = _lora(
        reference,
        mesh,
        family=family,
        rank=rec.lora_rank,
        alpha=rec.lora_alpha,
        qlora=rec.qlora,
        modules=rec.lora_modules,
    )
    mini, micro, rollout = rl.batch_sizes(s)
    rows = micro * s.num_generations  # reference and update micro-batches: micro prompts x G
    rollout_rows = rollout * s.num_generations  # a rollout call: its prompts x G
    trainer = rl.policy_update(
        actor, s, pad_id=PAD_ID, eos_id=EOS_ID, wrap_optimizer=_abstract_optimizer
    )
    _place(trainer.optimizer, mesh)
    persistent = _lora_pieces(trainer.model, trainer.optimizer)
    if s.beta:  # after one step the actor's backbone is a separate buffer (see README)
        persistent["reference"] = _state(reference)
    p, t = s.max_prompt_length, s.max_generation_steps
    # A multi-turn episode (07) samples each turn from the conversation so far: its prompt grows
    # to the first prompt plus the episode's tokens, in a cache sized as agentic.build sizes it.
    turn = getattr(rec, "turn_prompt_length", p)
    rc = rl.rollout_config(
        s,
        eos_ids=[EOS_ID],
        vocab_size=families.vocab_size(cfg),
        kv_cache_size=getattr(rec, "kv_cache_size", None),
    )
    sampler, state = _sampler(
        actor,
        cfg,
        rollout_rows,
        turn,
        t,
        rc.kv_cache_size,
        eos=rc.eos_tokens,
        temperature=rc.temperature,
        top_p=rc.top_p,
        top_k=rc.top_k,
        logprobs=rc.return_logprobs,
    )
    params, shapes = (
        sampler._flattened_transformer_state,
        f"{rollout_rows} rows, prompt {turn}, cache {rc.kv_cache_size}",
    )
    during_rollout = _others(persistent, "backbone", "lora")
    reports = [
        _compile(
            "rollout_prefill",
            shapes,
            lambda: sampler._compiled_prefill_fn.lower(params, state, None, echo=False),
            during_rollout,
            verbose,
        ),
        _compile(
            "rollout_decode",
            f"{shapes}, {t} steps",
            lambda: sampler._compiled_decode_fn.lower(params, state),
            during_rollout,
            verbose,
        ),
    ]
    if s.beta:
        graph, ref_state = nnx.split(reference)
        prompt, completion = _batch(mesh, (rows, p), jnp.int32), _batch(mesh, (rows, t), jnp.int32)
        reports.append(
            _compile(
                "reference_logps",
                f"{rows}x({p}+{t})",
                lambda: common.compute_per_token_logps.lower(
                    graph,
                    ref_state,
                    prompt,
                    completion,
                    pad_id=PAD_ID,
                    eos_id=EOS_ID,
                    stop_gradient=True,
                    return_logits=False,
                    temperature=s.temperature,
                ),
                _others(persistent, "reference"),
                verbose,
            )
        )
    ex = grpo_learner.TrainExample(
        prompt_ids=_batch(mesh, (rows, p), jnp.int32),
        prompt_mask=_batch(mesh, (rows, p), jnp.bool_),
        completion_ids=_batch(mesh, (rows, t), jnp.int32),
        completion_mask=_batch(mesh, (rows, t), jnp.bool_),
        advantages=_batch(mesh, (rows,), jnp.float32),
        old_per_token_logps=None,
        ref_per_token_logps=_batch(mesh, (rows, t), jnp.float32) if s.beta else None,
    )
    lower = _train_step(trainer)
    reports.append(
        _compile(
            "grpo_update",
            f"{rows}x({p}+{t}) LoRA r{rec.lora_rank}, grad-acc {mini // micro}",
            lambda: lower(ex),
            _others(persistent, "backbone", "lora", "optimizer"),
            verbose,
        )
    )
    return persistent, reports


_PLANNERS = {"sft": _sft, "dpo": _dpo, "distill": _distill, "grpo": _grpo}


_RECIPES = {
    "sft": "SFT",
    "dpo": "DPO",
    "distill": "Distill",
    "grpo": "GRPO",
}  # recipe class by kind


def plan(
    kind: str,
    recipe: Any = None,
    *,
    model_id: str | None = None,
    mesh=None,
    devices: int | None = None,
    chip: str = "v5e",
    layers: int | None = None,
    verbose: bool = True,
) -> Plan:
    """Compile ``kind``'s step programs ("sft", "dpo", "distill", "grpo") for ``recipe`` (default:
    the full profile's) and report per-device bytes against ``chip`` (see :data:`CHIPS`).

    ``model_id`` replaces the recipe's model (the student for "distill"); ``mesh`` is the real one
    (a notebook), else ``devices`` emulated CPU devices ``(fsdp, tp) = (devices, 1)`` (set
    ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` before JAX starts); ``layers`` cuts the
    depth (reduced shapes for tests).
    """
    import jax.numpy as jnp

    if kind not in KINDS:
        raise ValueError(f"unknown recipe kind {kind!r}; known: {', '.join(KINDS)}")
    if chip not in CHIPS:
        raise ValueError(
            f"unknown chip {chip!r}; "
            f"known: {', '.join(f'{c} ({b // GIB} GiB)' for c, b in CHIPS.items())}"
        )
    rec = recipe or getattr(recipes, _RECIPES[kind]).full()
    model_id = model_id or getattr(rec, "student_id", None) or rec.model_id
    models.get_spec(model_id)  # an unknown id names the known ones
    if kind == "sft" and not rec.lora_rank:
        raise NotImplementedError(
            "the sft plan covers LoRA and QLoRA recipes, not full fine-tuning"
        )
    if kind in ("dpo", "grpo") and not rec.lora_rank:
        raise NotImplementedError(
            f"the {kind} plan covers LoRA recipes (full fine-tuning holds a second copy)"
        )
    mesh = mesh or runtime.make_mesh((devices, 1)) if devices else mesh or runtime.make_mesh()
    platform = mesh.devices.flat[0].platform
    if verbose:
        print(
            f"memory plan: {kind} on {model_id}, {mesh.devices.size} {platform} devices, "
            f"against {chip}",
            flush=True,
        )
    with sharding_constraints(mesh):
        persistent, steps = _PLANNERS[kind](rec, mesh, model_id, layers, verbose, jnp)
    device = mesh.devices.flat[0]
    return Plan(
        kind,
        model_id,
        chip,
        int(mesh.devices.size),
        platform,
        persistent,
        steps,
        device_kind=getattr(device, "device_kind", platform),
    )


_KINDS_OF_DEVICE = (
    ("v5 lite", "v5e"),
    ("v5e", "v5e"),
    ("v6 lite", "v6e"),
    ("v6e", "v6e"),
    ("v2", "v2"),
    ("v3", "v3"),
    ("h100", "h100"),
    ("h200", "h200"),
)


# libtpu's compile-only client: a TPU slice's devices without a TPU (jax's `tpu` extra, no TPU VM)
_COMPILE_ONLY_ENV = {
    "TPU_SKIP_MDS_QUERY": "1",
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",  # several plans at once (--jobs)
    "TPU_WORKER_ID": "0",
    "TPU_WORKER_HOSTNAMES": "localhost",
}
_ACCELERATOR_TYPE = {"v5e": "v5litepod", "v6e": "v6e"}  # libtpu's name, "<type>-<chips>"


# chips a host of a slice holds: a slice of up to 8 chips is one host (v5e-8, v6e-8); larger ones
# (v5e-16 and up, v6e-16 and up) are hosts of 2x2 chips, one Python process each
_ONE_HOST_CHIPS, _POD_HOST = 8, (2, 2)


def tpu_slice_mesh(topology: str = "v5e:2x4"):
    """A ``(fsdp, tp) = (chips, 1)`` mesh of a TPU slice's devices for compiling only, on any host
    (no TPU attached): ``"v5e:2x4"`` is Kaggle's v5e-8, ``"v5e:1x1"`` Colab's one chip,
    ``"v5e:4x4"`` a v5e-16 (4 hosts of 4 chips: the devices of processes 0-3, as the run of
    :mod:`tunixkit.hosts` sees them). The plan then compiles with the TPU's own compiler. Needs
    libtpu (``pip install 'libtpu==0.0.42.*'``, the version jax 0.10.2's ``tpu`` extra names;
    ~200 MB) and ``JAX_PLATFORMS=cpu`` set before JAX starts; :func:`main`'s ``--topology`` does
    both settings."""
    from jax.experimental import topologies

    for key, value in _COMPILE_ONLY_ENV.items():
        os.environ.setdefault(key, value)
    name, _, shape = topology.partition(":")
    dims = [int(d) for d in shape.split("x")] if shape else []
    if name not in _ACCELERATOR_TYPE or len(dims) != 2:
        raise ValueError(
            f"topology {topology!r}: expected '<chip>:<x>x<y>' with chip in "
            f"{', '.join(_ACCELERATOR_TYPE)}, e.g. 'v5e:2x4' (a v5e-8)"
        )
    os.environ.setdefault("TPU_ACCELERATOR_TYPE", f"{_ACCELERATOR_TYPE[name]}-{dims[0] * dims[1]}")
    per_host = tuple(dims) if dims[0] * dims[1] <= _ONE_HOST_CHIPS else _POD_HOST
    try:
        desc = topologies.get_topology_desc(
            platform="tpu", topology_name=topology, chips_per_host_bounds=(*per_host, 1)
        )
    except Exception as e:  # no libtpu, or one that does not know the topology
        raise RuntimeError(
            f"no compile-only TPU devices for {topology!r} ({type(e).__name__}: {e}); install "
            "libtpu for this jax (jax 0.10.2: pip install 'libtpu==0.0.42.*') and set "
            "JAX_PLATFORMS=cpu before JAX starts"
        ) from e
    return runtime.make_mesh((len(desc.devices), 1), devices=desc.devices)


def chip_of(device_kind: str) -> str | None:
    """The :data:`CHIPS` entry for a JAX ``device_kind``, or None for one the plan does not know.

    >>> chip_of("TPU v5 lite"), chip_of("NVIDIA H100 80GB HBM3"), chip_of("cpu")
    ('v5e', 'h100', None)
    """
    kind = device_kind.lower()
    return next((chip for key, chip in _KINDS_OF_DEVICE if key in kind), None)


def _chip_or_skip(mesh, command: str) -> str | None:
    """The chip of ``mesh`` to plan for; None (said, with the ``command`` that plans on emulated
    devices instead) on CPU or an unknown chip."""
    device = mesh.devices.flat[0]
    chip = chip_of(getattr(device, "device_kind", ""))
    if device.platform == "cpu" or chip is None:
        print(
            f"memory plan: skipped on {device.platform} ({getattr(device, 'device_kind', '?')}); "
            f"`python -m tunixkit.tools.memplan {command}` plans "
            f"{'the stages' if command in ('pipeline', 'agentic') else 'a full recipe'} "
            "on emulated devices"
        )
    return None if device.platform == "cpu" else chip


def _stops(stop: bool | None) -> bool:
    """Whether a plan that does not fit stops the notebook (``$TUNIXKIT_MEMPLAN=warn``: it
    prints)."""
    return os.environ.get("TUNIXKIT_MEMPLAN", "stop") != "warn" if stop is None else stop


_TRY_ANYWAY = (
    "Stopped before loading the weights; to try anyway set TUNIXKIT_MEMPLAN=warn (os.environ in "
    "the first cell)."
)


def check(
    kind: str, recipe: Any, mesh, *, model_id: str | None = None, stop: bool | None = None
) -> Plan | None:
    """A notebook's model cell, before any weights are read: on a TPU/GPU mesh, plan ``recipe``'s
    steps for the chip found and print the verdict (it compiles each step once, on abstract
    weights); on CPU (the smoke profile) or an unknown chip, say so and return None.

    A plan that does not fit raises :class:`DoesNotFit` naming the knobs to turn, before the session
    is spent on loading and evaluating (``stop=False``, or ``$TUNIXKIT_MEMPLAN=warn``, only
    prints)."""
    chip = _chip_or_skip(mesh, f"{kind} --model <id>")
    if chip is None:
        return None
    try:
        found = plan(kind, recipe, model_id=model_id, mesh=mesh, chip=chip)
    except NotImplementedError as e:  # e.g. full fine-tuning in GRPO/DPO: not planned, not an error
        print(f"memory plan: {e}")
        return None
    print(found.table())
    if _stops(stop) and found.spare < 0:
        raise DoesNotFit(f"{found.verdict()}. {_TRY_ANYWAY}")
    return found


STAGE_KNOBS = {  # notebook 06's recipe fields to turn down, by stage
    "sft": "batch_size or max_len, or SFT_LORA_RANK",
    "improve": "batch_size or max_len, or LORA_RANK",
    "preference": (
        "PREFERENCE_BATCH (pairs a step) or GENERATION_STEPS (max_response_length), or LORA_RANK"
    ),
    "grpo": (
        "grpo.micro_batch_size, grpo.rollout_micro_batch_size (the rollout's prompts a call) or "
        "GENERATION_STEPS, or grpo.num_generations"
    ),
}
JUDGE_KNOBS = "the judge's batch (llm_grader's batch_size: judging.JUDGE_BATCH)"
AGENTIC_KNOBS = {  # notebook 07's, by stage
    "sft": "batch_size or max_len (warm start), or sft_lora_rank",
    "grpo": (
        "grpo.micro_batch_size or grpo.max_generation_steps (the episode's tokens), or "
        "NUM_GENERATIONS, or LORA_RANK"
    ),
}


def _notebook(rec) -> str:
    """The notebook whose stages ``rec`` sets: "07" for an Agentic recipe, else "06"."""
    return "07" if isinstance(rec, recipes.Agentic) else "06"


def _stage_knobs(notebook: str) -> dict[str, str]:
    return AGENTIC_KNOBS if notebook == "07" else STAGE_KNOBS


def stage_recipes(rec) -> dict[str, tuple[str, Any]]:
    """Notebook 06's or 07's stages as the plans' recipes, ``{stage: (kind, settings)}``: each
    stage's :func:`tunixkit.pipeline.stage_settings`, what it trains with. 07
    (:class:`tunixkit.recipes.Agentic`): the warm start's SFT and agentic GRPO, whose turns are
    sampled from the conversation so far."""
    planned = {n: pipeline.stage_settings(rec, n) for n in rec.shares}
    if _notebook(rec) == "07":
        s = rec.grpo
        planned["grpo"] = types.SimpleNamespace(
            **{
                **vars(planned["grpo"]),
                # tunix's agentic learner samples its turns in micro-batches, whatever the
                # rollout micro-batch says: planned at the training micro-batch's rows
                "grpo": dataclasses.replace(s, rollout_micro_batch_size=s.micro_batch_size),
            },
            turn_prompt_length=s.max_prompt_length + s.max_generation_steps,
            kv_cache_size=agentic.episode_cache_size(s),
        )
    return {n: (s.kind, s) for n, s in planned.items()}


def plan_stages(
    rec=None,
    *,
    mesh=None,
    devices: int | None = None,
    chip: str = "v5e",
    layers: int | None = None,
    verbose: bool = True,
    stages: Sequence[str] | None = None,
) -> dict[str, Plan]:
    """Plan each of notebook 06's stages (``rec``: a :class:`tunixkit.recipes.Pipeline`, default
    the full one) with its judge model's weights resident in every step (``judge_id``; none in
    smoke), or 07's (``rec``: a :class:`tunixkit.recipes.Agentic`); ``stages``: only these.
    Other arguments as :func:`plan`."""
    rec = rec or recipes.Pipeline.full()
    notebook = _notebook(rec)
    judge, judge_model = 0, None
    if getattr(rec, "judge_id", None):
        mesh = mesh or runtime.make_mesh((devices, 1)) if devices else mesh or runtime.make_mesh()
        judge_model, _, _ = _abstract(rec.judge_id, layers, mesh)
        judge = _state(judge_model)
    plans = {}
    planned = stage_recipes(rec)
    if unknown := set(stages or ()) - set(planned):
        raise ValueError(f"unknown stages {sorted(unknown)}; known: {', '.join(planned)}")
    for stage, (kind, stage_rec) in planned.items():
        if stages and stage not in stages:
            continue
        if verbose:
            print(f"memory plan, stage {stage}:", flush=True)
        try:
            found = plan(
                kind,
                stage_rec,
                mesh=mesh,
                devices=devices,
                chip=chip,
                layers=layers,
                verbose=verbose,
            )
        except NotImplementedError as e:  # full fine-tuning: not planned, not an error
            print(f"memory plan, stage {stage}: {e}")
            continue
        if judge:
            found.persistent["judge"] = judge
            for step in found.steps:
                step.resident_other += judge
        if judge and stage == "grpo":  # GRPO's rewards: the judge scores beside its whole state
            if verbose:
                print(f"memory plan, stage {stage}: the judge's scoring pass", flush=True)
            scoring = _judge_score(judge_model, mesh, _others(found.persistent, "judge"), verbose)
            # after the rollout, before the update
            found.steps.insert(len(found.steps) - 1, scoring)
        found.stage, found.notebook = stage, notebook
        plans[stage] = found
    return plans


def check_stages(
    rec, mesh, *, stop: bool | None = None, stages: Sequence[str] | None = None
) -> dict[str, Plan] | None:
    """Notebook 06's or 07's model cell, before any weights are read: :func:`check` for every stage
    (06's judge resident throughout), or for ``stages`` only (those a resumed run has still to do:
    each stage's compile takes minutes, every session). A stage that does not fit raises
    :class:`DoesNotFit` naming it and the recipe fields to turn down."""
    notebook = _notebook(rec)
    chip = _chip_or_skip(mesh, "agentic" if notebook == "07" else "pipeline")
    if chip is None:
        return None
    if stages is not None and not stages:
        print("memory plan: every stage is done, none to plan")
        return {}
    plans = plan_stages(rec, mesh=mesh, chip=chip, stages=stages)
    for found in plans.values():
        print(found.table())
    short = {s: p for s, p in plans.items() if p.spare < 0}
    if _stops(stop) and short:
        named = "; ".join(
            f"{s}: {-p.spare:.1f} GiB short, turn down {p.knobs}" for s, p in short.items()
        )
        held = "" if notebook == "07" else " with the judge resident"
        raise DoesNotFit(f"stages that do not fit a {chip} chip{held}: {named}. {_TRY_ANYWAY}")
    return plans


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=(*KINDS, "pipeline", "agentic"))
    ap.add_argument(
        "--model", help="model id (the student for distill); default: the full recipe's"
    )
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--chip", default="v5e", help=f"one of {', '.join(CHIPS)}")
    ap.add_argument("--layers", type=int, help="cut the depth (reduced shapes)")
    ap.add_argument(
        "--preset", choices=("full", "one_chip"), default="full", help="the recipe's preset"
    )
    ap.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="FIELD=VALUE",
        help="recipe overrides, e.g. batch_size=8",
    )
    ap.add_argument("--json", help="append the plan as a JSON line to this file")
    ap.add_argument("--stage", nargs="*", help="pipeline/agentic: plan only these stages")
    ap.add_argument(
        "--topology",
        help="compile for a TPU slice with libtpu's compile-only client, no TPU needed: "
        "'v5e:2x4' (Kaggle's v5e-8, sets --devices 8), 'v5e:1x1' (Colab) or 'v5e:4x4' (a "
        "v5e-16: 4 hosts of 4 chips); needs libtpu",
    )
    args = ap.parse_args(argv)
    mesh = None
    if args.topology:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")  # TPUs only as compile targets
        mesh = tpu_slice_mesh(args.topology)
        args.devices = mesh.devices.size
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:  # before JAX starts
        os.environ["XLA_FLAGS"] = (
            f"{flags} --xla_force_host_platform_device_count={args.devices}".strip()
        )
    staged = {"pipeline": recipes.Pipeline, "agentic": recipes.Agentic}
    cls = staged.get(args.kind) or getattr(recipes, _RECIPES[args.kind])
    rec = getattr(cls, args.preset)()
    for kv in args.set:
        name, value = kv.split("=", 1)
        rec = _override(rec, name, json.loads(value))
    t0 = time.perf_counter()
    if args.kind in staged:
        if args.model:
            rec = dataclasses.replace(rec, model_id=args.model)
        plans = plan_stages(
            rec,
            mesh=mesh,
            devices=args.devices,
            chip=args.chip,
            layers=args.layers,
            stages=args.stage,
        )
        for p in plans.values():
            print(p.table())
            if args.json:
                row = p.to_json() | {"layers": args.layers, "overrides": args.set}
                with open(args.json, "a") as f:
                    f.write(json.dumps(row) + "\n")
        return 0 if all(p.spare >= 0 for p in plans.values()) else 1
    p = plan(
        args.kind,
        rec,
        model_id=args.model,
        mesh=mesh,
        devices=args.devices,
        chip=args.chip,
        layers=args.layers,
    )
    print(p.table())
    if args.json:
        row = p.to_json() | {
            "layers": args.layers,
            "overrides": args.set,
            "seconds": time.perf_counter() - t0,
            "host_peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        }
        with open(args.json, "a") as f:
            f.write(json.dumps(row) + "\n")
    return 0 if p.spare >= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
