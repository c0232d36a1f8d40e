"""The smoke profile's models: a tiny real Gemma, an offline tokenizer, a cache of built models.

- :func:`tokenizer_path` / :func:`load_tokenizer`: a SentencePiece model shipped as package data,
  built by ``scripts/build_tokenizer.py`` (:func:`build_tokenizer`), with the Gemma chat markers and
  the reasoning/answer tags as single tokens, pad id 0 and newlines kept.
- :data:`TINY_GEMMA3` (and the student's and Gemma2's shapes): tiny Gemma-architecture shapes;
  :func:`random_model` re-randomises the MLP kernels that tunix initialises to zero.
- :func:`materialize`: writes a smoke model (random, or the shipped weights of a short full
  fine-tune: :data:`WARM_START`, :func:`write_warm_start`) once, in the Hugging Face layout, into a
  cache whose key covers the code that builds it (and the shipped weights). The loader
  (:func:`tunixkit.models.load_model`) reaches it for the tiny ids.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import pathlib
import random
import tempfile

from tunixkit import calculator, checkpoints, families, prompting, training
from tunixkit.data import parse_gsm8k_answer, sft_pair, to_records
from tunixkit.prompting import (
    ANSWER_END,
    ANSWER_START,
    END_OF_TURN,
    MATH_SYSTEM_PROMPT,
    REASONING_END,
    REASONING_START,
    START_OF_TURN,
    format_completion,
    format_prompt,
)
from tunixkit.runtime import cache_dir
from tunixkit.testing._fixtures import write_hf_tokenizer
from tunixkit.testing._synthetic import (
    SMOKE_MAX_OPERAND,
    SPLIT_SEEDS,
    synthetic_gsm8k,
    synthetic_tasks,
)
from tunixkit.tokenizer import Tokenizer
from tunixkit.tokenizer import load as load_tokenizer_folder

SPECIAL_TOKENS = (
    START_OF_TURN,
    END_OF_TURN,
    REASONING_START,
    REASONING_END,
    ANSWER_START,
    ANSWER_END,
    "<tool_call>",
    "</tool_call>",
)
TOKENIZER_VOCAB = 512


@dataclasses.dataclass(frozen=True, kw_only=True)
class TinyShape:
    """Sizes of the tiny Gemma3 (Gemma3 1B has one KV head too)."""

    num_layers: int = 2  # transformer blocks
    embed_dim: int = 128  # residual width
    hidden_dim: int = 512  # MLP width
    num_heads: int = 4  # query heads
    head_dim: int = 32  # per-head width
    num_kv_heads: int = 1  # multi-query attention, as in Gemma3 270M/1B
    sliding_window_size: int = 64  # local attention window


TINY_GEMMA3 = TinyShape()
# The distillation student: one block, half the width (~4x fewer non-embedding parameters).
TINY_STUDENT = TinyShape(num_layers=1, embed_dim=64, hidden_dim=256, num_heads=2, head_dim=32)
# The tiny Gemma2: one local and one global layer, grouped-query attention as in Gemma2-2B (8/4).
TINY_GEMMA2 = TinyShape(num_heads=4, num_kv_heads=2, sliding_window_size=16)
# The tiny Llama 3 and Qwen: grouped-query attention (Llama-3.2-1B: 32/8 heads, Qwen3-0.6B: 16/8).
TINY_DECODER = TinyShape(num_heads=4, num_kv_heads=2)

# What a Llama 3 and a Qwen tokenizer add to the smoke vocabulary: their chat markers as special
# tokens, and which piece is BOS (Llama 3's tokenizer prepends <|begin_of_text|>; Qwen's prepends
# nothing), EOS and padding (Llama 3 has none: tunix pads with EOS).
FAMILY_TOKENS = {
    "llama3": {
        "special": (
            "<|begin_of_text|>",
            "<|end_of_text|>",
            "<|start_header_id|>",
            "<|end_header_id|>",
            "<|eot_id|>",
        ),
        "bos": "<|begin_of_text|>",
        "eos": "<|eot_id|>",
        "pad": None,
    },
    "qwen": {
        "special": ("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
        "bos": None,
        "eos": "<|im_end|>",
        "pad": "<|endoftext|>",
    },
}


def tokenizer_corpus() -> list[str]:
    """The deterministic text the shipped tokenizer is trained on: the smoke GSM8K problems, the
    multi-domain tasks (notebook 06), calculator calls and results (notebook 07), and every
    printable ASCII character once (so that any text a model writes can be spelled)."""
    lines = []
    for row in synthetic_gsm8k(4000, seed=12345):
        steps, answer = parse_gsm8k_answer(row["answer"])
        lines.append(format_prompt(row["question"]) + format_completion(steps, answer or ""))
        lines.append(format_prompt(row["question"], system_prompt=None))
    lines.append(MATH_SYSTEM_PROMPT)
    lines += [" ".join(str(i) for i in range(k, k + 30)) for k in range(0, 200, 10)]
    for task in synthetic_tasks(1200, seed=54321, asked=False):
        lines.append(format_prompt(task.prompt, prompting.DOMAINS_SYSTEM_PROMPT) + task.response)
    rng = random.Random(777)
    for _ in range(600):
        a, b, op = rng.randint(2, 99), rng.randint(2, 99), rng.choice("+-*")
        lines.append(
            calculator.tool_call(f"{a} {op} {b}")
            + f"\n{calculator.RESULT_PREFIX}{calculator.calculate(f'{a} {op} {b}')}"
        )
    lines.append("".join(chr(c) for c in range(32, 127)))
    return lines


def build_tokenizer(
    model_prefix: str | pathlib.Path, vocab_size: int = TOKENIZER_VOCAB
) -> pathlib.Path:
    """Train the tiny SentencePiece model deterministically; return the ``.model`` path.

    pad=0, unk=1, bos=2, eos=3 (pad 0 is what tunix's adapter expects); the chat markers, tags and
    ``\\n`` are user-defined symbols so they are single tokens; digits are split as in Gemma.
    """
    import os
    import shutil

    import sentencepiece as spm

    prefix = pathlib.Path(model_prefix).resolve()
    prefix.parent.mkdir(parents=True, exist_ok=True)
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        # Relative names only: SentencePiece stores its input and prefix paths in the model file.
        os.chdir(tmp)
        try:
            # One sentence per line: a sample's own newlines split it; "\n" is a symbol anyway.
            pathlib.Path("corpus.txt").write_text(
                "\n".join(tokenizer_corpus()) + "\n", encoding="utf-8"
            )
            spm.SentencePieceTrainer.train(
                input="corpus.txt",
                model_prefix="tok",
                vocab_size=vocab_size,
                model_type="bpe",
                character_coverage=1.0,
                pad_id=0,
                unk_id=1,
                bos_id=2,
                eos_id=3,
                user_defined_symbols=[*SPECIAL_TOKENS, "\n"],
                split_digits=True,
                normalization_rule_name="identity",
                remove_extra_whitespaces=False,
                add_dummy_prefix=False,
                byte_fallback=False,
                num_threads=1,
                shuffle_input_sentence=False,
                input_sentence_size=0,
                minloglevel=2,
            )
            shutil.copyfile("tok.model", prefix.with_suffix(".model"))
        finally:
            os.chdir(cwd)
    return prefix.with_suffix(".model")


def tokenizer_path() -> pathlib.Path:
    """Path of the shipped tokenizer model (package data)."""
    ref = importlib.resources.files("tunixkit") / "assets" / "tiny_tokenizer.model"
    return pathlib.Path(str(ref))


def load_tokenizer(path: str | pathlib.Path | None = None) -> Tokenizer:
    """The shipped (or given) SentencePiece model as a :class:`tunixkit.tokenizer.Tokenizer`."""
    import sentencepiece as spm

    path = pathlib.Path(path or tokenizer_path())
    return Tokenizer(spm.SentencePieceProcessor(model_file=str(path)), source=str(path))


def gemma3_config(vocab_size: int, shape: TinyShape = TINY_GEMMA3, *, dtype=None):
    """A tunix ``gemma3.ModelConfig`` of the tiny shape (float32 by default: tiny models learn
    cleanly)."""
    import jax.numpy as jnp
    from tunix.models.gemma3 import model as g3

    return g3.ModelConfig(
        num_layers=shape.num_layers,
        num_embed=vocab_size,
        embed_dim=shape.embed_dim,
        hidden_dim=shape.hidden_dim,
        num_heads=shape.num_heads,
        head_dim=shape.head_dim,
        num_kv_heads=shape.num_kv_heads,
        sliding_window_size=shape.sliding_window_size,
        local_base_frequency=10_000,
        global_base_frequency=1_000_000,
        param_dtype=dtype or jnp.float32,
    )


def gemma2_config(vocab_size: int, shape: TinyShape):
    """A tunix Gemma2 config of the tiny shape: local then global attention, alternating from layer
    0 as in Gemma2-2B, with its soft-caps (50 on attention logits, 30 on the output)."""
    from tunix.models.gemma import model as g2

    types = tuple(
        g2.AttentionType.LOCAL_SLIDING if i % 2 == 0 else g2.AttentionType.GLOBAL
        for i in range(shape.num_layers)
    )
    return g2.ModelConfig(
        num_layers=shape.num_layers,
        num_embed=vocab_size,
        embed_dim=shape.embed_dim,
        hidden_dim=shape.hidden_dim,
        num_heads=shape.num_heads,
        head_dim=shape.head_dim,
        num_kv_heads=shape.num_kv_heads,
        final_logit_softcap=30.0,
        use_post_attn_norm=True,
        use_post_ffw_norm=True,
        attention_types=types,
        attn_logits_soft_cap=50.0,
        sliding_window_size=shape.sliding_window_size,
    )


def decoder_config(family: str, vocab_size: int, shape: TinyShape = TINY_DECODER, **kw):
    """A tunix config of ``family`` (``llama3``, ``qwen2``, ``qwen3``) at the tiny ``shape``, tied
    embeddings, as Llama-3.2-1B, Qwen2.5-0.5B and Qwen3-0.6B have; ``kw`` overrides fields (e.g.
    ``rope_theta``, ``weight_tying``/``use_tied_embedding``)."""
    fields = {
        "num_layers": shape.num_layers,
        "vocab_size": vocab_size,
        "embed_dim": shape.embed_dim,
        "hidden_dim": shape.hidden_dim,
        "num_heads": shape.num_heads,
        "head_dim": shape.head_dim,
        "num_kv_heads": shape.num_kv_heads,
        "rope_theta": 500_000 if family == "llama3" else 1_000_000,
        "norm_eps": 1e-5 if family == "llama3" else 1e-6,
    }
    tied = "weight_tying" if family == "llama3" else "use_tied_embedding"
    return families.get(family).config_cls()(**(fields | {tied: True} | kw))


def write_family_tokenizer(family: str, folder: str | pathlib.Path) -> Tokenizer:
    """The smoke vocabulary as a Hugging Face tokenizer of ``family``'s kind (its chat markers,
    BOS, EOS and padding: :data:`FAMILY_TOKENS`) written to ``folder``; returns it loaded."""
    from tokenizers import AddedToken, processors
    from tokenizers import Tokenizer as RawTokenizer
    from transformers import PreTrainedTokenizerFast

    kind = FAMILY_TOKENS["llama3" if family == "llama3" else "qwen"]
    folder = pathlib.Path(folder)
    write_hf_tokenizer(tokenizer_path(), folder)
    raw = RawTokenizer.from_file(str(folder / "tokenizer.json"))
    raw.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in kind["special"]])
    if kind["bos"]:
        bos = kind["bos"]
        raw.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A",
            pair=f"{bos} $A {bos} $B",
            special_tokens=[(bos, raw.token_to_id(bos))],
        )
    else:
        raw.post_processor = None
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (folder / name).unlink(missing_ok=True)
    PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token=kind["bos"],
        eos_token=kind["eos"],
        pad_token=kind["pad"],
        unk_token=load_tokenizer().raw.IdToPiece(load_tokenizer().raw.unk_id()),
    ).save_pretrained(str(folder))
    return load_tokenizer_folder(folder)


def randomize_mlp(model, seed: int = 0, scale: float = 0.02):
    """Re-randomise the MLP kernels, which tunix initialises to zero: a randomly initialised
    model would otherwise have exactly zero MLP gradients forever."""
    import jax

    key = jax.random.key(seed)
    for layer in model.layers:
        for name in ("gate_proj", "up_proj", "down_proj"):
            kernel = getattr(layer.mlp, name).kernel
            key, sub = jax.random.split(key)
            kernel[...] = (scale * jax.random.normal(sub, kernel[...].shape)).astype(
                kernel[...].dtype
            )
    return model


# tunix draws embeddings with std 0.01. Logits are tied to them and the final norm scale starts at
# 1, so a random tiny model's logits stay within about +-1 (loss ~ln(vocab)) and LoRA, which cannot
# touch either, never sharpens them. Real checkpoints have a far larger logit range; 0.1 gives the
# tiny base model one, so LoRA SFT from it behaves like LoRA SFT from a pretrained model.
TINY_EMBEDDING_STD = 0.1


def random_model(
    config, seed: int = 0, *, embedding_std: float | None = None, family: str = "gemma3"
):
    """A randomly initialised tunix model of ``family`` (Gemma3 by default) whose MLP can learn
    (embeddings redrawn with ``embedding_std`` when given; tunix's own std is 0.01)."""
    import jax
    from flax import nnx

    model = randomize_mlp(
        families.get(family).model_cls()(config, rngs=nnx.Rngs(params=seed)), seed
    )
    if embedding_std is not None:
        emb = model.embedder.input_embedding
        noise = jax.random.normal(jax.random.key(seed + 1), emb[...].shape)
        emb[...] = (embedding_std * noise).astype(emb[...].dtype)
    return model


@dataclasses.dataclass(frozen=True, kw_only=True)
class WarmStart:
    """The short full fine-tune that gives ``tiny-gemma3-sft`` its partial skill."""

    steps: int = 500  # optimizer steps
    batch_size: int = 16  # examples per step
    learning_rate: float = 3e-3  # peak AdamW learning rate
    max_len: int = 144  # tokens per example (prompt + target)
    seed: int = 0  # init and data order
    max_operand: int = SMOKE_MAX_OPERAND  # the synthetic problems' number range


WARM_START = WarmStart()


def warm_start(config, ws: WarmStart = WARM_START):
    """Train a random tiny Gemma3 on synthetic problems with tunix's ``PeftTrainer`` (full FT)."""
    from tunix.sft import peft_trainer

    tok = load_tokenizer()
    model = random_model(config, ws.seed)
    rows = synthetic_gsm8k(
        ws.steps * ws.batch_size // 2, seed=SPLIT_SEEDS["train"], max_operand=ws.max_operand
    )
    records, _ = to_records(rows, "synthetic", verbose=False)
    ds = training.sft_dataset(
        [sft_pair(r) for r in records],
        tok,
        max_len=ws.max_len,
        batch_size=ws.batch_size,
        num_batches=ws.steps,
        seed=ws.seed,
    )
    config = peft_trainer.TrainingConfig(
        eval_every_n_steps=10**9, max_steps=ws.steps, pbar_description="tiny-gemma3-sft warm start"
    )
    optimizer = training.optimizer(ws.learning_rate, ws.steps, clip_norm=1.0)
    training.sft_trainer(model, optimizer, config, pad_id=tok.pad_id()).train(ds)
    return model


# The smoke models: how each is built. The cache key covers this module, the trainer glue and the
# checkpoint writer (the code that builds and writes them), the tokenizer, the shapes and the
# shipped warm start, so a change to any of them rebuilds the cached model instead of silently
# reusing a stale one. "warm_start": the shipped weights (warm_start_file), not trained here.
SMOKE_MODELS = {
    "tiny-gemma3": {"family": "gemma3", "shape": TINY_GEMMA3, "build": "random"},
    "tiny-gemma3-sft": {"family": "gemma3", "shape": TINY_GEMMA3, "build": "warm_start"},
    "tiny-gemma3-student": {"family": "gemma3", "shape": TINY_STUDENT, "build": "random"},
    "tiny-gemma2": {"family": "gemma2", "shape": TINY_GEMMA2, "build": "random"},
    "tiny-llama3": {"family": "llama3", "shape": TINY_DECODER, "build": "random"},
    "tiny-qwen2": {"family": "qwen2", "shape": TINY_DECODER, "build": "random"},
    "tiny-qwen3": {"family": "qwen3", "shape": TINY_DECODER, "build": "random"},
}
GEMMA_FAMILIES = ("gemma3", "gemma2")  # the smoke SentencePiece model is theirs as it is
_KEY_MODULES = (
    "testing/_tiny.py",
    "testing/_synthetic.py",
    "training.py",
    "families.py",
    "checkpoints.py",
    "data.py",
    "tokenizer.py",
)


def cache_key(model_id: str) -> str:
    """A hash of everything that determines the smoke model ``model_id``'s weights."""
    import hashlib

    spec = SMOKE_MODELS[model_id]
    h = hashlib.sha256(tokenizer_path().read_bytes())
    here = pathlib.Path(__file__).parent.parent  # the tunixkit package
    for name in _KEY_MODULES:
        h.update((here / name).read_bytes())
    h.update(repr((model_id, spec, WARM_START, TINY_EMBEDDING_STD)).encode())
    if spec["build"] == "warm_start":
        h.update(warm_start_file().read_bytes())
    return h.hexdigest()[:12]


def config(model_id: str):
    """The tunix config of the smoke model ``model_id``."""
    spec = SMOKE_MODELS[model_id]
    vocab = load_tokenizer().vocab_size
    if spec["family"] not in GEMMA_FAMILIES:  # the family's chat markers after the smoke pieces
        family = spec["family"]
        extra = len(FAMILY_TOKENS["llama3" if family == "llama3" else "qwen"]["special"])
        return decoder_config(family, vocab + extra, spec["shape"])
    make = gemma2_config if spec["family"] == "gemma2" else gemma3_config
    return make(vocab, spec["shape"])


def materialize(model_id: str) -> pathlib.Path:
    """Write (once, cached) the smoke model ``model_id`` in the HF layout and return its folder.

    It is built in a process of its own on one CPU device, so that the weights do not depend on
    the caller's devices (the warm start, which CPUs would train differently, is shipped:
    :func:`write_warm_start`)."""
    import os
    import subprocess
    import sys

    folder = cache_dir() / "models" / f"{model_id}-{cache_key(model_id)}"
    if not (folder / checkpoints.WEIGHTS_FILE).is_file():
        env = dict(
            os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=1"
        )
        subprocess.run(
            [sys.executable, "-m", "tunixkit.testing", model_id, str(folder)], env=env, check=True
        )
    return folder


def warm_start_file() -> pathlib.Path:
    """The shipped weights of ``tiny-gemma3-sft`` (package data, written by
    :func:`write_warm_start`); ``.json`` beside it says how they were made."""
    ref = importlib.resources.files("tunixkit") / "assets" / "tiny-gemma3-sft.safetensors"
    return pathlib.Path(str(ref))


def _sha256(path: pathlib.Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_warm_start(ws: WarmStart = WARM_START) -> pathlib.Path:
    """Train the warm start (:func:`warm_start`, ~70 s on one CPU device) and write its weights to
    :func:`warm_start_file`, with what made them (``ws``, the digest) in the ``.json`` beside.

    Shipped rather than trained on each machine: CPUs differ in their float rounding, and 500 steps
    turn that into other weights (greedy accuracy 0.56 on most machines, 0.67 on one), so the smoke
    bars would meet another start on some CI machines. Run it after changing :data:`WARM_START`
    (``JAX_PLATFORMS=cpu XLA_FLAGS=--xla_force_host_platform_device_count=1 python -m
    tunixkit.testing --write-warm-start``); ``tests/test_smoke.py`` fails until then.
    """
    import json
    import shutil

    import jax

    if [d.platform for d in jax.devices()] != ["cpu"]:  # as materialize built it: one CPU device
        raise RuntimeError(
            f"the warm start is trained on one CPU device, not {jax.devices()}: run "
            "JAX_PLATFORMS=cpu XLA_FLAGS=--xla_force_host_platform_device_count=1 "
            "python -m tunixkit.testing --write-warm-start"
        )
    model = warm_start(config("tiny-gemma3-sft"), ws)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoints.write_hf_checkpoint(model, config("tiny-gemma3-sft"), tmp)
        shutil.copyfile(pathlib.Path(tmp) / checkpoints.WEIGHTS_FILE, warm_start_file())
    about = {"warm_start": dataclasses.asdict(ws), "sha256": _sha256(warm_start_file())}
    warm_start_file().with_suffix(".json").write_text(json.dumps(about, indent=1) + "\n")
    return warm_start_file()


def _build(model_id: str, folder: pathlib.Path) -> None:
    """What :func:`materialize` runs in its own process."""
    import shutil

    cfg, family = config(model_id), SMOKE_MODELS[model_id]["family"]
    shipped = SMOKE_MODELS[model_id]["build"] == "warm_start"
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(dir=folder.parent))
    if shipped:  # the shipped weights, read by tunix's loader
        shutil.copyfile(warm_start_file(), tmp / checkpoints.WEIGHTS_FILE)
        model = families.get(family).loader()(str(tmp), cfg)
    else:
        model = random_model(cfg, embedding_std=TINY_EMBEDDING_STD, family=family)
    if family in GEMMA_FAMILIES:
        tok, extra = load_tokenizer(), {"tokenizer.model": tokenizer_path()}
    else:
        tok, extra = write_family_tokenizer(family, tmp), {}
        if tok.vocab_size != families.vocab_size(cfg):
            raise RuntimeError(f"{model_id}: {tok.vocab_size} tokens for a vocabulary of {cfg}")
    checkpoints.write_hf_checkpoint(
        model,
        cfg,
        tmp,
        family=family,
        extra_files=extra,
        eos_token_id=tok.stop_ids(families.get(family).end_of_turn),
        pad_token_id=tok.pad_id(),
        bos_token_id=tok.bos_id(),
    )
    if shipped and _sha256(tmp / checkpoints.WEIGHTS_FILE) != _sha256(warm_start_file()):
        raise RuntimeError(f"{warm_start_file()}: read and written again, the weights changed")
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)  # atomic: a killed run leaves no half-written model behind
