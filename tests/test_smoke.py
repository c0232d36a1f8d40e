"""The smoke profile: shipped tokenizer, synthetic problems, tiny model."""

import dataclasses
import filecmp
import hashlib
import json

import jax
import numpy as np
from flax import nnx

from tunixkit import data, prompting, testing


def test_shipped_tokenizer_rebuilds_byte_identical(tmp_path):
    built = testing.build_tokenizer(tmp_path / "tok")
    assert filecmp.cmp(built, testing.tokenizer_path(), shallow=False), (
        "run scripts/build_tokenizer.py"
    )


def test_the_shipped_warm_start_is_its_recipe_and_loads_unchanged():
    about = json.loads(testing.warm_start_file().with_suffix(".json").read_text())
    assert about["warm_start"] == dataclasses.asdict(testing.WARM_START), (
        "WARM_START changed: run JAX_PLATFORMS=cpu XLA_FLAGS="
        "--xla_force_host_platform_device_count=1 python -m tunixkit.testing --write-warm-start"
    )
    shipped = testing.warm_start_file().read_bytes()
    assert about["sha256"] == hashlib.sha256(shipped).hexdigest()
    # read by tunix's loader and written again in the HF layout: the same bytes
    built = testing.materialize("tiny-gemma3-sft") / "model.safetensors"
    assert built.read_bytes() == shipped


def _nll(model, tokens: np.ndarray) -> float:
    logp = jax.nn.log_softmax(testing.logits(model, tokens[None, :-1])[0])
    return float(-np.take_along_axis(np.asarray(logp), tokens[1:, None], axis=1).mean())


def test_the_warm_start_recipe_still_trains():
    """What wrote the shipped weights (testing.warm_start) runs: 20 of its steps lower the loss of
    a held-out problem from a random model's."""
    cfg = testing.config("tiny-gemma3-sft")
    ws = dataclasses.replace(testing.WARM_START, steps=20)
    row = testing.synthetic_gsm8k(1, seed=testing.SPLIT_SEEDS["test"])[0]
    steps, answer = data.parse_gsm8k_answer(row["answer"])
    text = prompting.format_prompt(row["question"]) + prompting.format_completion(steps, answer)
    tokens = np.asarray(testing.load_tokenizer().encode(text), np.int32)
    before = _nll(testing.random_model(cfg, ws.seed), tokens)
    after = _nll(testing.warm_start(cfg, ws), tokens)
    assert after < before - 1.0, (before, after)


def test_tokenizer_contract():
    sp = testing.load_tokenizer()
    assert (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (0, 1, 2, 3)
    for tok in (*testing.SPECIAL_TOKENS, "\n"):
        assert len(sp.encode(tok)) == 1, tok
    text = prompting.format_prompt("Tom has 3 pens.\nHow many?") + prompting.format_completion(
        "3.", "3"
    )
    assert sp.decode(sp.encode(text)) == text
    assert 1 not in sp.encode(text)  # no unknown pieces in the template


def test_synthetic_rows_parse_and_are_seeded():
    rows = testing.synthetic_gsm8k(300, seed=7)
    records, report = data.to_records(rows, "synthetic", verbose=False)
    assert len(records) == 300 and not report.skipped
    assert rows == testing.synthetic_gsm8k(300, seed=7)
    assert rows != testing.synthetic_gsm8k(300, seed=8)
    for r in records:  # the worked steps state the answer they claim
        assert f"={r['answer']}" in r["solution"].replace(" ", ""), r


def test_randomized_mlp_has_gradients():
    cfg = testing.gemma3_config(64)
    model = testing.random_model(cfg, seed=0)
    toks = np.arange(1, 9, dtype=np.int32)[None]
    from tunix.sft import utils as su

    mask = toks != 0

    def loss(m):
        logits, _ = m(
            toks, su.build_positions_from_mask(mask), None, su.make_causal_attn_mask(mask)
        )
        return -jax.nn.log_softmax(logits)[..., 5].mean()

    grads = nnx.to_pure_dict(nnx.grad(loss)(model))
    assert float(np.abs(grads["layers"][0]["mlp"]["gate_proj"]["kernel"]).max()) > 0
