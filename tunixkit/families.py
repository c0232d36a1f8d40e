"""Model families: what differs between Gemma3, Gemma2, Llama 3.x, Qwen2/2.5 and Qwen3, as data.

A :class:`Family` holds everything tunixkit needs to know about an architecture, so that loading,
LoRA, export and the chat template go through the same code for every model:

- the tunix model class and its safetensors loader;
- the Hugging Face layout: ``config.json`` <-> tunix config, the expected tensors and shapes, and
  tunix weights -> HF tensors (what :mod:`tunixkit.checkpoints` writes and validates);
- the LoRA target modules (a qwix regex), and how adapters are merged into the HF weights;
- the chat template (:class:`ChatTemplate`): how a prompt is written and which piece ends a turn
  (Gemma's, ChatML for Qwen, Llama 3's headers);
- the :mod:`tunixkit._compat` fixes the family's tunix module needs before use (``patches``).

Adding a family is one more :data:`FAMILIES` entry with these functions. Llama and Qwen configs
say ``vocab_size`` where Gemma's say ``num_embed``: :func:`vocab_size` reads either.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import json
import pathlib
from collections.abc import Callable
from typing import Any

import numpy as np

from tunixkit import _compat, hosts

__all__ = ["ChatTemplate", "Family", "UnknownFamilyError", "get", "vocab_size"]


class UnknownFamilyError(KeyError):
    """A model family tunixkit has no entry for."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclasses.dataclass(frozen=True)
class ChatTemplate:
    """How a family writes one user turn and opens the model's: the prompt every notebook generates
    from and trains on (no BOS: the tokenizer adds it), and the piece that ends a turn.

    >>> print(GEMMA_CHAT.prompt("1+1?"))
    <start_of_turn>user
    1+1?<end_of_turn>
    <start_of_turn>model
    <BLANKLINE>
    """

    turn_start: str
    end_of_turn: str
    user: str
    model: str
    system_in_user_turn: bool = True  # no system role: the system prompt opens the user turn
    role_end: str = "\n"  # what follows the role's name
    turn_sep: str = "\n"  # what follows the end of a turn

    def opener(self, role: str) -> str:
        """The text that opens a turn of ``role``."""
        return f"{self.turn_start}{role}{self.role_end}"

    def turn(self, role: str, text: str) -> str:
        return f"{self.opener(role)}{text}{self.end_of_turn}{self.turn_sep}"

    def prompt(self, question: str, system_prompt: str | None = None) -> str:
        if not system_prompt:
            return self.turn(self.user, question) + self.opener(self.model)
        if self.system_in_user_turn:
            return self.prompt(f"{system_prompt}\n\n{question}")
        return self.turn("system", system_prompt) + self.prompt(question)


GEMMA_CHAT = ChatTemplate("<start_of_turn>", "<end_of_turn>", "user", "model")  # Gemma 2 and 3
# ChatML (Qwen 2.5 and 3, SmolLM2): "<|im_start|>user\n...<|im_end|>\n<|im_start|>assistant\n". The
# Hugging Face templates add a default system turn when none is given (Qwen2.5: "You are Qwen,
# created by Alibaba Cloud. ..."); tunixkit writes only the system prompt the notebook passes.
CHATML = ChatTemplate("<|im_start|>", "<|im_end|>", "user", "assistant", system_in_user_turn=False)
# Llama 3.x: "<|start_header_id|>user<|end_header_id|>\n\n...<|eot_id|>" (the tokenizer adds
# <|begin_of_text|>); the HF template's default "Cutting Knowledge Date" system turn is not written.
LLAMA3_CHAT = ChatTemplate(
    "<|start_header_id|>",
    "<|eot_id|>",
    "user",
    "assistant",
    system_in_user_turn=False,
    role_end="<|end_header_id|>\n\n",
    turn_sep="",
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Family:
    """One architecture: see the module docstring for what each field is for."""

    name: str
    model_module: str  # tunix module holding ModelConfig and the model class
    model_class: str  # e.g. "Gemma3"
    loader_module: (
        str  # tunix module with create_model_from_safe_tensors(file_dir, config, mesh, dtype)
    )
    architecture: str  # HF "architectures" entry
    lora_modules: str  # qwix LoraProvider(module_path=...)
    config_from_hf: Callable[
        [dict[str, Any], Any], Any
    ]  # (config.json dict, dtype) -> tunix config
    hf_config: Callable[
        ..., dict[str, Any]
    ]  # (tunix config, dtype=, eos/pad/bos ids) -> config.json
    hf_shapes: Callable[[Any], dict[str, tuple[int, ...]]]  # tunix config -> {tensor: shape}
    hf_state_dict: Callable[[Any, Any], dict[str, np.ndarray]]  # (model, config) -> HF tensors
    chat: ChatTemplate = GEMMA_CHAT
    patches: tuple[Callable[[str], None], ...] = ()  # _compat fixes of model_module, before use

    @property
    def end_of_turn(self) -> str:
        return self.chat.end_of_turn

    def _module(self) -> Any:
        for patch in self.patches:
            patch(self.model_module)
        return importlib.import_module(self.model_module)

    def model_cls(self) -> type:
        return getattr(self._module(), self.model_class)

    def config_cls(self) -> type:
        return self._module().ModelConfig

    def loader(self) -> Callable[..., Any]:
        self._module()
        return importlib.import_module(self.loader_module).create_model_from_safe_tensors


def vocab_size(cfg: Any) -> int:
    """The vocabulary of a tunix config (Gemma's ``num_embed``; Llama's, Qwen's ``vocab_size``)."""
    return int(cfg.num_embed if hasattr(cfg, "num_embed") else cfg.vocab_size)


def read_hf_config(folder: str | pathlib.Path) -> dict[str, Any]:
    """``folder/config.json`` as a dict (the text model's part of a multimodal config)."""
    path = pathlib.Path(folder) / "config.json"
    c = json.loads(path.read_text(encoding="utf-8"))
    return c.get("text_config", c)


# --- Gemma3 (270M, 1B, ...): checked against transformers.Gemma3ForCausalLM
# (tests/test_transformers_xcheck.py).
# config.json must say query_pre_attn_scalar, sliding_window and layer_types explicitly:
# transformers' defaults (256, 4096, its own pattern) give other logits.


def _g3_config_from_hf(c: dict[str, Any], dtype: Any):
    from tunix.models.gemma3 import model as g3

    rope = c.get("rope_parameters") or {}
    global_theta = c.get("rope_theta") or rope.get("full_attention", {}).get(
        "rope_theta", 1_000_000
    )
    local_theta = c.get("rope_local_base_freq") or rope.get("sliding_attention", {}).get(
        "rope_theta", 10_000
    )
    scaling = c.get("rope_scaling") or rope.get("full_attention") or {}
    qn = g3.QueryPreAttentionNormalisation
    by_head_dim = c.get("query_pre_attn_scalar", c["head_dim"]) == c["head_dim"]
    return g3.ModelConfig(
        num_layers=c["num_hidden_layers"],
        num_embed=c["vocab_size"],
        embed_dim=c["hidden_size"],
        hidden_dim=c["intermediate_size"],
        num_heads=c["num_attention_heads"],
        head_dim=c["head_dim"],
        num_kv_heads=c["num_key_value_heads"],
        sliding_window_size=c.get("sliding_window"),
        local_base_frequency=int(local_theta),
        global_base_frequency=int(global_theta),
        global_scale_factor=float(scaling.get("factor", 1.0))
        if scaling.get("rope_type") == "linear"
        else 1.0,
        query_pre_attn_norm=qn.BY_ONE_OVER_SQRT_HEAD_DIM
        if by_head_dim
        else qn.BY_ONE_OVER_SQRT_EMBED_DIM_DIV_NUM_HEADS,
        param_dtype=dtype,
    )


def _g3_hf_config(
    cfg,
    *,
    dtype: str = "float32",
    eos_token_id: int | list[int] = 1,
    pad_token_id: int = 0,
    bos_token_id: int = 2,
) -> dict[str, Any]:
    from tunix.models.gemma3 import model as g3

    pattern = itertools.cycle(g3.GEMMA3_ATTENTION_PATTERN)
    layer_types = [
        "sliding_attention" if t == g3.AttentionType.LOCAL_SLIDING else "full_attention"
        for _, t in zip(range(cfg.num_layers), pattern, strict=False)
    ]
    qn = g3.QueryPreAttentionNormalisation
    by_head_dim = cfg.query_pre_attn_norm == qn.BY_ONE_OVER_SQRT_HEAD_DIM
    if cfg.local_scale_factor != 1.0:
        raise NotImplementedError("HF legacy Gemma3 keys cannot express a local RoPE scale factor")
    return {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "vocab_size": cfg.num_embed,
        "hidden_size": cfg.embed_dim,
        "intermediate_size": cfg.hidden_dim,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": 1e-6,
        "query_pre_attn_scalar": cfg.head_dim if by_head_dim else cfg.embed_dim // cfg.num_heads,
        "sliding_window": cfg.sliding_window_size,
        "layer_types": layer_types,
        "sliding_window_pattern": len(g3.GEMMA3_ATTENTION_PATTERN),
        "final_logit_softcapping": None,
        "attn_logit_softcapping": None,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "max_position_embeddings": 32768,
        "rope_theta": float(cfg.global_base_frequency),
        "rope_local_base_freq": float(cfg.local_base_frequency),
        "rope_scaling": None
        if cfg.global_scale_factor == 1.0
        else {"rope_type": "linear", "factor": float(cfg.global_scale_factor)},
        "pad_token_id": pad_token_id,
        "bos_token_id": bos_token_id,
        "eos_token_id": eos_token_id,
        "torch_dtype": dtype,
        "dtype": dtype,
    }


def _layer_shapes(cfg) -> dict[str, tuple[int, ...]]:
    """The HF shapes of one decoder layer every family has: attention, gated MLP, the two norms."""
    n, k, h, d, f = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.embed_dim, cfg.hidden_dim
    return {
        "self_attn.q_proj.weight": (n * h, d),
        "self_attn.k_proj.weight": (k * h, d),
        "self_attn.v_proj.weight": (k * h, d),
        "self_attn.o_proj.weight": (d, n * h),
        "mlp.gate_proj.weight": (f, d),
        "mlp.up_proj.weight": (f, d),
        "mlp.down_proj.weight": (d, f),
        "input_layernorm.weight": (d,),
        "post_attention_layernorm.weight": (d,),
    }


def _gemma_layer_shapes(cfg, *, qk_norm: bool) -> dict[str, tuple[int, ...]]:
    h, d = cfg.head_dim, cfg.embed_dim
    per_layer = _layer_shapes(cfg) | {
        "pre_feedforward_layernorm.weight": (d,),
        "post_feedforward_layernorm.weight": (d,),
    }
    if qk_norm:
        per_layer |= {"self_attn.q_norm.weight": (h,), "self_attn.k_norm.weight": (h,)}
    shapes = {"model.embed_tokens.weight": (cfg.num_embed, d), "model.norm.weight": (d,)}
    for i in range(cfg.num_layers):
        shapes.update({f"model.layers.{i}.{name}": s for name, s in per_layer.items()})
    return shapes


def _gemma_attention(a, cfg) -> dict[str, Any]:
    """q/k/v/o of a tunix Gemma attention block as HF ``(out, in)`` matrices."""
    n, h, d = cfg.num_heads, cfg.head_dim, cfg.embed_dim
    if a.use_qkv_einsum:
        q, k, v = (a.qkv_einsum.w.value[j] for j in range(3))  # (N, D, H) each
    else:
        q, k, v = a.q_einsum.w.value, a.kv_einsum.w.value[0], a.kv_einsum.w.value[1]
    return {
        "self_attn.q_proj.weight": q.transpose(0, 2, 1).reshape(n * h, d),
        "self_attn.k_proj.weight": k.transpose(0, 2, 1).reshape(-1, d),
        "self_attn.v_proj.weight": v.transpose(0, 2, 1).reshape(-1, d),
        "self_attn.o_proj.weight": a.attn_vec_einsum.w.value.reshape(n * h, d).T,
    }


def _g3_state_dict(model, cfg) -> dict[str, np.ndarray]:
    sd = {
        "model.embed_tokens.weight": model.embedder.input_embedding.value,
        "model.norm.weight": model.final_norm.scale.value,
    }
    for i, layer in enumerate(model.layers):
        pre, a = f"model.layers.{i}.", layer.attn
        query_norm, key_norm = _compat.gemma3_qk_norms(a)
        parts = _gemma_attention(a, cfg) | {
            "self_attn.q_norm.weight": query_norm.scale.value,
            "self_attn.k_norm.weight": key_norm.scale.value,
            "mlp.gate_proj.weight": layer.mlp.gate_proj.kernel.value.T,
            "mlp.up_proj.weight": layer.mlp.up_proj.kernel.value.T,
            "mlp.down_proj.weight": layer.mlp.down_proj.kernel.value.T,
            "input_layernorm.weight": layer.pre_attention_norm.scale.value,
            "post_attention_layernorm.weight": layer.post_attention_norm.scale.value,
            "pre_feedforward_layernorm.weight": layer.pre_ffw_norm.scale.value,
            "post_feedforward_layernorm.weight": layer.post_ffw_norm.scale.value,
        }
        sd |= {pre + k: v for k, v in parts.items()}
    return {name: np.ascontiguousarray(hosts.host_value(x)) for name, x in sd.items()}


# --- Gemma2 (2B): checked against transformers.Gemma2ForCausalLM (tests/test_gemma2.py). tunix's
# Gemma2 fixes some things HF can vary: queries scaled by head_dim**-0.5, RoPE base 10,000, norm eps
# 1e-6, tanh GELU, tied embeddings; a config.json asking for anything else is refused.

_G2_DEFAULTS = {  # transformers' Gemma2Config defaults: what a field left out of config.json means
    "vocab_size": 256000,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh",
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
    "rope_theta": 10000.0,
    "attention_bias": False,
    "query_pre_attn_scalar": 256,
    "sliding_window": 4096,
    "final_logit_softcapping": 30.0,
    "attn_logit_softcapping": 50.0,
}


def _g2_config_from_hf(c: dict[str, Any], dtype: Any):
    """The tunix Gemma2 config (no dtype field: the loader casts) of a HF Gemma2 ``config.json``."""
    from tunix.models.gemma import model as g2

    g = {**_G2_DEFAULTS, **c}
    if "hidden_activation" not in c and c.get("hidden_act"):
        g["hidden_activation"] = c["hidden_act"]
    head_dim = g.get("head_dim") or g["hidden_size"] // g["num_attention_heads"]
    problems = [
        why
        for bad, why in (
            (
                g["query_pre_attn_scalar"] != head_dim,
                f"query_pre_attn_scalar {g['query_pre_attn_scalar']} != head_dim {head_dim}",
            ),
            (
                float(g["rope_theta"]) != 10000.0 or c.get("rope_scaling"),
                "RoPE other than base 10000 unscaled",
            ),
            (
                g["hidden_activation"] not in ("gelu_pytorch_tanh", "gelu_tanh"),
                f"activation {g['hidden_activation']}",
            ),
            (abs(float(g["rms_norm_eps"]) - 1e-6) > 1e-12, f"rms_norm_eps {g['rms_norm_eps']}"),
            (
                not g["tie_word_embeddings"] or g["attention_bias"],
                "untied embeddings or attention biases",
            ),
        )
        if bad
    ]
    if problems:
        raise ValueError(
            f"config.json describes a Gemma2 tunix cannot build: {'; '.join(problems)}"
        )
    n = g["num_hidden_layers"]
    layer_types = c.get("layer_types") or [
        "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)
    ]
    types = tuple(
        g2.AttentionType.LOCAL_SLIDING if t == "sliding_attention" else g2.AttentionType.GLOBAL
        for t in layer_types
    )
    return g2.ModelConfig(
        num_layers=n,
        num_embed=g["vocab_size"],
        embed_dim=g["hidden_size"],
        hidden_dim=g["intermediate_size"],
        num_heads=g["num_attention_heads"],
        head_dim=head_dim,
        num_kv_heads=g["num_key_value_heads"],
        final_logit_softcap=g["final_logit_softcapping"],
        use_post_attn_norm=True,
        use_post_ffw_norm=True,
        attention_types=types,
        attn_logits_soft_cap=g["attn_logit_softcapping"],
        sliding_window_size=g["sliding_window"]
        if g2.AttentionType.LOCAL_SLIDING in types
        else None,
    )


def _g2_hf_config(
    cfg,
    *,
    dtype: str = "float32",
    eos_token_id: int | list[int] = 1,
    pad_token_id: int = 0,
    bos_token_id: int = 2,
) -> dict[str, Any]:
    from tunix.models.gemma import model as g2

    types = tuple(cfg.attention_types)
    if len(types) < cfg.num_layers:  # tunix zips them with range(num_layers) and would drop layers
        raise ValueError(f"attention_types has {len(types)} entries for {cfg.num_layers} layers")
    layer_types = [
        "sliding_attention" if t == g2.AttentionType.LOCAL_SLIDING else "full_attention"
        for t in types[: cfg.num_layers]
    ]
    return {
        "architectures": ["Gemma2ForCausalLM"],
        "model_type": "gemma2",
        "vocab_size": cfg.num_embed,
        "hidden_size": cfg.embed_dim,
        "intermediate_size": cfg.hidden_dim,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        # tunix always scales by head_dim**-0.5 (HF default: 256)
        "query_pre_attn_scalar": cfg.head_dim,
        "attn_logit_softcapping": cfg.attn_logits_soft_cap,
        "final_logit_softcapping": cfg.final_logit_softcap,
        "sliding_window": cfg.sliding_window_size,
        "layer_types": layer_types,
        "hidden_activation": "gelu_pytorch_tanh",
        "hidden_act": "gelu_pytorch_tanh",
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "max_position_embeddings": 8192,
        "pad_token_id": pad_token_id,
        "bos_token_id": bos_token_id,
        "eos_token_id": eos_token_id,
        "torch_dtype": dtype,
        "dtype": dtype,
    }


def _g2_state_dict(model, cfg) -> dict[str, np.ndarray]:
    sd = {
        "model.embed_tokens.weight": model.embedder.input_embedding.value,
        "model.norm.weight": model.final_norm.scale.value,
    }
    for i, layer in enumerate(model.layers):
        pre = f"model.layers.{i}."
        parts = _gemma_attention(layer.attn, cfg) | {
            "mlp.gate_proj.weight": layer.mlp.gate_proj.kernel.value.T,
            "mlp.up_proj.weight": layer.mlp.up_proj.kernel.value.T,
            "mlp.down_proj.weight": layer.mlp.down_proj.kernel.value.T,
            "input_layernorm.weight": layer.pre_attention_norm.scale.value,
            # Gemma3: post_attention_norm
            "post_attention_layernorm.weight": layer.post_attn_norm.scale.value,
            "pre_feedforward_layernorm.weight": layer.pre_ffw_norm.scale.value,
            "post_feedforward_layernorm.weight": layer.post_ffw_norm.scale.value,
        }
        sd |= {pre + k: v for k, v in parts.items()}
    return {name: np.ascontiguousarray(hosts.host_value(x)) for name, x in sd.items()}


# --- Llama 3.x, Qwen2/2.5, Qwen3: checked against transformers' LlamaForCausalLM,
# Qwen2ForCausalLM and Qwen3ForCausalLM (tests/test_families.py). One decoder layout: pre-norm
# RMSNorm (weight w, not 1 + w), SiLU-gated MLP, grouped-query attention, RoPE by rotate-half.
# Qwen2 adds q/k/v biases, Qwen3 per-head q/k norms. tunix's Llama3 and Qwen3 leave the config's
# RoPE base unused (and tunix has no Llama 3.1 frequency scaling): _compat.config_rope fixes both.


def _rope_fields(c: dict[str, Any]) -> tuple[float, dict[str, Any] | None]:
    """(RoPE base, scaling or None) of a config.json in the legacy keys or transformers 5's
    ``rope_parameters``."""
    rope = dict(c.get("rope_parameters") or {})
    theta = c.get("rope_theta") or rope.pop("rope_theta", None) or 10_000.0
    scaling = c.get("rope_scaling") or rope
    kind = (scaling or {}).get("rope_type") or (scaling or {}).get("type") or "default"
    return float(theta), (None if kind == "default" else dict(scaling, rope_type=kind))


def _decoder_problems(c: dict[str, Any], family: str, *, rope_types: tuple[str, ...]) -> None:
    _, scaling = _rope_fields(c)
    problems = [
        why
        for bad, why in (
            (c.get("hidden_act", "silu") != "silu", f"activation {c.get('hidden_act')}"),
            (
                family != "qwen2" and c.get("attention_bias", False),
                "attention biases (only Qwen2 has them)",
            ),
            (c.get("mlp_bias", False), "MLP biases"),
            (
                scaling is not None and scaling["rope_type"] not in rope_types,
                f"RoPE scaling {scaling and scaling['rope_type']!r}",
            ),
            (c.get("use_sliding_window", False), "sliding-window attention"),
            (c.get("num_experts") or c.get("num_local_experts"), "mixture of experts"),
        )
        if bad
    ]
    if problems:
        raise ValueError(
            f"config.json describes a {family} tunix cannot build: {'; '.join(problems)}"
        )


def _decoder_fields(c: dict[str, Any]) -> dict[str, Any]:
    heads = c["num_attention_heads"]
    return {
        "num_layers": c["num_hidden_layers"],
        "vocab_size": c["vocab_size"],
        "embed_dim": c["hidden_size"],
        "hidden_dim": c["intermediate_size"],
        "num_heads": heads,
        "head_dim": c.get("head_dim") or c["hidden_size"] // heads,
        "num_kv_heads": c.get("num_key_value_heads") or heads,
        "rope_theta": _rope_fields(c)[0],
        "norm_eps": float(c.get("rms_norm_eps", 1e-6)),
    }


def _llama_config_from_hf(c: dict[str, Any], dtype: Any):
    """Llama 3.x (and every ``LlamaForCausalLM`` of that layout: SmolLM2, TinyLlama)."""
    del dtype  # tunix's Llama3 config has no dtype: the loader casts
    _decoder_problems(c, "llama3", rope_types=("llama3",))
    fields = _decoder_fields(c) | {"weight_tying": bool(c.get("tie_word_embeddings", False))}
    return _compat.llama3_config(fields, _rope_fields(c)[1])


def _qwen_config_from_hf(family: str) -> Callable[[dict[str, Any], Any], Any]:
    def build(c: dict[str, Any], dtype: Any):
        _decoder_problems(c, family, rope_types=())
        cfg = get(family).config_cls()
        tied = bool(c.get("tie_word_embeddings", False))
        return cfg(**_decoder_fields(c), use_tied_embedding=tied, param_dtype=dtype)

    return build


_DECODER_HF = {
    "llama3": ("LlamaForCausalLM", "llama"),
    "qwen2": ("Qwen2ForCausalLM", "qwen2"),
    "qwen3": ("Qwen3ForCausalLM", "qwen3"),
}


def _tied(cfg) -> bool:
    return bool(getattr(cfg, "weight_tying", getattr(cfg, "use_tied_embedding", False)))


def _decoder_hf_config(family: str) -> Callable[..., dict[str, Any]]:
    def hf_config(
        cfg,
        *,
        dtype: str = "float32",
        eos_token_id: int | list[int] = 1,
        pad_token_id: int = 0,
        bos_token_id: int | None = 2,
    ) -> dict[str, Any]:
        arch, model_type = _DECODER_HF[family]
        scaling = getattr(cfg, "rope_scaling", None)
        return {
            "architectures": [arch],
            "model_type": model_type,
            "vocab_size": cfg.vocab_size,
            "hidden_size": cfg.embed_dim,
            "intermediate_size": cfg.hidden_dim,
            "num_hidden_layers": cfg.num_layers,
            "num_attention_heads": cfg.num_heads,
            "num_key_value_heads": cfg.num_kv_heads,
            "head_dim": cfg.head_dim,
            "hidden_act": "silu",
            "rms_norm_eps": float(cfg.norm_eps),
            "rope_theta": float(cfg.rope_theta),
            "rope_scaling": dict(scaling) if scaling else None,
            "tie_word_embeddings": _tied(cfg),
            "attention_bias": family == "qwen2",
            "mlp_bias": False,
            "use_sliding_window": False,
            "attention_dropout": 0.0,
            "max_position_embeddings": 32768,
            "pad_token_id": pad_token_id,
            "bos_token_id": bos_token_id,
            "eos_token_id": eos_token_id,
            "torch_dtype": dtype,
            "dtype": dtype,
        }

    return hf_config


def _decoder_shapes(family: str) -> Callable[[Any], dict[str, tuple[int, ...]]]:
    def shapes(cfg) -> dict[str, tuple[int, ...]]:
        n, k, h, d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.embed_dim
        per_layer = _layer_shapes(cfg)
        if family == "qwen2":
            per_layer |= {
                f"self_attn.{p}_proj.bias": (m * h,) for p, m in zip("qkv", (n, k, k), strict=True)
            }
        if family == "qwen3":
            per_layer |= {"self_attn.q_norm.weight": (h,), "self_attn.k_norm.weight": (h,)}
        out = {"model.embed_tokens.weight": (cfg.vocab_size, d), "model.norm.weight": (d,)}
        if not _tied(cfg):
            out["lm_head.weight"] = (cfg.vocab_size, d)
        for i in range(cfg.num_layers):
            out.update({f"model.layers.{i}.{name}": s for name, s in per_layer.items()})
        return out

    return shapes


def _decoder_state_dict(model, cfg) -> dict[str, np.ndarray]:
    d = cfg.embed_dim
    sd = {
        "model.embed_tokens.weight": model.embedder.input_embedding.value,
        "model.norm.weight": model.final_norm.w.value,
    }
    if not _tied(cfg):
        sd["lm_head.weight"] = model.lm_head.w.value.T
    for i, layer in enumerate(model.layers):
        a = layer.attn
        parts = {
            "self_attn.q_proj.weight": a.q_proj.w.value.reshape(d, -1).T,
            "self_attn.k_proj.weight": a.k_proj.w.value.reshape(d, -1).T,
            "self_attn.v_proj.weight": a.v_proj.w.value.reshape(d, -1).T,
            "self_attn.o_proj.weight": a.o_proj.w.value.reshape(-1, d).T,
            "mlp.gate_proj.weight": layer.mlp.gate_proj.kernel.value.T,
            "mlp.up_proj.weight": layer.mlp.up_proj.kernel.value.T,
            "mlp.down_proj.weight": layer.mlp.down_proj.kernel.value.T,
            "input_layernorm.weight": layer.input_layernorm.w.value,
            "post_attention_layernorm.weight": layer.post_attention_layernorm.w.value,
        }
        if hasattr(a, "q_bias"):
            parts |= {f"self_attn.{p}_proj.bias": getattr(a, f"{p}_bias").value for p in "qkv"}
        if hasattr(a, "q_norm"):
            parts |= {"self_attn.q_norm.weight": a.q_norm.w.value}
            parts |= {"self_attn.k_norm.weight": a.k_norm.w.value}
        sd |= {f"model.layers.{i}.{k}": v for k, v in parts.items()}
    return {name: np.ascontiguousarray(hosts.host_value(x)) for name, x in sd.items()}


_DECODER_LORA = ".*q_proj|.*k_proj|.*v_proj|.*o_proj|.*gate_proj|.*up_proj|.*down_proj"


def _decoder_family(
    module: str,
    model_class: str,
    chat: ChatTemplate,
    *patches: Callable[[str], None],
    name: str | None = None,
) -> Family:
    """A Llama 3 / Qwen family: tunix's ``models.<module>``, its HF layout and LoRA targets."""
    return Family(
        name=name or module,
        model_module=f"tunix.models.{module}.model",
        model_class=model_class,
        loader_module=f"tunix.models.{module}.params",
        architecture=_DECODER_HF[module][0],
        lora_modules=_DECODER_LORA,
        config_from_hf=_llama_config_from_hf
        if module == "llama3"
        else _qwen_config_from_hf(module),
        hf_config=_decoder_hf_config(module),
        hf_shapes=_decoder_shapes(module),
        hf_state_dict=_decoder_state_dict,
        chat=chat,
        patches=patches,
    )


_GEMMA_LORA = (
    ".*q_einsum|.*kv_einsum|.*qkv_einsum|.*attn_vec_einsum|.*gate_proj|.*up_proj|.*down_proj"
)

FAMILIES: dict[str, Family] = {
    "gemma3": Family(
        name="gemma3",
        model_module="tunix.models.gemma3.model",
        model_class="Gemma3",
        loader_module="tunix.models.gemma3.params_safetensors",
        architecture="Gemma3ForCausalLM",
        lora_modules=_GEMMA_LORA,
        config_from_hf=_g3_config_from_hf,
        hf_config=_g3_hf_config,
        hf_shapes=lambda cfg: _gemma_layer_shapes(cfg, qk_norm=True),
        hf_state_dict=_g3_state_dict,
    ),
    "gemma2": Family(
        name="gemma2",
        model_module="tunix.models.gemma.model",
        model_class="Gemma",
        loader_module="tunix.models.gemma.params_safetensors",
        architecture="Gemma2ForCausalLM",
        lora_modules=_GEMMA_LORA,
        config_from_hf=_g2_config_from_hf,
        hf_config=_g2_hf_config,
        hf_shapes=lambda cfg: _gemma_layer_shapes(cfg, qk_norm=False),
        hf_state_dict=_g2_state_dict,
    ),
    "llama3": _decoder_family("llama3", "Llama3", LLAMA3_CHAT, _compat.config_rope),
    # A Llama-architecture model that speaks ChatML (SmolLM2): tunix's Llama3, Qwen's turns.
    "llama-chatml": _decoder_family(
        "llama3", "Llama3", CHATML, _compat.config_rope, name="llama-chatml"
    ),
    "qwen2": _decoder_family("qwen2", "Qwen2", CHATML, _compat.quantizable_einsum),
    "qwen3": _decoder_family(
        "qwen3", "Qwen3", CHATML, _compat.config_rope, _compat.quantizable_einsum
    ),
}


def get(name: str) -> Family:
    """The :class:`Family` called ``name``; an unknown name lists the known ones."""
    if name not in FAMILIES:
        raise UnknownFamilyError(
            f"Unknown model family {name!r}. Known families: {', '.join(sorted(FAMILIES))} "
            "(a new family is one entry in tunixkit.families.FAMILIES)."
        )
    return FAMILIES[name]
