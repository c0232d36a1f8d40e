"""Load a model and its tokenizer with one call, for every profile; add LoRA or QLoRA.

``load_model("gemma-3-1b-it", source="kaggle", mesh=mesh)`` and ``load_model("tiny-gemma3-sft")``
take the same path: find a Hugging Face-layout folder (``config.json``, ``*.safetensors``,
``tokenizer.model``), validate its tensors against the tunix config, load it with tunix's
safetensors loader onto the mesh, and read the tokenizer from the folder itself (never ``gs://``).
The smoke models are written to that layout in a local cache first, so the smoke profile runs the
real loader too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from tunixkit import checkpoints, runtime

LORA_MODULES = {
    "gemma3": ".*q_einsum|.*kv_einsum|.*qkv_einsum|.*attn_vec_einsum|.*gate_proj|.*up_proj|.*down_proj",
    "gemma2": ".*q_einsum|.*kv_einsum|.*qkv_einsum|.*attn_vec_einsum|.*gate_proj|.*up_proj|.*down_proj",
}


class UnknownModelError(KeyError):
    """A model id that tunixkit has no recipe for."""

    def __str__(self) -> str:  # KeyError would print the repr
        return str(self.args[0])


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """Where a model comes from and how tunix builds it."""

    family: str  # "gemma3" or "gemma2"
    config: Callable[[], Any]  # -> tunix ModelConfig
    hf_repo: str | None = None
    kaggle_handle: str | None = None  # a Kaggle Models "transformers" variant (HF layout)
    smoke: bool = False  # built locally by tunixkit.testing


def _tiny_shape(model_id: str):
    from tunixkit import testing

    return testing.TINY_STUDENT if model_id == "tiny-gemma3-student" else testing.TINY_GEMMA3


def _tiny_config(model_id: str = "tiny-gemma3") -> Callable[[], Any]:
    def make():
        from tunixkit import testing

        return testing.gemma3_config(testing.load_tokenizer().GetPieceSize(), _tiny_shape(model_id))

    return make


def _g3(name: str) -> Callable[[], Any]:
    def make():
        from tunix.models.gemma3 import model as g3

        return getattr(g3.ModelConfig, name)()

    return make


def _g2() -> Any:
    from tunix.models.gemma import model as g2

    return g2.ModelConfig.gemma2_2b_it()


MODELS: dict[str, ModelSpec] = {
    "gemma-3-1b-it": ModelSpec(family="gemma3", config=_g3("gemma3_1b_it"), hf_repo="google/gemma-3-1b-it",
                               kaggle_handle="google/gemma-3/transformers/gemma-3-1b-it"),
    "gemma-3-270m-it": ModelSpec(family="gemma3", config=_g3("gemma3_270m_it"), hf_repo="google/gemma-3-270m-it",
                                 kaggle_handle="google/gemma-3/transformers/gemma-3-270m-it"),
    "gemma-2-2b-it": ModelSpec(family="gemma2", config=_g2, hf_repo="google/gemma-2-2b-it",
                               kaggle_handle="google/gemma-2/transformers/gemma-2-2b-it"),
    "tiny-gemma3": ModelSpec(family="gemma3", config=_tiny_config(), smoke=True),
    "tiny-gemma3-sft": ModelSpec(family="gemma3", config=_tiny_config(), smoke=True),
    "tiny-gemma3-student": ModelSpec(family="gemma3", config=_tiny_config("tiny-gemma3-student"), smoke=True),
}  # fmt: skip


def get_spec(model_id: str) -> ModelSpec:
    """The :class:`ModelSpec` of ``model_id``; unknown ids list the supported ones."""
    if model_id not in MODELS:
        raise UnknownModelError(
            f"Unknown model id {model_id!r}. Supported: {', '.join(sorted(MODELS))} "
            f"(or pass path=<folder with config.json, *.safetensors, tokenizer files>)."
        )
    return MODELS[model_id]


@dataclasses.dataclass
class LoadedModel:
    """A tunix model with its tokenizer, config and where it came from."""

    model: Any
    tokenizer: Any
    config: Any
    model_id: str
    path: pathlib.Path
    family: str

    @property
    def eos_ids(self) -> list[int]:
        """Stop tokens: EOS and ``<end_of_turn>`` (Gemma turns end there; TUNIX_NOTES pitfall 5)."""
        return stop_token_ids(self.tokenizer)


def cache_dir() -> pathlib.Path:
    """``$TUNIXKIT_CACHE`` or ``~/.cache/tunixkit``: where the smoke models are written."""
    return pathlib.Path(
        os.environ.get("TUNIXKIT_CACHE", pathlib.Path.home() / ".cache" / "tunixkit")
    )


def load_tokenizer(folder: str | pathlib.Path):
    """The tokenizer from a model folder: ``tokenizer.model`` (SentencePiece) or ``tokenizer.json``."""
    folder = pathlib.Path(folder)
    if (folder / "tokenizer.model").is_file():
        import sentencepiece as spm

        return spm.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    if (folder / "tokenizer.json").is_file():
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(folder))
    raise FileNotFoundError(f"{folder}: no tokenizer.model or tokenizer.json next to the weights")


def stop_token_ids(tokenizer) -> list[int]:
    """EOS plus ``<end_of_turn>`` ids for a SentencePiece or Hugging Face tokenizer."""
    if hasattr(tokenizer, "PieceToId"):
        ids = [tokenizer.eos_id(), tokenizer.PieceToId("<end_of_turn>")]
        ids = [i for i in ids if i != tokenizer.unk_id()]
    else:
        ids = [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<end_of_turn>")]
        ids = [i for i in ids if i is not None and i != tokenizer.unk_token_id]
    return sorted(set(ids))


def _download(spec: ModelSpec, model_id: str, source: str) -> pathlib.Path:
    env = runtime.detect_environment()
    if source == "auto":
        source = "kaggle" if env == "kaggle" else "hf"
    if source == "hf":
        token = runtime.get_secret(
            "HF_TOKEN", purpose=f"downloading {spec.hf_repo} from Hugging Face"
        )
        from huggingface_hub import snapshot_download

        return pathlib.Path(
            snapshot_download(
                spec.hf_repo, token=token, allow_patterns=["*.json", "*.safetensors", "tokenizer*"]
            )
        )
    if source == "kaggle":
        if env != "kaggle" and not runtime.get_secret("KAGGLE_API_TOKEN", required=False):
            runtime.get_secret(
                "KAGGLE_USERNAME", purpose=f"downloading {spec.kaggle_handle} from Kaggle"
            )
            runtime.get_secret(
                "KAGGLE_KEY", purpose=f"downloading {spec.kaggle_handle} from Kaggle"
            )
        import kagglehub

        return pathlib.Path(kagglehub.model_download(spec.kaggle_handle))
    raise ValueError(
        f"unknown source {source!r} for {model_id}; expected 'auto', 'hf', 'kaggle' or 'local'"
    )


def materialize_smoke_model(model_id: str) -> pathlib.Path:
    """Write (once, cached) the smoke model ``model_id`` in the HF layout and return its folder."""
    from tunixkit import testing

    tok = testing.tokenizer_path()
    shape = _tiny_shape(model_id)
    key = hashlib.sha256(tok.read_bytes() + repr(shape).encode()).hexdigest()[:10]
    if model_id == "tiny-gemma3-sft":
        key += "-" + testing.WARM_START.key()
    else:
        key += f"-e{testing.TINY_EMBEDDING_STD:g}"
    folder = cache_dir() / "models" / f"{model_id}-{key}"
    if (folder / checkpoints.WEIGHTS_FILE).is_file():
        return folder
    cfg = get_spec(model_id).config()
    if model_id == "tiny-gemma3-sft":
        model = testing.warm_start(cfg)
    else:
        model = testing.random_gemma3(cfg, embedding_std=testing.TINY_EMBEDDING_STD)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(dir=folder.parent))
    sp = testing.load_tokenizer()
    checkpoints.write_hf_checkpoint(
        model,
        cfg,
        tmp,
        extra_files={"tokenizer.model": tok},
        eos_token_id=stop_token_ids(sp),
        pad_token_id=sp.pad_id(),
        bos_token_id=sp.bos_id(),
    )
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)  # atomic: a killed run leaves no half-written model behind
    return folder


def load_model(
    model_id: str,
    *,
    source: str = "auto",
    path: str | pathlib.Path | None = None,
    mesh=None,
    dtype=None,
    verbose: bool = True,
) -> LoadedModel:
    """Load ``model_id`` (see :data:`MODELS`) onto ``mesh`` with its tokenizer.

    ``source``: ``"auto"`` (Kaggle on Kaggle, else Hugging Face), ``"hf"``, ``"kaggle"``, or
    ``"local"`` with ``path``. Smoke models ignore ``source``. For a local Gemma3 folder, its own
    ``config.json`` gives the shape (an exported fine-tune loads as itself); downloads use tunix's
    preset for ``model_id``. ``dtype`` (e.g. ``jnp.bfloat16``) sets the parameter dtype.
    """
    import jax.numpy as jnp

    spec = get_spec(model_id)
    if path is not None or source == "local":
        if path is None:
            raise ValueError("source='local' needs path=<model folder>")
        folder = pathlib.Path(path).expanduser()
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: model folder not found")
    elif spec.smoke:
        folder = materialize_smoke_model(model_id)
    else:
        folder = _download(spec, model_id, source)
    cfg = spec.config()
    if (
        (path is not None or spec.smoke)
        and spec.family == "gemma3"
        and (folder / checkpoints.CONFIG_FILE).is_file()
    ):
        cfg = checkpoints.gemma3_config_from_hf(
            folder, dtype=cfg.param_dtype
        )  # the folder knows its shape
    if dtype is not None:
        cfg = dataclasses.replace(cfg, param_dtype=dtype)
    if spec.family == "gemma3":
        from tunix.models.gemma3 import params_safetensors as loader

        checkpoints.validate_hf_checkpoint(folder, cfg)
    else:
        from tunix.models.gemma import params_safetensors as loader
    model = loader.create_model_from_safe_tensors(
        str(folder), cfg, mesh=mesh, dtype=dtype or cfg.param_dtype or jnp.bfloat16
    )
    loaded = LoadedModel(
        model=model,
        tokenizer=load_tokenizer(folder),
        config=cfg,
        model_id=model_id,
        path=folder,
        family=spec.family,
    )
    if verbose:
        print(f"loaded {model_id} from {folder}: {describe(model)}")
    return loaded


def reference(ref: str, *, base_id: str, source: str = "auto") -> dict[str, Any]:
    """``load_model`` keyword arguments for ``ref``: a model id from :data:`MODELS`, or a local
    HF-layout folder (then ``base_id`` says which family and tokenizer rules apply).

    >>> reference("gemma-3-1b-it", base_id="gemma-3-1b-it")
    {'model_id': 'gemma-3-1b-it', 'source': 'auto'}
    >>> reference("runs/x/export/hf", base_id="gemma-3-1b-it")
    {'model_id': 'gemma-3-1b-it', 'path': 'runs/x/export/hf'}
    """
    if ref in MODELS:
        return {"model_id": ref, "source": source}
    return {"model_id": base_id, "path": ref}


def count_params(model) -> tuple[int, int]:
    """(trainable LoRA params, all params) of an nnx model."""
    import jax
    from flax import nnx

    def n(state) -> int:
        return int(sum(x.size for x in jax.tree.leaves(state)))

    return n(nnx.state(model, nnx.LoRAParam)), n(nnx.state(model, nnx.Param))


def footprint(model) -> dict[str, int]:
    """``{"params", "trainable", "bytes"}``: parameter count, LoRA parameter count (0 without LoRA)
    and the bytes all parameters occupy (nf4/int4 weights count half a byte)."""
    import jax
    from flax import nnx

    leaves = jax.tree.leaves(nnx.state(model, nnx.Param))
    nbytes = sum(x.size * jax.dtypes.itemsize_bits(x.dtype) // 8 for x in leaves)
    lora, total = count_params(model)
    return {"params": total, "trainable": lora, "bytes": int(nbytes)}


def describe(model) -> str:
    """ "1.2 million params (bf16)" or, with LoRA, the trainable share as well."""
    import humanize
    import jax
    from flax import nnx

    lora, total = count_params(model)
    dtypes = sorted({str(x.dtype) for x in jax.tree.leaves(nnx.state(model, nnx.Param))})
    text = f"{humanize.intword(total)} params ({'/'.join(dtypes)})"
    if lora:
        text += f", of which {humanize.intword(lora)} trainable LoRA ({100 * lora / total:.2f}%)"
    return text


def shard(model, mesh):
    """Place an nnx model's state on ``mesh`` following its own partition specs (in place)."""
    import jax
    from flax import nnx

    state = nnx.state(model)
    nnx.update(model, jax.device_put(state, nnx.get_named_sharding(state, mesh)))
    return model


def apply_lora(
    model,
    *,
    family: str = "gemma3",
    rank: int = 64,
    alpha: float = 64.0,
    qlora: bool = False,
    tile_size: int = 128,
    mesh=None,
    seed: int = 0,
    verbose: bool = True,
):
    """Add LoRA (or nf4 QLoRA) adapters to attention and MLP with qwix, *on the same object*.

    The returned model shares its frozen backbone with ``model``, so it can serve as the reference
    model of GRPO/DPO without a second copy (TUNIX_NOTES pitfall 4). With ``mesh``, the adapters
    are sharded too.
    """
    import qwix
    from flax import nnx

    if mesh is not None:
        shard(model, mesh)
    kw = {"weight_qtype": "nf4", "tile_size": tile_size} if qlora else {}
    provider = qwix.LoraProvider(module_path=LORA_MODULES[family], rank=rank, alpha=alpha, **kw)
    lora_model = qwix.apply_lora_to_model(
        model, provider, rngs=nnx.Rngs(params=seed), **model.get_model_input()
    )
    if mesh is not None:
        shard(lora_model, mesh)
    if verbose:
        print(
            f"{'QLoRA (nf4)' if qlora else 'LoRA'} rank {rank}, alpha {alpha:g}: {describe(lora_model)}"
        )
    return lora_model


def export(
    model,
    base: LoadedModel,
    out_dir: str | pathlib.Path,
    *,
    lora_rank: int | None = None,
    lora_alpha: float | None = None,
    mesh=None,
) -> dict[str, pathlib.Path]:
    """Export a fine-tuned Gemma3 two ways: ``out_dir/hf`` (HF layout, loads in tunix and
    ``transformers``) and ``out_dir/orbax`` (params only, for Kaggle Models).

    With ``lora_rank``, the adapters are merged into ``base``'s checkpoint by tunix's merger and the
    merged folder is loaded back for the Orbax export; a fully fine-tuned model is written directly.
    The tokenizer files of ``base`` are copied alongside.
    """
    import json

    if base.family != "gemma3":
        raise NotImplementedError(f"export supports Gemma3 models, not {base.family}")
    out = pathlib.Path(out_dir)
    hf_dir = out / "hf"
    if lora_rank:
        checkpoints.export_merged(
            model, base.path, hf_dir, rank=lora_rank, alpha=float(lora_alpha or lora_rank)
        )
        plain = load_model(base.model_id, path=hf_dir, mesh=mesh, dtype=base.config.param_dtype,
                           verbose=False).model  # fmt: skip
    else:
        src = json.loads((base.path / checkpoints.CONFIG_FILE).read_text())
        ids = {k: src[k] for k in ("eos_token_id", "pad_token_id", "bos_token_id") if k in src}
        extras = {p.name: p for p in base.path.iterdir()
                  if p.is_file() and p.suffix != ".safetensors" and p.name not in
                  (checkpoints.CONFIG_FILE, checkpoints.INDEX_FILE)}  # fmt: skip
        checkpoints.write_hf_checkpoint(model, base.config, hf_dir, extra_files=extras, **ids)
        plain = model
    orbax_dir = checkpoints.export_orbax(plain, out / "orbax")
    return {"hf": hf_dir, "orbax": orbax_dir}
