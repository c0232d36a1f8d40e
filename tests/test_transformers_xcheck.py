"""Exported checkpoints load in Hugging Face transformers with the same logits as in tunix (fp32).

torch==2.13.0 (CPU) comes from requirements-test.txt, which the test command installs.
6 layers so that a global-attention layer exists; sequences longer than the sliding window; every
weight random (tunix's zero-initialised norms and MLPs would hide mapping errors).
"""

import jax
import numpy as np
import pytest
import torch
from flax import nnx
from transformers import Gemma3ForCausalLM

from tunixkit import checkpoints, models, testing

SHAPE = testing.TinyShape(num_layers=6, sliding_window_size=16)


def _randomize(model, seed):
    key = jax.random.key(seed)
    for path, v in nnx.iter_graph(model):
        if isinstance(v, nnx.Param | nnx.LoRAParam):
            key, sub = jax.random.split(key)
            scale = 0.5 if path[-1] == "scale" else 0.1
            v.value = (scale * jax.random.normal(sub, v.value.shape)).astype(v.value.dtype)


def _tunix_logits(model, toks):
    from tunix.sft import utils as su

    mask = np.ones_like(toks, dtype=bool)
    out, _ = model(toks, su.build_positions_from_mask(mask), None, su.make_causal_attn_mask(mask))
    return np.asarray(out, dtype=np.float32)


def _hf_logits(folder, toks):
    hf = Gemma3ForCausalLM.from_pretrained(
        str(folder), dtype=torch.float32, attn_implementation="eager"
    ).eval()
    with torch.no_grad():
        return hf(input_ids=torch.from_numpy(toks).long()).logits.float().numpy()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("xcheck")
    cfg = testing.gemma3_config(testing.load_tokenizer().GetPieceSize(), SHAPE)
    src = testing.random_gemma3(cfg)
    _randomize(src, 0)
    folder = checkpoints.write_hf_checkpoint(
        src, cfg, tmp / "base", extra_files={"tokenizer.model": testing.tokenizer_path()}
    )
    toks = np.random.default_rng(0).integers(4, cfg.num_embed, size=(2, 40)).astype(np.int32)
    return cfg, src, folder, toks, tmp


def test_written_checkpoint_matches_in_transformers(exported):
    cfg, src, folder, toks, _ = exported
    ours = _tunix_logits(src, toks)
    theirs = _hf_logits(folder, toks)
    assert np.abs(ours).max() > 1.0  # a meaningful comparison, not two near-zero outputs
    np.testing.assert_allclose(theirs, ours, atol=1e-4)


def test_merged_lora_export_matches_in_transformers(exported):
    cfg, _, folder, toks, tmp = exported
    lora = models.apply_lora(
        models.load_model("tiny-gemma3", path=folder, verbose=False).model,
        family="gemma3",
        rank=4,
        alpha=8.0,
        verbose=False,
    )
    for _, v in nnx.iter_graph(lora):
        if isinstance(v, nnx.LoRAParam):
            v.value = v.value + 0.05 * jax.random.normal(
                jax.random.key(v.value.size), v.value.shape
            )
    want = _tunix_logits(lora, toks)
    merged = checkpoints.export_merged(lora, folder, tmp / "merged", rank=4, alpha=8.0)
    np.testing.assert_allclose(
        _tunix_logits(models.load_model("tiny-gemma3", path=merged, verbose=False).model, toks),
        want,
        atol=1e-5,
    )
    np.testing.assert_allclose(_hf_logits(merged, toks), want, atol=1e-4)
