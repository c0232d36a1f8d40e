"""Checkpoints on disk: the Hugging Face Gemma3 layout, validation, Orbax save/restore and export.

- :func:`write_hf_checkpoint`: a tunix Gemma3 as ``config.json`` + ``model.safetensors`` (or shards
  with ``model.safetensors.index.json``), loadable by tunix's safetensors loader *and* by
  ``transformers.Gemma3ForCausalLM`` (the config fields follow ``shared/reference/xcheck``).
- :func:`validate_hf_checkpoint`: before loading, every expected tensor is present with the shape the
  config implies; otherwise a clear error naming the tensor and both shapes.
- :func:`save_state` / :func:`restore_state`: Orbax save/restore of a model's full or LoRA-only state.
- :func:`export_merged` (LoRA merged into the base, HF layout, via tunix's merger) and
  :func:`export_orbax` (Orbax params for Kaggle Models, which forbid safetensors).
"""

from __future__ import annotations

import itertools
import json
import pathlib
import shutil
import struct
from collections.abc import Mapping

import numpy as np

CONFIG_FILE, WEIGHTS_FILE, INDEX_FILE = (
    "config.json",
    "model.safetensors",
    "model.safetensors.index.json",
)


class CheckpointError(ValueError):
    """A checkpoint on disk does not match what its config says."""


def hf_config(
    cfg,
    *,
    dtype: str = "float32",
    eos_token_id: int | list[int] = 1,
    pad_token_id: int = 0,
    bos_token_id: int = 2,
) -> dict:
    """tunix ``gemma3.ModelConfig`` -> HF ``Gemma3TextConfig`` dict (fields verified in xcheck)."""
    from tunix.models.gemma3 import model as g3

    pattern = itertools.cycle(g3.GEMMA3_ATTENTION_PATTERN)
    layer_types = [
        "sliding_attention" if t == g3.AttentionType.LOCAL_SLIDING else "full_attention"
        for _, t in zip(range(cfg.num_layers), pattern, strict=False)
    ]
    qn = g3.QueryPreAttentionNormalisation
    scalar = (
        cfg.head_dim
        if cfg.query_pre_attn_norm == qn.BY_ONE_OVER_SQRT_HEAD_DIM
        else cfg.embed_dim // cfg.num_heads
    )
    if cfg.local_scale_factor != 1.0:
        raise NotImplementedError("HF legacy Gemma3 keys cannot express a local RoPE scale factor")
    return {
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
        "vocab_size": cfg.num_embed, "hidden_size": cfg.embed_dim, "intermediate_size": cfg.hidden_dim,
        "num_hidden_layers": cfg.num_layers, "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads, "head_dim": cfg.head_dim,
        "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6,
        "query_pre_attn_scalar": scalar, "sliding_window": cfg.sliding_window_size,
        "layer_types": layer_types, "sliding_window_pattern": len(g3.GEMMA3_ATTENTION_PATTERN),
        "final_logit_softcapping": None, "attn_logit_softcapping": None, "tie_word_embeddings": True,
        "attention_bias": False, "attention_dropout": 0.0, "max_position_embeddings": 32768,
        "rope_theta": float(cfg.global_base_frequency), "rope_local_base_freq": float(cfg.local_base_frequency),
        "rope_scaling": None if cfg.global_scale_factor == 1.0 else {"rope_type": "linear", "factor": float(cfg.global_scale_factor)},
        "pad_token_id": pad_token_id, "bos_token_id": bos_token_id, "eos_token_id": eos_token_id,
        "torch_dtype": dtype, "dtype": dtype,
    }  # fmt: skip


def expected_hf_shapes(cfg) -> dict[str, tuple[int, ...]]:
    """Every tensor a text-only HF Gemma3 checkpoint holds for ``cfg``, with its shape."""
    n, k, h, d, f = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.embed_dim, cfg.hidden_dim
    shapes = {"model.embed_tokens.weight": (cfg.num_embed, d), "model.norm.weight": (d,)}
    per_layer = {
        "self_attn.q_proj.weight": (n * h, d), "self_attn.k_proj.weight": (k * h, d),
        "self_attn.v_proj.weight": (k * h, d), "self_attn.o_proj.weight": (d, n * h),
        "self_attn.q_norm.weight": (h,), "self_attn.k_norm.weight": (h,),
        "mlp.gate_proj.weight": (f, d), "mlp.up_proj.weight": (f, d), "mlp.down_proj.weight": (d, f),
        "input_layernorm.weight": (d,), "post_attention_layernorm.weight": (d,),
        "pre_feedforward_layernorm.weight": (d,), "post_feedforward_layernorm.weight": (d,),
    }  # fmt: skip
    for i in range(cfg.num_layers):
        shapes.update({f"model.layers.{i}.{name}": s for name, s in per_layer.items()})
    return shapes


def gemma3_config_from_hf(folder: str | pathlib.Path, *, dtype=None):
    """The tunix ``gemma3.ModelConfig`` a HF ``config.json`` describes (the inverse of :func:`hf_config`)."""
    import jax.numpy as jnp
    from tunix.models.gemma3 import model as g3

    path = pathlib.Path(folder) / CONFIG_FILE
    try:
        c = json.loads(path.read_text())
        c = c.get("text_config", c)  # multimodal configs nest the text model
        rope = c.get("rope_parameters") or {}
        global_theta = c.get("rope_theta") or rope.get("full_attention", {}).get(
            "rope_theta", 1_000_000
        )
        local_theta = c.get("rope_local_base_freq") or rope.get("sliding_attention", {}).get(
            "rope_theta", 10_000
        )
        scaling = c.get("rope_scaling") or rope.get("full_attention") or {}
        qn = g3.QueryPreAttentionNormalisation
        norm = (
            qn.BY_ONE_OVER_SQRT_HEAD_DIM
            if c.get("query_pre_attn_scalar", c["head_dim"]) == c["head_dim"]
            else qn.BY_ONE_OVER_SQRT_EMBED_DIM_DIV_NUM_HEADS
        )
        return g3.ModelConfig(
            num_layers=c["num_hidden_layers"], num_embed=c["vocab_size"], embed_dim=c["hidden_size"],
            hidden_dim=c["intermediate_size"], num_heads=c["num_attention_heads"], head_dim=c["head_dim"],
            num_kv_heads=c["num_key_value_heads"], sliding_window_size=c.get("sliding_window"),
            local_base_frequency=int(local_theta), global_base_frequency=int(global_theta),
            global_scale_factor=float(scaling.get("factor", 1.0)) if scaling.get("rope_type") == "linear" else 1.0,
            query_pre_attn_norm=norm, param_dtype=dtype or jnp.bfloat16,
        )  # fmt: skip
    except KeyError as e:
        raise CheckpointError(f"{path}: missing field {e} needed to build a Gemma3 config") from e


def to_hf_state_dict(model, cfg) -> dict[str, np.ndarray]:
    """tunix Gemma3 weights -> HF tensor names and layouts (numpy, model dtype)."""
    n, h, d = cfg.num_heads, cfg.head_dim, cfg.embed_dim
    sd = {"model.embed_tokens.weight": model.embedder.input_embedding.value,
          "model.norm.weight": model.final_norm.scale.value}  # fmt: skip
    for i, layer in enumerate(model.layers):
        a, pre = layer.attn, f"model.layers.{i}."
        if a.use_qkv_einsum:
            q, k, v = (a.qkv_einsum.w.value[j] for j in range(3))  # (N, D, H) each
        else:
            q, k, v = a.q_einsum.w.value, a.kv_einsum.w.value[0], a.kv_einsum.w.value[1]
        sd |= {
            pre + "self_attn.q_proj.weight": q.transpose(0, 2, 1).reshape(n * h, d),
            pre + "self_attn.k_proj.weight": k.transpose(0, 2, 1).reshape(-1, d),
            pre + "self_attn.v_proj.weight": v.transpose(0, 2, 1).reshape(-1, d),
            pre + "self_attn.o_proj.weight": a.attn_vec_einsum.w.value.reshape(n * h, d).T,
            pre + "self_attn.q_norm.weight": a._query_norm.scale.value,
            pre + "self_attn.k_norm.weight": a._key_norm.scale.value,
            pre + "mlp.gate_proj.weight": layer.mlp.gate_proj.kernel.value.T,
            pre + "mlp.up_proj.weight": layer.mlp.up_proj.kernel.value.T,
            pre + "mlp.down_proj.weight": layer.mlp.down_proj.kernel.value.T,
            pre + "input_layernorm.weight": layer.pre_attention_norm.scale.value,
            pre + "post_attention_layernorm.weight": layer.post_attention_norm.scale.value,
            pre + "pre_feedforward_layernorm.weight": layer.pre_ffw_norm.scale.value,
            pre + "post_feedforward_layernorm.weight": layer.post_ffw_norm.scale.value,
        }
    return {name: np.ascontiguousarray(np.asarray(x)) for name, x in sd.items()}


def write_hf_checkpoint(
    model,
    cfg,
    out_dir: str | pathlib.Path,
    *,
    shards: int = 1,
    extra_files: Mapping[str, str | pathlib.Path] = (),
    **config_kw,
) -> pathlib.Path:
    """Write ``model`` in the HF Gemma3 layout; ``shards > 1`` writes ``model-0000i-of-0000n`` + index."""
    import safetensors.numpy as stn

    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sd = to_hf_state_dict(model, cfg)
    dtype = str(next(iter(sd.values())).dtype)
    (out / CONFIG_FILE).write_text(json.dumps(hf_config(cfg, dtype=dtype, **config_kw), indent=1))
    if shards == 1:
        stn.save_file(sd, str(out / WEIGHTS_FILE), metadata={"format": "pt"})
    else:
        names = list(sd)
        groups = [names[i::shards] for i in range(shards)]
        weight_map = {}
        for i, group in enumerate(groups, start=1):
            fname = f"model-{i:05d}-of-{shards:05d}.safetensors"
            stn.save_file({k: sd[k] for k in group}, str(out / fname), metadata={"format": "pt"})
            weight_map.update(dict.fromkeys(group, fname))
        total = int(sum(x.nbytes for x in sd.values()))
        (out / INDEX_FILE).write_text(
            json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1)
        )
    for name, src in dict(extra_files).items():
        shutil.copyfile(src, out / name)
    return out


def _safetensors_header(path: pathlib.Path) -> dict:
    with path.open("rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(size))


def validate_hf_checkpoint(model_dir: str | pathlib.Path, cfg) -> None:
    """Check a HF Gemma3 folder against ``cfg`` from the safetensors headers alone (no weights read)."""
    folder = pathlib.Path(model_dir)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise CheckpointError(
            f"{folder}: no *.safetensors files (expected {WEIGHTS_FILE} or model-*-of-*.safetensors)"
        )
    found: dict[str, tuple[tuple[int, ...], str]] = {}
    for file in files:
        for name, meta in _safetensors_header(file).items():
            if name != "__metadata__":
                found[name.removeprefix("language_model.")] = (tuple(meta["shape"]), file.name)
    expected = expected_hf_shapes(cfg)
    missing = [name for name in expected if name not in found]
    if missing:
        raise CheckpointError(f"{folder}: {len(missing)} tensor(s) missing, e.g. {missing[:3]}")
    extra = [
        n for n in found if n not in expected and n.startswith("model.") and "rotary_emb" not in n
    ]
    if extra:
        raise CheckpointError(
            f"{folder}: {len(extra)} tensor(s) the config does not expect, e.g. {extra[:3]} "
            f"(config: num_layers={cfg.num_layers}); is this checkpoint for another model size?"
        )
    for name, shape in expected.items():
        if found[name][0] != shape:
            raise CheckpointError(
                f"{folder / found[name][1]}: tensor {name!r} has shape {found[name][0]}, but the config "
                f"expects {shape} (num_layers={cfg.num_layers}, embed_dim={cfg.embed_dim}, vocab={cfg.num_embed})"
            )


def save_state(model, directory: str | pathlib.Path, *, lora_only: bool = False) -> pathlib.Path:
    """Save the model's full state (or only its LoRA params) with Orbax; returns the folder."""
    import orbax.checkpoint as ocp
    from flax import nnx

    directory = pathlib.Path(directory).resolve()
    if directory.exists():
        shutil.rmtree(directory)
    state = nnx.state(model, nnx.LoRAParam) if lora_only else nnx.state(model)
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(directory, state)
    checkpointer.wait_until_finished()
    return directory


def restore_state(model, directory: str | pathlib.Path, *, lora_only: bool = False):
    """Restore what :func:`save_state` wrote into ``model`` (in place; also returned)."""
    import jax
    import orbax.checkpoint as ocp
    from flax import nnx

    state = nnx.state(model, nnx.LoRAParam) if lora_only else nnx.state(model)
    target = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
    nnx.update(model, ocp.StandardCheckpointer().restore(pathlib.Path(directory).resolve(), target))
    return model


def export_merged(
    lora_model,
    base_dir: str | pathlib.Path,
    out_dir: str | pathlib.Path,
    *,
    rank: int,
    alpha: float,
) -> pathlib.Path:
    """Merge LoRA into the base HF checkpoint with tunix's merger; copies the tokenizer files too."""
    from tunix.models.gemma3 import params as g3params

    base_dir, out_dir = pathlib.Path(base_dir), pathlib.Path(out_dir)
    if len(list(base_dir.glob("*.safetensors"))) != 1:
        raise CheckpointError(
            f"{base_dir}: tunix's LoRA merger needs a single {WEIGHTS_FILE} (sharded bases are not supported)"
        )
    g3params.save_lora_merged_model_as_safetensors(
        local_model_path=str(base_dir),
        output_dir=str(out_dir),
        lora_model=lora_model,
        rank=rank,
        alpha=alpha,
    )
    return out_dir


def export_orbax(model, out_dir: str | pathlib.Path) -> pathlib.Path:
    """Orbax checkpoint of the (merged or plain) params, the layout Kaggle Models accept for tunix."""
    import jax
    from flax import nnx

    if jax.tree.leaves(nnx.state(model, nnx.LoRAParam)):
        raise CheckpointError(
            "export_orbax expects a model without LoRA: merge first (export_merged, then load it)"
        )
    return save_state(model, out_dir)
