"""tunix 0.1.7's rough edges, worked around in one place.

Each entry says what tunix 0.1.7 does (with the file of the installed release: no tunix issue was
found for any of them in a search of google/tunix's issues on 2026-11-25), what is done instead,
and which test shows it (``tests/test_compat.py``: each fails on the behaviour it works
around, so a tunix upgrade that fixes one shows which entry to drop). Nothing here runs at import:
the code that needs a workaround applies it (the agentic learner's build, the SimPO trainer, the
export's weight mapping). The memory plan (:mod:`tunixkit.tools.memplan`, a tool) re-wires tunix's
trainers for compiling without running; it keeps those tool-only patches to itself.

- :func:`quiet_tool_parser`: ``tool_parser/qwen_parser.py`` prints every tool call it cannot parse;
  in GRPO that is a line per malformed rollout. Silenced while an agent parses a response (they are
  counted in the episode records); the module is tunix's own again after.
- :class:`TextQuestionAgent`: ``agents/tool_agent.py`` reads the question from the batch as a
  1-element array and writes its repr (``"['...']"``) into the prompt; this agent takes the text
  out, and may replace the ~120-token JSON-schema tool prompt with a short one.
- :class:`CopyingGemmaParser`: ``chat_template_parser/parser.py``'s ``GemmaChatTemplateParser``
  edits the conversation in place, prepending the system prompt to the first user turn again on
  every call; this one parses a copy.
- :class:`ForgivingToolEnvironment`: ``environments/tool_environment.py`` raises when a tool
  call's arguments are not a JSON object, which ends ``train()``; here the call gets an error
  result instead (the model's mistake costs its reward, never the run), and each call's result
  goes to :meth:`ForgivingToolEnvironment.tool_called`.
- :func:`fresh_seed_per_call`: the agentic learner samples each episode in a call of its own and
  the sampler seeds from the rollout config alone, so the G episodes of a question were identical
  (every advantage 0); each call gets its own seed.
- :func:`without_aux_metric`: ``sft/dpo/dpo_trainer.py`` logs ORPO's odds ratio whenever
  ``algorithm="orpo"``, which SimPO (built on the ORPO path: no reference pass) does not compute.
- :func:`gemma3_qk_norms`: tunix's Gemma3 attention keeps its query/key norms in private
  attributes (``models/gemma3/model.py``); the export reads them through this one accessor.
- :func:`config_rope` / :func:`llama3_config`: ``models/llama3/model.py`` and
  ``models/qwen3/model.py`` call their ``apply_rope`` without the config's ``rope_theta``, so
  every Llama 3 and Qwen3 rotates by a base of 1,000,000 (Llama 3.x's is 500,000, SmolLM2's
  100,000); and tunix has no Llama 3.1 frequency scaling (``rope_scaling`` of type ``llama3``,
  which Llama 3.1 and 3.2 use at every position). Each attention block passes its config's base
  (and, through :func:`llama3_config`'s subclass, its scaling) to the rotation
  (``test_tunix_llama3_and_qwen3_ignore_the_config_rope_base``; equal logits to transformers:
  ``tests/test_families.py``).
- :func:`quantizable_einsum`: ``models/qwen2/model.py`` and ``models/qwen3/model.py``'s ``Einsum``
  casts its weight with ``jnp.astype`` before the einsum; under QLoRA the weight is qwix's nf4
  ``WithAux``, which ``astype`` refuses (``TypeError: astype requires ndarray or scalar
  arguments``), so no Qwen could train with QLoRA. A quantized weight goes to the einsum as it is
  (qwix's einsum dequantizes it), an array is cast as tunix casts it
  (``test_qwen_trains_with_qlora``).
- :class:`BatchShardedSampler`: ``generate/sampler.py``'s ``Sampler`` builds its state (tokens, KV
  cache) unplaced, and its Gemma splits the batch over devices only inside the legacy ``with
  mesh:`` (``utils/sharding_utils.py``), which tunix's RL rollouts enter and a plain sampler call
  does not. Outside it, every device computes the whole batch against its slice of the weights:
  on a v5e-8 the judge's 16 rubric prompts of 2,048 tokens need more temporary memory than a chip
  has (the TPU's compiler, gemma-3-1b on v5e:2x4: 17.1 GiB of temporaries against 15.75;
  ``bench/sampler_placement.py --tpu-aot``). This sampler places the state's batch over the
  mesh's ``fsdp`` axis (:func:`place_sampling_batch`) when the batch divides it;
  :func:`split_rollout_batches` gives an RL cluster's rollout the same sampler (on a TPU its
  rollouts run inside the mesh already; on emulated CPU devices tunix skips the constraints).
- :func:`set_updates_per_step` / :func:`updates_per_step`: ``rl/rl_learner.py`` counts a GRPO
  learner's progress in its actor's optimizer updates (``actor_trainer.train_steps``: one per
  iteration and mini-batch), and what a GRPO step is, in updates, is known only to the settings
  that built it; the builders record it here (by the learner, weakly), never as an attribute
  injected into tunix's object.
- :func:`make_eval_due`: ``sft/peft_trainer.py`` evaluates when the step divides
  ``config.eval_every_n_steps``, read at every step, and has no way to ask for an eval at the last
  step of a run that the session clock ends early; the interval is set to that step
  (``tests/test_kill_resume.py::test_session_clock_stop_leaves_a_checkpoint_of_the_last_step``: the
  eval loss at step 3 of an interval of 10**6).
- :func:`stop_perf_tracing`: ``rl/rl_cluster.py`` builds its perf tracer once and hands it to the
  actor's trainer; nothing turns it off, and it keeps every span of every step in memory. A run
  that traces its first steps (:class:`tunixkit.profiling.StepTrace`) swaps both for tunix's
  ``NoopTracer`` once they are written (``tests/test_profiling.py``).
- :func:`prefill_last_position`: ``generate/sampler.py``'s ``Sampler`` asks a model for the last
  prompt position's logits only (``decode_only_last_token``) when its ``__call__`` takes the flag;
  only tunix's Gemma4 does, so its Gemma3 and Gemma2 project every prompt position onto the
  vocabulary in each prefill (a GRPO step of gemma-3-1b's 16 rollouts of 256 prompt tokens: 2 GiB
  of bfloat16 logits, to read 16 rows of them). The sampler merges its weights into a subclass
  that takes the flag; the same tokens and log-probabilities
  (``test_tunix_sampler_prefill_projects_every_prompt_position_ours_the_last``).
- :class:`AnswerTokenLogitStrategy`: ``distillation/strategies/logit.py``'s ``LogitStrategy``
  averages its soft loss (the KL to the teacher) over every position of the batch, the prompt's
  and the padding's too, while its hard loss counts the answer tokens only (the labels mark
  them): the student spends itself matching the teacher where nothing is trained. In notebook
  04's smoke run the student then ended further from the teacher on held-out answers than the
  same student trained on the hard loss alone (KL 0.475 against 0.250,
  ``docs/tuning.md#04-distill-smoke``). Here both losses, and the eval loss, are means over the
  answer tokens (``test_the_distillation_soft_loss_counts_answer_tokens_only``).
- :func:`choice_logprobs`: ``models/gemma3/model.py`` and ``models/gemma/model.py``'s
  ``Transformer.__call__`` project every position onto the vocabulary: scoring 16 judge prompts of
  2,048 tokens makes 16 x 2,048 x 262,144 logits to read one position of each. This pass reads the
  final-normed hidden states (tunix's ``output_hidden_states``) and projects the last position
  only; the unused logits of every position are dead code the compiler drops.
- :func:`sampler_fetches_whole`: ``generate/sampler.py``'s ``Sampler.__call__`` brings the sampled
  tokens (and log-probabilities, logits) to the host with ``jax.device_get``, which an array
  sharded over other processes' devices refuses (``RuntimeError: Fetching value for `jax.Array`
  that spans non-addressable (non process local) devices is not possible``): in a run of several
  processes every GRPO rollout and every evaluation failed at its first sampler call. Applied by
  :func:`tunixkit.hosts.start` once the processes have joined (only then: one process fetches
  as tunix does), the sampler's fetches gather such an array whole on every process
  (:func:`whole`; every process samples the same batch, so each calls the gather)
  (``tests/test_hosts.py``).
- :func:`rl_shards_whole_batches`: ``rl/rl_cluster.py``'s reference (and old-policy)
  log-probabilities place the rollouts with ``sft/sharding_utils.py``'s ``shard_input``, which
  builds the global batch with ``jax.make_array_from_process_local_data``: each process's
  rollouts taken as its own rows. Every process holds the same whole rollouts (the sampler fetches
  them whole), so with 2 processes the reference pass computed on 2 x the step's rows (8 rollouts
  made a global batch of 16, ``tests/test_hosts.py``): on a 4-host v5e-16, 4 x the work and the
  activations the memory plan counts. Applied by :func:`tunixkit.hosts.start` once the processes
  have joined, rl_cluster's ``shard_input`` takes a host-local batch as the whole global batch
  (:class:`_WholeBatchSharding`); the trainers' own ``shard_input`` (SFT's rows, each process's
  own: :func:`shards_input_as_it_comes`) is left as tunix has it.
- :func:`shards_input_as_it_comes`: which tunix trainers build their global batch from each
  process's rows (``PeftTrainer``), and which compute on the whole batch first (DPO, distillation).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import importlib
import inspect
import math
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.interpreters import pxla
from tunix.distillation.strategies import LogitStrategy
from tunix.generate.sampler import Sampler
from tunix.rl import common, rl_cluster
from tunix.rl.agentic.agents.tool_agent import ToolAgent
from tunix.rl.agentic.environments.tool_environment import ToolEnvironment
from tunix.rl.agentic.parser.chat_template_parser.parser import GemmaChatTemplateParser
from tunix.rl.agentic.parser.tool_parser import qwen_parser
from tunix.rl.agentic.tools.base_tool import BaseTool

if TYPE_CHECKING:
    from jax.sharding import Mesh
    from tunix.generate.sampler import _SamplingState
    from tunix.models.gemma3.model import Attention, RMSNorm
    from tunix.rl.rl_cluster import RLCluster
    from tunix.sft.dpo.dpo_trainer import DPOTrainer

__all__ = [
    "AnswerTokenLogitStrategy",
    "BatchShardedSampler",
    "CopyingGemmaParser",
    "ForgivingToolEnvironment",
    "TextQuestionAgent",
    "as_text",
    "choice_logprobs",
    "config_rope",
    "data_ways",
    "fresh_seed_per_call",
    "gemma3_qk_norms",
    "llama3_config",
    "make_eval_due",
    "mesh_of",
    "place_sampling_batch",
    "prefill_last_position",
    "quantizable_einsum",
    "quiet_tool_parser",
    "set_updates_per_step",
    "split_rollout_batches",
    "split_rows",
    "stop_perf_tracing",
    "updates_per_step",
    "rl_shards_whole_batches",
    "sampler_fetches_whole",
    "whole",
    "without_aux_metric",
]


_QUIET_LOCK = threading.Lock()
_quiet_blocks = 0  # open quiet_tool_parser blocks, in every thread
_MISSING = object()
_parser_print: Any = _MISSING  # what qwen_parser held under "print" before the first block


@contextlib.contextmanager
def quiet_tool_parser() -> Iterator[None]:
    """While the block runs, tunix's Qwen tool parser prints nothing: its module's own ``print``
    is a no-op, never the builtin. When the last open block (of any thread) ends, the module is as
    tunix left it."""
    global _quiet_blocks, _parser_print
    with _QUIET_LOCK:
        if _quiet_blocks == 0:
            _parser_print = vars(qwen_parser).get("print", _MISSING)
            qwen_parser.print = lambda *args, **kwargs: None
        _quiet_blocks += 1
    try:
        yield
    finally:
        with _QUIET_LOCK:
            _quiet_blocks -= 1
            if _quiet_blocks == 0:
                if _parser_print is _MISSING:
                    del qwen_parser.print
                else:
                    qwen_parser.print = _parser_print


def as_text(value: Any) -> str:
    """A batch column's value as text (tunix hands each example over as 1-element arrays)."""
    if isinstance(value, np.ndarray):
        value = value.reshape(-1)[0] if value.size else ""
    return value.decode() if isinstance(value, bytes) else str(value)


class TextQuestionAgent(ToolAgent):
    """tunix's ``ToolAgent`` with the question read as text, and an optional short tool prompt."""

    def __init__(
        self,
        system_prompt: str,
        tool_parser_name: str = "qwen",
        tool_map: dict[str, type[BaseTool]] | None = None,
        tools_prompt: str | None = None,
    ) -> None:
        self._tools_prompt_override = tools_prompt
        super().__init__(system_prompt, tool_parser_name, tool_map)

    def _init_messages(self, system_prompt: str) -> None:
        if self._tools_prompt_override is not None:
            self.tools_prompt = self._tools_prompt_override
        super()._init_messages(system_prompt)

    def _observation_to_messages(
        self, observation: Any, reward: float, done: bool, info: dict
    ) -> None:
        if isinstance(observation, dict) and not observation:  # the episode's end: nothing to say
            return
        if (
            isinstance(observation, dict)
            and "tool_outputs" not in observation
            and "question" in observation
        ):
            self._messages.append({"role": "user", "content": as_text(observation["question"])})
            return
        super()._observation_to_messages(observation, reward, done, info)


class CopyingGemmaParser(GemmaChatTemplateParser):
    """tunix's Gemma chat template, without editing the caller's messages."""

    def preprocess_messages(self, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        return super().preprocess_messages([dict(m) for m in messages])


class ForgivingToolEnvironment(ToolEnvironment):
    """tunix's ``ToolEnvironment`` that survives malformed tool calls: each call runs on its own,
    one that raises gets an ``Error: malformed call (...)`` result, and every result is passed
    to :meth:`tool_called` (a hook for subclasses)."""

    def tool_called(self, call: dict[str, Any], result: str) -> None:
        """Called once per tool call with its result (an error text for a malformed one)."""

    def _execute_tool_calls(self, tool_calls: list[dict[str, Any]]) -> dict[str, str]:
        out: dict[str, str] = {}
        for call in tool_calls:
            call_id = call.get("id") or str(uuid.uuid4())
            try:
                result = super()._execute_tool_calls([{**call, "id": call_id}])
            except Exception as e:  # noqa: BLE001
                # the model's mistake costs its reward, not the run
                result = {call_id: f"Error: malformed call ({type(e).__name__})"}
            for value in result.values():
                self.tool_called(call, str(value))
            out.update(result)
        return out


# Seeds a step's sampler calls may take before the next step's (fresh_seed_per_call).
SEED_STRIDE = 2**16


def fresh_seed_per_call(cluster: RLCluster, base_seed: int) -> None:
    """Make each of ``cluster``'s sampler calls use its own seed: the n-th call (from 1) made while
    the cluster is at step ``s`` (its ``global_steps``, which tunix restores from a checkpoint)
    samples with ``base_seed + SEED_STRIDE * s + n``. A resumed run thus samples its steps with
    the seeds an uninterrupted one used (a count of every call since the process began restarted
    at 1 and sampled a resumed run's step 3 with step 1's seeds)."""
    rollout = cluster.rollout
    generate, lock, at = rollout.generate, threading.Lock(), {"step": None, "calls": 0}

    def generate_with_own_seed(prompts, rollout_config, **kwargs):
        with lock:
            step = int(cluster.global_steps)
            if step != at["step"]:
                at.update(step=step, calls=0)
            at["calls"] += 1
            seed = (base_seed + SEED_STRIDE * step + at["calls"]) % 2**31
        return generate(prompts, dataclasses.replace(rollout_config, seed=seed), **kwargs)

    rollout.generate = generate_with_own_seed


def without_aux_metric(trainer: DPOTrainer, name: str) -> DPOTrainer:
    """``trainer`` (a tunix DPO trainer) no longer logging the auxiliary metric ``name``."""
    trainer._aux_metrics_to_log.pop(name, None)
    return trainer


def gemma3_qk_norms(attention: Attention) -> tuple[RMSNorm, RMSNorm]:
    """The query and key RMSNorm modules of a tunix Gemma3 attention block."""
    return attention._query_norm, attention._key_norm


_ROPE: contextvars.ContextVar[tuple[float, Any] | None] = contextvars.ContextVar(
    "tunixkit_rope", default=None
)


def _scaled_inv_freq(head_dim: int, theta: float, scaling: dict[str, Any]) -> np.ndarray:
    """Llama 3.1's RoPE frequencies (``rope_type: llama3``): wavelengths longer than the original
    context / ``low_freq_factor`` slowed by ``factor``, shorter than context / ``high_freq_factor``
    kept, the band between blended."""
    inv = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    factor, low, high = (
        float(scaling[k]) for k in ("factor", "low_freq_factor", "high_freq_factor")
    )
    context = float(scaling["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv
    smooth = (context / wavelen - low) / (high - low)
    blended = (1 - smooth) * inv / factor + smooth * inv
    out = np.where(wavelen > context / low, inv / factor, inv)
    out = np.where((wavelen <= context / low) & (wavelen >= context / high), blended, out)
    return out.astype(np.float32)


def _config_rope_fn(original: Callable[..., jax.Array]) -> Callable[..., jax.Array]:
    def apply_rope(
        inputs: jax.Array, positions: jax.Array, head_dim: int, rope_theta: float | None = None
    ) -> jax.Array:
        theta, scaling = _ROPE.get() or (1_000_000, None)
        if rope_theta is not None or not scaling:
            return original(inputs, positions, head_dim, rope_theta=rope_theta or theta)
        inv = jnp.asarray(_scaled_inv_freq(head_dim, theta, dict(scaling)))
        angle = (positions[..., None] * inv)[..., None, :]  # [B, L, 1, H/2]
        sin, cos = jnp.sin(angle).astype(inputs.dtype), jnp.cos(angle).astype(inputs.dtype)
        first, second = jnp.split(inputs, 2, axis=-1)  # rotate-half, as tunix's own
        out = jnp.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)
        return out.astype(inputs.dtype)

    return apply_rope


def _config_rope_block(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def block(self: Any, *args: Any, **kwargs: Any) -> Any:
        token = _ROPE.set((self.config.rope_theta, getattr(self.config, "rope_scaling", None)))
        try:
            return original(self, *args, **kwargs)
        finally:
            _ROPE.reset(token)

    return block


_ROPE_PATCHED: set[str] = set()
_PATCH_LOCK = threading.Lock()


def config_rope(module_name: str) -> None:
    """Make the tunix model module ``module_name`` (``tunix.models.llama3.model`` or
    ``...qwen3.model``) rotate by its config's ``rope_theta`` (and a :func:`llama3_config`'s
    scaling) instead of ``apply_rope``'s default base; once per process."""
    with _PATCH_LOCK:
        if module_name in _ROPE_PATCHED:
            return
        module = importlib.import_module(module_name)
        module.apply_rope = _config_rope_fn(module.apply_rope)
        module.Attention.block = _config_rope_block(module.Attention.block)
        _ROPE_PATCHED.add(module_name)


def _quantizable_einsum_call(self: Any, x: jax.Array) -> jax.Array:
    x = jnp.astype(x, self.dtype)
    w = self.w.value
    if isinstance(w, jax.Array | np.ndarray):  # else qwix's quantized weight: its einsum casts
        w = jnp.astype(w, self.dtype)
    return jnp.einsum(self.einsum_str, x, w)


_EINSUM_PATCHED: set[str] = set()


def quantizable_einsum(module_name: str) -> None:
    """Let the tunix model module ``module_name``'s ``Einsum`` (Qwen2's, Qwen3's) take a QLoRA
    (nf4) weight; once per process."""
    with _PATCH_LOCK:
        if module_name in _EINSUM_PATCHED:
            return
        module = importlib.import_module(module_name)
        module.Einsum.__call__ = functools.wraps(module.Einsum.__call__)(_quantizable_einsum_call)
        _EINSUM_PATCHED.add(module_name)


@functools.cache
def _llama3_config_class() -> type:
    from tunix.models.llama3 import model as llama3

    @dataclasses.dataclass(frozen=True)
    class Llama3Config(llama3.ModelConfig):
        """tunix's Llama3 config with the RoPE scaling of Llama 3.1/3.2 (``rope_scaling``)."""

        rope_scaling: tuple[tuple[str, Any], ...] | None = None

    return Llama3Config


def llama3_config(fields: dict[str, Any], rope_scaling: dict[str, Any] | None) -> Any:
    """A tunix Llama3 ``ModelConfig`` of ``fields``; with ``rope_scaling`` (a config.json's
    ``rope_scaling`` of type ``llama3``), the subclass that carries it to :func:`config_rope`."""
    config_rope("tunix.models.llama3.model")
    if not rope_scaling:
        from tunix.models.llama3 import model as llama3

        return llama3.ModelConfig(**fields)
    keys = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
    missing = [k for k in keys if k not in rope_scaling]
    if missing:
        raise ValueError(f"rope_scaling of type llama3 lacks {missing}")
    kinds = (float, float, float, int)  # config.json's types (transformers wants the int)
    scaling = (
        ("rope_type", "llama3"),
        *((k, t(rope_scaling[k])) for k, t in zip(keys, kinds, strict=True)),
    )
    return _llama3_config_class()(**fields, rope_scaling=scaling)


def _project(model: nnx.Module, hidden: jax.Array) -> jax.Array:
    """Final-normed hidden states onto the vocabulary, as the model's ``__call__`` does: its output
    head (``lm_head``, untied Llama/Qwen) or the embedding, and Gemma2's soft-cap."""
    head = getattr(model, "lm_head", None)
    logits = head(hidden) if head is not None else model.embedder.decode(hidden)
    cap = getattr(model, "final_logits_softcap", None)  # Gemma2's, as its __call__ applies it
    if cap:
        logits = jnp.tanh(logits / cap) * cap
    return logits


def choice_logprobs(model: nnx.Module) -> Callable[..., jax.Array]:
    """A compiled pass ``fn(state, ids, mask, choices) -> [rows, len(choices)]`` for ``model`` (a
    tunix Gemma or Gemma2): the log-probability of each token id of ``choices`` right after each
    row's last position (rows left-padded, ``mask`` marking their tokens), normalised over the
    whole vocabulary; ``state`` is ``nnx.state(model)``, or its abstract shapes to compile it."""
    graphdef = nnx.graphdef(model)

    @jax.jit
    def fn(state: Any, ids: jax.Array, mask: jax.Array, choices: jax.Array) -> jax.Array:
        model = nnx.merge(graphdef, state)
        attn = (  # as tunix's trainers build it: Gemma2 has no get_attention_mask
            model.get_attention_mask(ids, inputs_mask=mask)
            if hasattr(model, "get_attention_mask")
            else common.make_causal_attn_mask(mask)
        )
        positions = common.build_positions_from_mask(mask)
        model(ids, positions, None, attn, output_hidden_states=True)
        hidden = nnx.pop(model, nnx.Intermediate)["all_hidden_states"].get_value()[-1]
        logits = _project(model, hidden[:, -1]).astype(jnp.float32)
        return jax.nn.log_softmax(logits)[:, choices]

    return fn


DATA_AXIS = "fsdp"  # the mesh axis tunix's Gemma splits a batch over (its ``act_btd[0]``)


def mesh_of(tree: Any) -> Mesh | None:
    """The mesh ``tree``'s arrays (a model's state, say) are placed on, or None off a mesh."""
    leaves = jax.tree.leaves(tree)
    sharding = getattr(leaves[0], "sharding", None) if leaves else None
    return getattr(sharding, "mesh", None)


def data_ways(mesh: Mesh | None) -> int:
    """How many devices a batch is split over on ``mesh`` (its ``fsdp`` axis; 1 off a mesh)."""
    return 1 if mesh is None else dict(mesh.shape).get(DATA_AXIS, 1)


def split_rows(tree: Any, mesh: Mesh | None) -> Any:
    """Each array of ``tree`` (concrete or ``jax.ShapeDtypeStruct``; None kept) with its first axis,
    the batch's rows, split over ``mesh``'s ``fsdp`` axis, so that each device computes its own
    rows. Unchanged off a mesh, on one device along that axis, or when any array's rows do not
    divide by it (every device then computes every row, as tunix does with an unplaced batch).
    tunix's trainers place their batches with ``tunix.sft.sharding_utils.shard_input``, which reads
    the mesh from an active ``with mesh:``, takes concrete arrays only and assumes the rows divide;
    this one is given the mesh, serves the memory plan's abstract state too, and keeps an uneven
    batch whole."""
    ways = data_ways(mesh)
    leaves = jax.tree.leaves(tree)
    if ways == 1 or any(not x.shape or x.shape[0] % ways for x in leaves):
        return tree
    split = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(DATA_AXIS))

    def put(x):
        if isinstance(x, jax.ShapeDtypeStruct):
            return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=split)
        return jax.device_put(x, split)

    return jax.tree.map(put, tree)


def place_sampling_batch(state: _SamplingState, mesh: Mesh | None) -> _SamplingState:
    """``state`` (a tunix sampler's, concrete or abstract) with its per-row arrays (tokens,
    positions, KV cache, done, logit and log-prob buffers) split over ``mesh``
    (:func:`split_rows`)."""
    rows = {
        "token_buffer": state.token_buffer,
        "positions": state.positions,
        "done": state.done,
        "cache": state.cache,
        "logits_buffer": state.logits_buffer,
        "logprobs_buffer": state.logprobs_buffer,
    }
    return state.replace(**split_rows(rows, mesh))


class _LastPositionPrefill:
    """Mixed in before a tunix Gemma or Gemma2 class (:func:`prefill_last_position`): its
    ``__call__`` takes tunix's ``decode_only_last_token``, and with it projects the last position
    only (the final-normed hidden states through ``output_hidden_states``, as
    :func:`choice_logprobs` reads them; the logits of every other position are dead code the
    compiler drops). Without it, tunix's own ``__call__``."""

    def __call__(
        self,
        tokens: jax.Array,
        positions: jax.Array | None = None,
        cache: Any = None,
        attention_mask: jax.Array | None = None,
        output_hidden_states: bool = False,
        *,
        decode_only_last_token: bool = False,
    ) -> tuple[jax.Array, Any]:
        forward = super().__call__  # type: ignore[misc]
        if not decode_only_last_token or output_hidden_states:
            return forward(tokens, positions, cache, attention_mask, output_hidden_states)
        _, new_cache = forward(tokens, positions, cache, attention_mask, True)
        hidden = nnx.pop(self, nnx.Intermediate)["all_hidden_states"].get_value()[-1]  # type: ignore[call-overload]
        return _project(self, hidden[:, -1:]), new_cache  # type: ignore[arg-type]


_LAST_POSITION_CLASSES: dict[type, type] = {}


def prefill_last_position(sampler: Sampler) -> bool:
    """Make ``sampler``'s prefill project the prompt's last position only; True when it does.

    tunix 0.1.7's ``Sampler`` passes ``decode_only_last_token`` to a model whose ``__call__`` takes
    it (``generate/sampler.py``, ``_prefill_fn``; only its Gemma4 does), and its Gemma3 and Gemma2
    project every prompt position onto the vocabulary, to read the last. At gemma-3-1b's 262,144
    tokens that is 16 rollouts x 256 prompt tokens x 262,144 logits (2 GiB in bfloat16) for a GRPO
    step's prefill. Here the sampler merges its weights into a subclass of the model's class that
    takes the flag (:class:`_LastPositionPrefill`); the weights, their tree and the decode steps
    are tunix's. A model class without ``output_hidden_states`` is left as it is (False)."""
    if sampler._supports_decode_only_last_token:
        return True
    graphdef = sampler._transformer_graphdef
    root = graphdef.nodes[0]  # the model's own node: its class, which nnx.merge instantiates
    cls = root.type
    if "output_hidden_states" not in inspect.signature(cls.__call__).parameters:
        return False
    if cls not in _LAST_POSITION_CLASSES:
        name = f"LastPosition{cls.__name__}"
        _LAST_POSITION_CLASSES[cls] = type(
            name, (_LastPositionPrefill, cls), {"__module__": __name__, "__qualname__": name}
        )
    sub = _LAST_POSITION_CLASSES[cls]
    nodes = [dataclasses.replace(root, type=sub, metadata=sub), *graphdef.nodes[1:]]
    sampler._transformer_graphdef = dataclasses.replace(graphdef, nodes=nodes)
    sampler._supports_decode_only_last_token = True
    return True


class BatchShardedSampler(Sampler):
    """tunix's ``Sampler`` whose state is split by rows over the weights' mesh
    (:func:`place_sampling_batch`): each device prefills and decodes its share of the batch; its
    prefill projects the last prompt position only (:func:`prefill_last_position`). Same tokens as
    tunix's (greedy and sampled alike, tests/test_compat.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        prefill_last_position(self)

    @property
    def ways(self) -> int:
        """How many devices a batch is split over (when its rows divide by it)."""
        return data_ways(mesh_of(self._flattened_transformer_state))

    def init_sample_state(self, all_input_ids: jax.Array, *args: Any, **kwargs: Any) -> Any:
        state = super().init_sample_state(all_input_ids, *args, **kwargs)
        return place_sampling_batch(state, mesh_of(self._flattened_transformer_state))


def split_rollout_batches(cluster: RLCluster) -> None:
    """Make ``cluster``'s rollout sampler (tunix's vanilla rollout) a
    :class:`BatchShardedSampler`."""
    from tunix.rl.rollout.vanilla_rollout import VanillaRollout

    if not isinstance(cluster.rollout, VanillaRollout):
        return  # another engine (vLLM, SGLang-JAX) samples its own way
    sampler = getattr(cluster.rollout, "_sampler", None)
    if type(sampler) is Sampler:
        sampler.__class__ = BatchShardedSampler
        prefill_last_position(sampler)
    elif not isinstance(sampler, BatchShardedSampler):  # tunix moved it: say so, never skip
        raise RuntimeError(
            f"tunix's VanillaRollout holds no Sampler in ._sampler (found {type(sampler).__name__})"
            ": tunixkit cannot split its rollouts over the mesh; update "
            "_compat.split_rollout_batches for this tunix version"
        )


class AnswerTokenLogitStrategy(LogitStrategy):
    """tunix's ``LogitStrategy`` with its soft loss (``temperature`` squared x KL(teacher ||
    student) at ``temperature``) and its hard loss (cross-entropy) both averaged over the answer
    tokens, the positions the labels mark (tunix averages the KL over every position of the batch,
    the prompt's and the padding's too), and so its eval loss. ``alpha`` weighs them as in tunix;
    the metrics keep tunix's names. Top-k distillation (``distill_top_k``) is not supported."""

    def compute_eval_loss(
        self, student_output: jax.Array, labels: jax.Array
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """The hard loss over the answer tokens (tunix's eval loss averages over every position)."""
        count = jnp.maximum(jnp.sum(labels), 1.0)  # one-hot rows: one per answer token
        ce = optax.softmax_cross_entropy(logits=student_output.astype(jnp.float32), labels=labels)
        return jnp.sum(ce) / count, {}

    def compute_loss(
        self, student_output: jax.Array, teacher_output: jax.Array, labels: jax.Array
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        if self.distill_top_k:
            raise NotImplementedError("AnswerTokenLogitStrategy: distill_top_k is not supported")
        s_logits = student_output.astype(jnp.float32)
        t_logits = teacher_output.astype(jnp.float32)
        mask = (jnp.sum(labels, axis=-1) > 0).astype(jnp.float32)  # answer tokens
        count = jnp.maximum(jnp.sum(mask), 1.0)
        t = self.temperature
        kl = optax.kl_divergence(
            jax.nn.log_softmax(s_logits / t, axis=-1), jax.nn.softmax(t_logits / t, axis=-1)
        )
        soft = jnp.sum(kl * mask) / count * t**2
        hard = jnp.sum(optax.softmax_cross_entropy(logits=s_logits, labels=labels)) / count
        teacher = jnp.sum(optax.softmax_cross_entropy(logits=t_logits, labels=labels)) / count
        combined = self.alpha * soft + (1.0 - self.alpha) * hard
        metrics = {
            "distill/soft_loss": soft,
            "distill/hard_loss": hard,
            "distill/kl_div": jnp.sum(kl * mask) / count,
            "distill/teacher_loss": teacher,
        }
        return combined, metrics


def stop_perf_tracing(cluster: RLCluster) -> None:
    """Stop ``cluster``'s perf tracing: both its tracers, and those its actor trainer was handed,
    become tunix's ``NoopTracer`` (the learners read ``cluster.perf`` and ``cluster.perf_v2`` at
    every span; the agentic episodes' engine keeps the second one it was built with, whose
    ``environment`` spans are then never exported)."""
    from tunix.perf.experimental.tracer import NoopTracer as NoopTracerV2
    from tunix.perf.trace import NoopTracer

    noop, noop_v2 = NoopTracer(), NoopTracerV2()
    cluster._perf, cluster._perf_v2 = noop, noop_v2
    cluster.actor_trainer._perf_tracer = noop
    cluster.actor_trainer._perf_tracer_v2 = noop_v2


_UPDATES_PER_STEP: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def set_updates_per_step(learner: Any, updates: int) -> None:
    """Record that one GRPO step of ``learner`` is ``updates`` optimizer updates."""
    _UPDATES_PER_STEP[learner] = int(updates)


def updates_per_step(trainer: Any) -> int:
    """The optimizer updates of one step of ``trainer`` (1 unless its builder said otherwise).

    >>> class Learner: ...
    >>> learner = Learner()
    >>> set_updates_per_step(learner, 4)
    >>> updates_per_step(learner), updates_per_step(Learner())
    (4, 1)
    """
    return _UPDATES_PER_STEP.get(trainer, 1)


def make_eval_due(trainer: Any, step: int) -> None:
    """Have tunix's trainer evaluate after ``step`` (it reads ``config.eval_every_n_steps`` each
    step), unless its interval already falls there.

    >>> import types
    >>> trainer = types.SimpleNamespace(config=types.SimpleNamespace(eval_every_n_steps=10))
    >>> make_eval_due(trainer, 20); trainer.config.eval_every_n_steps
    10
    >>> make_eval_due(trainer, 7); trainer.config.eval_every_n_steps
    7
    """
    if step % trainer.config.eval_every_n_steps:
        trainer.config.eval_every_n_steps = step


def whole(x: Any) -> np.ndarray:
    """``x`` (a ``jax.Array``, or anything ``jax.device_get`` takes) whole on this host; an array
    sharded over other processes' devices is gathered (a collective: every process calls it)."""
    if not isinstance(x, jax.Array) or x.is_fully_addressable or x.is_fully_replicated:
        return jax.device_get(x)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


class _WholeFetchingJax:
    """The ``jax`` that tunix's sampler module sees once :func:`sampler_fetches_whole` is applied:
    ``jax`` itself, but ``device_get`` fetches every leaf whole (:func:`whole`)."""

    def __init__(self, module: Any) -> None:
        self._jax = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._jax, name)

    def device_get(self, tree: Any) -> Any:
        return self._jax.tree.map(whole, tree)


def sampler_fetches_whole() -> None:
    """Make tunix's sampler fetch arrays sharded over other processes whole (see the module
    docstring). For a run of several processes, where every sampler call needs it; once."""
    from tunix.generate import sampler as sampler_module

    if not isinstance(sampler_module.jax, _WholeFetchingJax):
        sampler_module.jax = _WholeFetchingJax(sampler_module.jax)


class _WholeBatchSharding:
    """``tunix.sft.sharding_utils`` as ``tunix.rl.rl_cluster`` sees it once
    :func:`rl_shards_whole_batches` is applied: the module itself, but ``shard_input`` takes a
    host-local batch (every process holds the same one) as the whole global batch, and gives each
    device its rows of it. Otherwise as tunix's: no mesh, a batch already placed, or one holding
    an array of several processes, is returned as it is."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def shard_input(self, input_data: Any, data_sharding_axis: tuple[str, ...]) -> Any:
        mesh = pxla.thread_resources.env.physical_mesh
        leaves = jax.tree.leaves(input_data)
        if mesh.empty or any(
            isinstance(x, jax.Array) and not x.is_fully_addressable for x in leaves
        ):
            return input_data  # nothing to place on, or placed over the processes already
        pspec = jax.sharding.PartitionSpec(*data_sharding_axis)

        def place(x: Any) -> Any:
            host = np.asarray(x)
            sharding = self._module.get_sharding(host, mesh=mesh, pspec=pspec)
            return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

        with jax.transfer_guard("allow"):
            return jax.tree.map(place, input_data)


def rl_shards_whole_batches() -> None:
    """Make tunix's RL cluster place the rollouts it scores as the whole global batch (see the
    module docstring). For a run of several processes; once.

    >>> import jax, numpy as np
    >>> from tunix.sft import sharding_utils
    >>> mesh = jax.make_mesh((1,), ("fsdp",))
    >>> with mesh:
    ...     x = _WholeBatchSharding(sharding_utils).shard_input(np.arange(4), ("fsdp",))
    >>> x.shape, tuple(x.sharding.spec), x.tolist()
    ((4,), ('fsdp',), [0, 1, 2, 3])
    """
    if not isinstance(rl_cluster.sharding_utils, _WholeBatchSharding):
        rl_cluster.sharding_utils = _WholeBatchSharding(rl_cluster.sharding_utils)


def shards_input_as_it_comes(trainer: Any) -> bool:
    """Whether ``trainer`` makes its global batch from each process's part as it comes (tunix's
    ``shard_input``: ``jax.make_array_from_process_local_data``), so that each process of a run
    may feed only its own rows (:func:`tunixkit.hosts.own_rows`): ``PeftTrainer`` (SFT) does. Its
    DPO and distillation trainers compute on the batch in ``_prepare_inputs`` before they shard it
    (the reference's or the teacher's log-probabilities), so every process feeds them the whole
    batch; GRPO samples on every process alike."""
    from tunix.sft import peft_trainer

    return (
        isinstance(trainer, peft_trainer.PeftTrainer)
        and type(trainer)._prepare_inputs is peft_trainer.PeftTrainer._prepare_inputs
    )
