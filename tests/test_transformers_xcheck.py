"""Exported checkpoints load in Hugging Face transformers with the same logits as in tunix (fp32),
for both families the competition allows: Gemma3 (``Gemma3ForCausalLM``) and Gemma2
(``Gemma2ForCausalLM``).

torch==2.13.0 (CPU) comes from requirements-xcheck.txt, which the test command installs into
``<venv>/xcheck``, a folder this test alone adds to its path. Gemma3: 6
layers so that a global-attention layer exists; Gemma2: local and global layers alternate. Sequences
are longer than the sliding window, every weight is random (tunix's zero-initialised norms and MLPs
would hide mapping errors), and the Gemma2 soft-caps are set low enough to bite on a tiny model.
"""

import dataclasses
import pathlib
import sys

import jax
import numpy as np
import pytest

# Outside the environment the notebooks and the other tests run in: tensorboardX, which tunix
# imports, imports torch whenever it can (4.5 s in every process). See requirements-xcheck.txt.
XCHECK = pathlib.Path(sys.prefix) / "xcheck"
if XCHECK.is_dir():
    sys.path.append(str(XCHECK))
import torch  # noqa: E402
import transformers  # noqa: E402
from flax import nnx

from tunixkit import checkpoints, families, models, testing

FAMILIES = {
    "gemma3": ("tiny-gemma3", testing.TinyShape(num_layers=6, sliding_window_size=16)),
    "gemma2": ("tiny-gemma2", dataclasses.replace(testing.TINY_GEMMA2, num_layers=4)),
}


def _config(family: str):
    vocab = testing.load_tokenizer().vocab_size
    shape = FAMILIES[family][1]
    if family == "gemma3":
        return testing.gemma3_config(vocab, shape)
    return dataclasses.replace(
        testing.gemma2_config(vocab, shape), attn_logits_soft_cap=5.0, final_logit_softcap=10.0
    )


def _hf_logits(folder, family: str, toks):
    cls = getattr(transformers, families.get(family).architecture)
    hf = cls.from_pretrained(str(folder), dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        return hf(input_ids=torch.from_numpy(toks).long()).logits.float().numpy()


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def exported(request, tmp_path_factory):
    family = request.param
    tmp = tmp_path_factory.mktemp(family)
    cfg = _config(family)
    src = testing.randomize_all(testing.random_model(cfg, family=family), seed=0, norm_scale=0.5)
    folder = checkpoints.write_hf_checkpoint(
        src,
        cfg,
        tmp / "base",
        family=family,
        extra_files={"tokenizer.model": testing.tokenizer_path()},
    )
    toks = np.random.default_rng(0).integers(4, cfg.num_embed, size=(2, 40)).astype(np.int32)
    return family, cfg, src, folder, toks, tmp


def test_written_checkpoint_matches_in_transformers(exported):
    family, _, src, folder, toks, _ = exported
    ours = testing.logits(src, toks)
    assert np.abs(ours).max() > 1.0  # a meaningful comparison, not two near-zero outputs
    np.testing.assert_allclose(_hf_logits(folder, family, toks), ours, atol=1e-4)


def test_merged_lora_export_matches_in_transformers(exported):
    family, _, _, folder, toks, tmp = exported
    model_id = FAMILIES[family][0]
    base = models.load_model(model_id, path=folder, verbose=False)
    lora = models.apply_lora(base.model, family=family, rank=4, alpha=8.0, verbose=False)
    key = jax.random.key(3)
    for _, v in nnx.iter_graph(lora):
        if isinstance(v, nnx.LoRAParam):
            key, sub = jax.random.split(key)
            v.value = v.value + 0.05 * jax.random.normal(sub, v.value.shape)
    want = testing.logits(lora, toks)
    out = models.export(lora, base, tmp / "export", lora_rank=4, lora_alpha=8.0)
    merged = models.load_model(model_id, path=out["hf"], verbose=False)
    np.testing.assert_allclose(testing.logits(merged.model, toks), want, atol=2e-5)
    np.testing.assert_allclose(_hf_logits(out["hf"], family, toks), want, atol=1e-4)
