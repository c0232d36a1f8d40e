"""Load a model and its tokenizer with one call, for every profile; add LoRA or QLoRA; export it.

``load_model("gemma-3-1b-it", source="kaggle", mesh=mesh)`` and ``load_model("tiny-gemma3-sft")``
take the same path: find a Hugging Face-layout folder (``config.json``, ``*.safetensors``, tokenizer
files), build the tunix config from its ``config.json`` (:mod:`tunixkit.families`), validate its
tensors against that config, load it with tunix's safetensors loader onto the mesh, and read the
tokenizer from the folder itself (never ``gs://``). The smoke models are written to that layout in
a local cache first (:func:`tunixkit.testing.materialize`), so the smoke profile runs the real
loader.

:data:`MODELS` is the registry: plain data, one row per model id. LoRA and QLoRA are added by
:func:`apply_lora` and folded back into a plain copy of the base weights by :func:`merge_lora` (any
family, fused QKV and sharded bases included). :func:`export` writes a trained model (LoRA merged)
as ``hf/`` (HF layout) and ``orbax/`` (params, tunix config and tokenizer: what Kaggle Models and
the competition's tunix loader take).
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import shutil
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from tunixkit import checkpoints, families, hosts, packaged, runtime
from tunixkit.tokenizer import Tokenizer
from tunixkit.tokenizer import load as load_tokenizer

if TYPE_CHECKING:
    import jax
    import qwix
    from flax import nnx
    from jax.sharding import Mesh, NamedSharding
    from jax.typing import DTypeLike
    from tunix.models.gemma.model import ModelConfig as Gemma2Config
    from tunix.models.gemma3.model import ModelConfig as Gemma3Config

__all__ = [
    "MODELS",
    "LoadedModel",
    "ModelSpec",
    "UnknownModelError",
    "apply_lora",
    "count_params",
    "export",
    "footprint",
    "get_spec",
    "load_args",
    "load_model",
    "merge_lora",
    "trainable",
]


class UnknownModelError(KeyError):
    """A model id that tunixkit has no entry for."""

    def __str__(self) -> str:  # KeyError would print the repr
        return str(self.args[0])


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """Where a model comes from and which family it belongs to."""

    family: str  # a tunixkit.families.FAMILIES key
    preset: str | None = None  # tunix ModelConfig classmethod with this model's shape
    hf_repo: str | None = None
    kaggle_handle: str | None = None  # a Kaggle Models "transformers" variant (HF layout)
    packaged: bool = False  # ships from the package index as GGUF (tunixkit.packaged.PACKAGES)
    smoke: bool = False  # built locally by tunixkit.testing


MODELS: dict[str, ModelSpec] = {
    "gemma-3-1b-it": ModelSpec(
        family="gemma3",
        preset="gemma3_1b_it",
        hf_repo="google/gemma-3-1b-it",
        kaggle_handle="google/gemma-3/transformers/gemma-3-1b-it",
    ),
    "gemma-3-270m-it": ModelSpec(
        family="gemma3",
        preset="gemma3_270m_it",
        hf_repo="google/gemma-3-270m-it",
        kaggle_handle="google/gemma-3/transformers/gemma-3-270m-it",
    ),
    "gemma-3-270m": ModelSpec(  # the base model: from the package index on any machine
        family="gemma3",
        preset="gemma3_270m",
        hf_repo="google/gemma-3-270m",
        kaggle_handle="google/gemma-3/transformers/gemma-3-270m",
        packaged=True,
    ),
    "gemma-2-2b-it": ModelSpec(
        family="gemma2",
        preset="gemma2_2b_it",
        hf_repo="google/gemma-2-2b-it",
        kaggle_handle="google/gemma-2/transformers/gemma-2-2b-it",
    ),
    # Llama 3.x and Qwen: 00-05 take them; 06 and 07 (the competition's pipeline, agentic GRPO)
    # are Gemma-only. Llama's weights are gated (accept Meta's license on Hugging Face first).
    "llama-3.2-1b-instruct": ModelSpec(
        family="llama3",
        preset="llama3p2_1b_instruct",
        hf_repo="meta-llama/Llama-3.2-1B-Instruct",
        kaggle_handle="metaresearch/llama-3.2/transformers/1b-instruct",
    ),
    "qwen2.5-0.5b-instruct": ModelSpec(
        family="qwen2", preset="qwen2p5_0p5b_instruct", hf_repo="Qwen/Qwen2.5-0.5B-Instruct"
    ),
    "qwen3-0.6b": ModelSpec(family="qwen3", preset="qwen3_0p6b", hf_repo="Qwen/Qwen3-0.6B"),
    "smollm2-135m-instruct": ModelSpec(  # a real Llama-architecture model on any machine
        family="llama-chatml", hf_repo="HuggingFaceTB/SmolLM2-135M-Instruct", packaged=True
    ),
    "tiny-gemma3": ModelSpec(family="gemma3", smoke=True),
    "tiny-gemma3-sft": ModelSpec(family="gemma3", smoke=True),
    "tiny-gemma3-student": ModelSpec(family="gemma3", smoke=True),
    "tiny-gemma2": ModelSpec(family="gemma2", smoke=True),
    "tiny-llama3": ModelSpec(family="llama3", smoke=True),
    "tiny-qwen2": ModelSpec(family="qwen2", smoke=True),
    "tiny-qwen3": ModelSpec(family="qwen3", smoke=True),
}


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
    tokenizer: Tokenizer
    config: Any
    model_id: str
    path: pathlib.Path
    family: str
    dtype: Any = None  # the parameter dtype it was loaded in
    preset: str | None = None  # the tunix ModelConfig preset of model_id, if any
    load_seconds: float = (
        0.0  # reading the weights onto the mesh (not downloading or building them)
    )

    @property
    def eos_ids(self) -> list[int]:
        """Stop tokens: EOS and the family's end-of-turn piece (see ``Tokenizer.stop_ids``)."""
        return self.tokenizer.stop_ids(self.chat.end_of_turn)

    @property
    def chat(self) -> families.ChatTemplate:
        """The family's chat template: ``loaded.chat.prompt(question, system_prompt)``."""
        return families.get(self.family).chat


def _download(spec: ModelSpec, model_id: str, source: str) -> pathlib.Path:
    env = runtime.detect_environment()
    if source == "auto" and spec.packaged:
        source = "package"  # the same weights on every machine, Kaggle included
    if source == "auto":
        source = "kaggle" if env == "kaggle" and spec.kaggle_handle else "hf"
    if source == "package":
        if not spec.packaged:
            raise ValueError(f"{model_id} is not shipped as a package; use source='hf' or 'kaggle'")
        return packaged.materialize(model_id)
    if source == "hf":
        token = runtime.get_secret(
            "HF_TOKEN", purpose=f"downloading {spec.hf_repo} from Hugging Face"
        )
        from huggingface_hub import snapshot_download

        patterns = ["*.json", "*.safetensors", "tokenizer*"]
        with runtime.downloading(
            f"{spec.hf_repo} from Hugging Face",
            "attach the model and set MODEL_PATH (path=) to its folder",
            consent=f"https://huggingface.co/{spec.hf_repo}",
        ):
            return pathlib.Path(
                snapshot_download(spec.hf_repo, token=token, allow_patterns=patterns)
            )
    if source == "kaggle" and not spec.kaggle_handle:
        raise ValueError(
            f"{model_id} has no Kaggle Models handle in tunixkit; use source='hf', or add the "
            "model to the notebook (Add Input) and set MODEL_PATH (path=) to its folder"
        )
    if source == "kaggle":
        if env != "kaggle" and not runtime.get_secret("KAGGLE_API_TOKEN", required=False):
            why = f"downloading {spec.kaggle_handle} from Kaggle"
            runtime.get_secret("KAGGLE_USERNAME", purpose=why)
            runtime.get_secret("KAGGLE_KEY", purpose=why)
        import kagglehub

        owner, model = spec.kaggle_handle.split("/")[:2]
        with runtime.downloading(
            f"{spec.kaggle_handle} from Kaggle",
            "add the model to the notebook (Add Input) and set MODEL_PATH (path=) to its folder",
            consent=f"https://www.kaggle.com/models/{owner}/{model}",
        ):
            return pathlib.Path(kagglehub.model_download(spec.kaggle_handle))
    raise ValueError(
        f"unknown source {source!r} for {model_id}; expected 'auto', 'hf', 'kaggle', 'package' "
        "or 'local'"
    )


def _dtype(spec: ModelSpec, dtype: Any, hf: dict[str, Any]) -> Any:
    """Explicit ``dtype``; else a smoke model's own (float32, from its ``config.json``); else
    bfloat16 (real checkpoints declare float32 or bfloat16; training runs in bfloat16)."""
    import jax.numpy as jnp

    if dtype is not None:
        return dtype
    name = (hf.get("torch_dtype") or hf.get("dtype")) if spec.smoke else None
    return jnp.dtype(name or "bfloat16")


def load_model(
    model_id: str,
    *,
    source: str = "auto",
    path: str | pathlib.Path | None = None,
    mesh: Mesh | None = None,
    dtype: DTypeLike | None = None,
    verbose: bool = True,
) -> LoadedModel:
    """Load ``model_id`` (see :data:`MODELS`) onto ``mesh`` with its tokenizer.

    ``source``: ``"auto"`` (a packaged model from its package; else Kaggle on Kaggle, else Hugging
    Face), ``"hf"``, ``"kaggle"``, ``"package"`` (:mod:`tunixkit.packaged`), or ``"local"`` with
    ``path`` (a folder in the HF layout, e.g. an export; ``model_id`` then names
    its family). Smoke models ignore ``source``. The folder's ``config.json`` gives the shape;
    ``dtype`` (e.g. ``jnp.bfloat16``) overrides the parameter dtype it declares.
    """
    spec = get_spec(model_id)
    if path is not None or source == "local":
        if path is None:
            raise ValueError("source='local' needs path=<model folder>")
        folder = pathlib.Path(path).expanduser()
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: model folder not found")
    elif spec.smoke:
        folder = runtime.smoke_kit().materialize(model_id)
    else:
        folder = _download(spec, model_id, source)
    fam = families.get(spec.family)
    if not (folder / checkpoints.CONFIG_FILE).is_file():
        raise checkpoints.CheckpointError(
            f"{folder}: no {checkpoints.CONFIG_FILE} (a HF-layout folder has one)"
        )
    hf = families.read_hf_config(folder)
    dtype = _dtype(spec, dtype, hf)
    try:
        cfg = fam.config_from_hf(hf, dtype)
    except KeyError as e:
        raise checkpoints.CheckpointError(
            f"{folder / checkpoints.CONFIG_FILE}: missing field {e} needed for a {spec.family} "
            "config"
        ) from e
    checkpoints.validate_hf_checkpoint(folder, cfg, family=spec.family)
    t0 = time.perf_counter()
    model = fam.loader()(str(folder), cfg, mesh=mesh, dtype=dtype)
    loaded = LoadedModel(
        model=model,
        tokenizer=load_tokenizer(folder),
        config=cfg,
        model_id=model_id,
        path=folder,
        family=spec.family,
        dtype=dtype,
        preset=spec.preset,
        load_seconds=time.perf_counter() - t0,
    )
    if verbose:
        print(f"loaded {model_id} from {folder}: {describe(model)}")
    return loaded


def load_args(ref: str, *, base_id: str, source: str = "auto") -> dict[str, Any]:
    """:func:`load_model` keyword arguments for ``ref``: a model id from :data:`MODELS`, or a local
    HF-layout folder (then ``base_id`` says which family and tokenizer rules apply).

    >>> load_args("gemma-3-1b-it", base_id="gemma-3-1b-it")
    {'model_id': 'gemma-3-1b-it', 'source': 'auto'}
    >>> load_args("runs/x/export/hf", base_id="gemma-3-1b-it")
    {'model_id': 'gemma-3-1b-it', 'path': 'runs/x/export/hf'}
    """
    if ref in MODELS:
        return {"model_id": ref, "source": source}
    return {"model_id": base_id, "path": ref}


def count_params(model: nnx.Module) -> tuple[int, int]:
    """(trainable LoRA params, all params) of an nnx model."""
    import jax
    from flax import nnx

    def n(state) -> int:
        return int(sum(x.size for x in jax.tree.leaves(state)))

    return n(nnx.state(model, nnx.LoRAParam)), n(nnx.state(model, nnx.Param))


def footprint(model: nnx.Module) -> dict[str, int]:
    """``{"params", "trainable", "bytes"}``: parameter count, LoRA parameter count (0 without LoRA)
    and the bytes all parameters occupy (nf4/int4 weights count half a byte)."""
    import jax
    from flax import nnx

    leaves = jax.tree.leaves(nnx.state(model, nnx.Param))
    nbytes = sum(x.size * jax.dtypes.itemsize_bits(x.dtype) // 8 for x in leaves)
    lora, total = count_params(model)
    return {"params": total, "trainable": lora, "bytes": int(nbytes)}


def describe(model: nnx.Module) -> str:
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


def shard(model: nnx.Module, mesh: Mesh) -> nnx.Module:
    """Place an nnx model's state on ``mesh`` following its own partition specs (in place).

    An axis whose size the mesh cannot divide is kept whole (replicated) instead of failing: QLoRA's
    nf4 scales inherit their weight's sharding but have one entry per tile (gemma-3-1b: 1,152 / 128
    = 9 tiles, which 8 devices cannot split).
    """
    import jax
    from flax import nnx

    state = nnx.state(model)
    shardings = jax.tree.map(fit_sharding, state, nnx.get_named_sharding(state, mesh))
    nnx.update(model, jax.device_put(state, shardings))
    return model


def fit_sharding(x: jax.Array | jax.ShapeDtypeStruct, sharding: NamedSharding) -> NamedSharding:
    """``sharding`` (a NamedSharding) with every axis that its mesh cannot divide left whole."""
    import jax

    spec = list(sharding.spec) + [None] * (len(x.shape) - len(sharding.spec))
    for i, axes in enumerate(spec):
        names = axes if isinstance(axes, tuple) else (axes,) if axes else ()
        if x.shape[i] % math.prod(sharding.mesh.shape[n] for n in names):
            spec[i] = None
    return jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec(*spec))


def default_tile_size(cfg: Gemma3Config | Gemma2Config) -> int:
    """QLoRA's quantization block: the largest divisor of 128 that divides the model's widths."""
    return math.gcd(128, cfg.embed_dim, cfg.hidden_dim, cfg.head_dim)


def lora_provider(
    config: Gemma3Config | Gemma2Config,
    *,
    family: str = "gemma3",
    rank: int = 64,
    alpha: float | None = None,
    modules: str | None = None,
    qlora: bool = False,
    tile_size: int | None = None,
) -> qwix.LoraProvider:
    """The qwix ``LoraProvider`` that :func:`apply_lora` applies (and ``memplan`` plans with).
    ``alpha``: the adapters' output is scaled by ``alpha / rank``; None gives ``rank`` (scale 1).
    ``modules``: a qwix regex of the modules given adapters; None: the family's (attention and MLP).
    ``tile_size`` (QLoRA's quantization block) defaults to the largest divisor of 128 that divides
    the model's widths (128 for the released Gemma sizes)."""
    import qwix

    alpha = float(rank if alpha is None else alpha)
    if alpha <= 0:  # qwix would scale the adapters by 0: they would neither act nor learn
        raise ValueError(f"LoRA alpha must be > 0 (got {alpha:g}); None uses the rank ({rank})")
    kw = (
        {"weight_qtype": "nf4", "tile_size": tile_size or default_tile_size(config)}
        if qlora
        else {}
    )
    modules = modules or families.get(family).lora_modules
    return qwix.LoraProvider(module_path=modules, rank=rank, alpha=alpha, **kw)


def apply_lora(
    model: nnx.Module,
    *,
    family: str = "gemma3",
    rank: int = 64,
    alpha: float | None = None,
    modules: str | None = None,
    qlora: bool = False,
    tile_size: int | None = None,
    mesh: Mesh | None = None,
    seed: int = 0,
    verbose: bool = True,
) -> nnx.Module:
    """Add LoRA (or nf4 QLoRA) adapters to attention and MLP with qwix (a new module over the same
    arrays).

    The returned model shares its frozen backbone arrays with ``model``, so it can serve as the
    reference model of GRPO/DPO without a second copy (its backbone arrays are the very arrays of
    ``model``; a tunix train step later writes back new buffers, so the two part after the first
    step: see ``memplan``'s ``reference`` entry). QLoRA quantizes a copy of the backbone instead.
    With ``mesh``, the adapters are sharded too. ``alpha``, ``modules``, ``tile_size``: see
    :func:`lora_provider`.
    """
    import qwix
    from flax import nnx

    provider = lora_provider(
        model.config,
        family=family,
        rank=rank,
        alpha=alpha,
        modules=modules,
        qlora=qlora,
        tile_size=tile_size,
    )
    if mesh is not None:
        shard(model, mesh)
    lora_model = qwix.apply_lora_to_model(
        model, provider, rngs=nnx.Rngs(params=seed), **model.get_model_input()
    )
    if mesh is not None:
        shard(lora_model, mesh)
    if verbose:
        kind = "QLoRA (nf4)" if qlora else "LoRA"
        shown = rank if alpha is None else alpha
        print(f"{kind} rank {rank}, alpha {shown:g}: {describe(lora_model)}")
    return lora_model


def trainable(
    loaded: LoadedModel,
    *,
    lora_rank: int | None,
    lora_alpha: float | None = None,
    lora_modules: str | None = None,
    qlora: bool = False,
    reference: bool = True,
    mesh: Mesh | None = None,
    verbose: bool = True,
) -> nnx.Module:
    """The model to train on ``loaded``: LoRA (QLoRA) of ``lora_rank`` on its weights, which then
    also serve as the frozen reference (:func:`apply_lora`: one backbone in memory); or, without a
    rank, every weight: of a second copy loaded from ``loaded.path`` when training needs
    ``loaded`` as its frozen reference (``reference``: GRPO's KL, DPO), else ``loaded.model``
    itself (SFT)."""
    if lora_rank:
        return apply_lora(
            loaded.model,
            family=loaded.family,
            rank=lora_rank,
            alpha=lora_alpha,
            modules=lora_modules,
            qlora=qlora,
            mesh=mesh,
            verbose=verbose,
        )
    if not reference:
        return loaded.model
    copy = load_model(
        loaded.model_id, path=loaded.path, mesh=mesh, dtype=loaded.dtype, verbose=verbose
    )
    return copy.model


def _lora_pairs(model) -> dict[tuple, dict[str, Any]]:
    """``{module path: {"a", "b", "weight"}}`` for every LoRA-wrapped weight of ``model``."""
    from flax import nnx

    pairs: dict[tuple, dict[str, Any]] = {}
    for path, value in nnx.iter_graph(model):
        if isinstance(value, nnx.LoRAParam):
            weight, _, ab = str(path[-1]).rpartition("_lora_")
            pairs.setdefault(tuple(path[:-1]), {"weight": weight})[ab] = value.value
    return pairs


def _module(model, path: tuple):
    for key in path:
        model = model[key] if isinstance(key, int) else getattr(model, key)
    return model


def merge_lora(
    lora_model: nnx.Module, plain_model: nnx.Module, *, rank: int, alpha: float
) -> nnx.Module:
    """Fold ``lora_model``'s adapters into ``plain_model`` (the same base without LoRA; in place).

    qwix computes ``x @ W + (x @ A) @ B * alpha / rank``; for an einsum weight ``A`` holds the
    input-side dims and ``B`` the rest (qwix's ``<weight>_lora_einsum_str``), for a dense kernel
    ``A @ B`` has the kernel's shape. The sum is done on the host in float32, then cast back.
    """
    import jax

    scale = alpha / rank
    for path, p in _lora_pairs(lora_model).items():
        lora_mod, target = _module(lora_model, path), _module(plain_model, path)
        param = getattr(target, p["weight"])
        # whole on this host (of several processes: gathered, every process calls it)
        w = np.asarray(hosts.host_value(param.value), np.float32)
        a, b = (np.asarray(hosts.host_value(p[k]), np.float32) for k in ("a", "b"))
        spec = getattr(lora_mod, f"{p['weight']}_lora_einsum_str", None)
        if spec is not None:  # "lhs,a,b->out": the weight's own dims are a's and b's minus rank
            rhs = lora_mod.einsum_str.split("->")[0].split(",")[1]
            a_str, b_str = spec.split("->")[0].split(",")[1:]
            delta = np.einsum(f"{a_str},{b_str}->{rhs}", a, b)
        else:
            delta = (a.reshape(-1, a.shape[-1]) @ b.reshape(b.shape[-2], -1)).reshape(w.shape)
        merged = (w + scale * delta).astype(param.value.dtype)
        param.value = jax.device_put(merged, param.value.sharding)
    return plain_model


def _preset_of(family: str, preset: str | None, config: Any) -> str | None:
    """``preset`` when ``config`` is that tunix preset's (the parameter dtype aside), else None: an
    export's ``tunix_config.json`` names a preset only for the shape it makes, so that a custom
    shape loaded under a released id (a rehearsal's, a pruned model) is rebuilt from its own
    fields.

    >>> from tunixkit import testing
    >>> from tunix.models.gemma3 import model as g3
    >>> _preset_of("gemma3", "gemma3_1b_it", g3.ModelConfig.gemma3_1b_it())
    'gemma3_1b_it'
    >>> _preset_of("gemma3", "gemma3_1b_it", testing.config("tiny-gemma3")) is None
    True
    """
    if not preset:
        return None
    made = getattr(families.get(family).config_cls(), preset)()
    if type(made) is not type(config):  # e.g. a Llama 3.1 config with its RoPE scaling
        return None
    names = [f.name for f in dataclasses.fields(made) if f.name != "param_dtype"]
    return preset if all(getattr(made, n) == getattr(config, n) for n in names) else None


def export(
    model: nnx.Module,
    base: LoadedModel,
    out_dir: str | pathlib.Path,
    *,
    lora_rank: int | None = None,
    lora_alpha: float | None = None,
    mesh: Mesh | None = None,
) -> dict[str, pathlib.Path]:
    """Export a fine-tuned model two ways: ``out_dir/hf`` (HF layout: tunix and ``transformers``
    load it) and ``out_dir/orbax`` (``params/`` + ``tunix_config.json`` + tokenizer files).

    ``base`` is the :class:`tunixkit.models.LoadedModel` training started from. With ``lora_rank``,
    the adapters of ``model`` are merged into a fresh copy of ``base``'s weights (the original ones
    also under QLoRA); a fully fine-tuned ``model`` is written as it is.
    """
    out = pathlib.Path(out_dir)
    plain = model
    if lora_rank:
        plain = load_model(
            base.model_id, path=base.path, mesh=mesh, dtype=base.dtype, verbose=False
        ).model
        merge_lora(model, plain, rank=lora_rank, alpha=float(lora_alpha or lora_rank))
    src = json.loads((base.path / checkpoints.CONFIG_FILE).read_text())
    ids = {k: src[k] for k in ("eos_token_id", "pad_token_id", "bos_token_id") if k in src}
    extras = {
        p.name: p
        for p in base.path.iterdir()
        if p.is_file() and p.suffix != ".safetensors" and p.name not in checkpoints.NOT_COPIED
    }
    hf_dir = checkpoints.write_hf_checkpoint(
        plain, base.config, out / "hf", family=base.family, extra_files=extras, **ids
    )
    orbax_dir = out / "orbax"
    checkpoints.save_state(plain, orbax_dir / "params", portable=True)
    meta = {
        "family": base.family,
        "module": families.get(base.family).model_module,
        "model_class": families.get(base.family).model_class,
        "preset": _preset_of(base.family, base.preset, base.config),
        "config": checkpoints.tunix_config_dict(base.config),
    }
    tokenizer = [
        path
        for name, path in extras.items()
        if name.startswith("tokenizer") or name == "special_tokens_map.json"
    ]
    hosts.once(f"write {orbax_dir}", _write_beside, orbax_dir, meta, tokenizer)
    return {"hf": hf_dir, "orbax": orbax_dir}


def _write_beside(orbax_dir: pathlib.Path, meta: dict[str, Any], files: list[pathlib.Path]) -> None:
    """The Orbax export's ``tunix_config.json`` and tokenizer files."""
    (orbax_dir / checkpoints.TUNIX_CONFIG_FILE).write_text(json.dumps(meta, indent=1))
    for path in files:
        shutil.copyfile(path, orbax_dir / path.name)
