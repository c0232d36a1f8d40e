"""Loading real-layout checkpoints, validation errors, LoRA, Orbax round trips, merged export."""

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from tunixkit import checkpoints, models, testing


def _randomize_everything(model, seed=1):
    """Every weight random (tunix inits norms and MLPs to zero, which hides mapping errors)."""
    key = jax.random.key(seed)
    for _, v in nnx.iter_graph(model):
        if isinstance(v, nnx.Param):
            key, sub = jax.random.split(key)
            v.value = (0.1 * jax.random.normal(sub, v.value.shape)).astype(v.value.dtype)
    return model


@pytest.fixture(scope="module")
def tiny():
    cfg = testing.gemma3_config(testing.load_tokenizer().GetPieceSize())
    return cfg, _randomize_everything(testing.random_gemma3(cfg))


def _logits(model, n=12):
    toks = jnp.arange(2, 2 + n, dtype=jnp.int32)[None]
    mask = jnp.ones_like(toks, dtype=bool)
    from tunix.sft import utils as su

    out, _ = model(toks, su.build_positions_from_mask(mask), None, su.make_causal_attn_mask(mask))
    return np.asarray(out)


@pytest.mark.parametrize("shards", [1, 2])
def test_hf_layout_loads_exactly_through_real_path(tmp_path, tiny, shards):
    cfg, src = tiny
    folder = checkpoints.write_hf_checkpoint(
        src,
        cfg,
        tmp_path / "m",
        shards=shards,
        extra_files={"tokenizer.model": testing.tokenizer_path()},
    )
    if shards > 1:
        index = json.loads((folder / checkpoints.INDEX_FILE).read_text())
        assert len(set(index["weight_map"].values())) == shards
    lm = models.load_model("tiny-gemma3", path=folder, verbose=False)
    a, b = nnx.to_pure_dict(nnx.state(src)), nnx.to_pure_dict(nnx.state(lm.model))
    diffs = jax.tree.leaves(
        jax.tree.map(lambda x, y: float(np.abs(np.asarray(x) - np.asarray(y)).max()), a, b)
    )
    assert max(diffs) == 0.0
    np.testing.assert_array_equal(_logits(src), _logits(lm.model))
    assert lm.eos_ids == [3, 5]  # EOS and <end_of_turn> of the tiny tokenizer


def test_shape_mismatch_names_tensor_and_both_shapes(tmp_path, tiny):
    cfg, src = tiny
    folder = checkpoints.write_hf_checkpoint(src, cfg, tmp_path / "m")
    wrong = testing.gemma3_config(cfg.num_embed, testing.TinyShape(hidden_dim=256))
    with pytest.raises(
        checkpoints.CheckpointError,
        match=r"'model.layers.0.mlp.gate_proj.weight' has shape \(512, 128\), but the config expects \(256, 128\)",
    ):
        checkpoints.validate_hf_checkpoint(folder, wrong)


def test_missing_files_and_unknown_ids(tmp_path):
    with pytest.raises(models.UnknownModelError, match="Supported: gemma-2-2b-it, gemma-3-1b-it"):
        models.load_model("gemma-7b")
    (tmp_path / "empty").mkdir()
    with pytest.raises(checkpoints.CheckpointError, match="no \\*.safetensors files"):
        models.load_model("tiny-gemma3", path=tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="model folder not found"):
        models.load_model("tiny-gemma3", path=tmp_path / "nowhere")


def test_missing_credentials_name_the_secret(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    for k in (
        "HF_TOKEN",
        "KAGGLE_USERNAME",
        "KAGGLE_KEY",
        "KAGGLE_API_TOKEN",
        "KAGGLE_KERNEL_RUN_TYPE",
    ):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(models.runtime.MissingSecretError, match="'HF_TOKEN'.*google/gemma-3-1b-it"):
        models.load_model("gemma-3-1b-it", source="hf")
    with pytest.raises(models.runtime.MissingSecretError, match="'KAGGLE_USERNAME'"):
        models.load_model("gemma-3-270m-it", source="kaggle")


def test_lora_shares_backbone_and_orbax_roundtrip(tmp_path, tiny):
    cfg, src = tiny
    folder = checkpoints.write_hf_checkpoint(
        src, cfg, tmp_path / "m", extra_files={"tokenizer.model": testing.tokenizer_path()}
    )
    base = models.load_model("tiny-gemma3", path=folder, verbose=False).model
    lora = models.apply_lora(base, rank=4, alpha=8.0, verbose=False)
    trainable, total = models.count_params(lora)
    assert 0 < trainable < total / 5
    np.testing.assert_allclose(_logits(lora), _logits(src), atol=1e-5)  # B = 0 at init
    for _, v in nnx.iter_graph(lora):  # pretend training moved the adapters
        if isinstance(v, nnx.LoRAParam):
            v.value = v.value + 0.05
    want = _logits(lora)
    checkpoints.save_state(lora, tmp_path / "lora", lora_only=True)
    fresh = models.apply_lora(
        models.load_model("tiny-gemma3", path=folder, verbose=False).model,
        rank=4,
        alpha=8.0,
        seed=9,
        verbose=False,
    )
    checkpoints.restore_state(fresh, tmp_path / "lora", lora_only=True)
    np.testing.assert_array_equal(_logits(fresh), want)

    merged_dir = checkpoints.export_merged(lora, folder, tmp_path / "merged", rank=4, alpha=8.0)
    merged = models.load_model("tiny-gemma3", path=merged_dir, verbose=False)
    assert not jax.tree.leaves(nnx.state(merged.model, nnx.LoRAParam))
    np.testing.assert_allclose(_logits(merged.model), want, atol=1e-5)
    assert (pathlib.Path(merged_dir) / "tokenizer.model").is_file()
    orbax_dir = checkpoints.export_orbax(merged.model, tmp_path / "orbax")
    again = models.load_model("tiny-gemma3", path=folder, verbose=False).model
    checkpoints.restore_state(again, orbax_dir)
    np.testing.assert_array_equal(_logits(again), _logits(merged.model))
    with pytest.raises(checkpoints.CheckpointError, match="merge first"):
        checkpoints.export_orbax(lora, tmp_path / "bad")


def test_config_json_round_trip_and_extra_tensors_rejected(tmp_path, tiny):
    cfg, src = tiny
    folder = checkpoints.write_hf_checkpoint(src, cfg, tmp_path / "m")
    back = checkpoints.gemma3_config_from_hf(folder, dtype=cfg.param_dtype)
    assert {f: getattr(back, f) for f in ("num_layers", "num_embed", "embed_dim", "hidden_dim", "num_heads", "head_dim",
            "num_kv_heads", "sliding_window_size", "local_base_frequency", "global_base_frequency",
            "global_scale_factor", "query_pre_attn_norm")} == {
        f: getattr(cfg, f) for f in ("num_layers", "num_embed", "embed_dim", "hidden_dim", "num_heads", "head_dim",
            "num_kv_heads", "sliding_window_size", "local_base_frequency", "global_base_frequency",
            "global_scale_factor", "query_pre_attn_norm")}  # fmt: skip
    fewer = testing.gemma3_config(cfg.num_embed, testing.TinyShape(num_layers=1))
    with pytest.raises(checkpoints.CheckpointError, match="does not expect.*num_layers=1"):
        checkpoints.validate_hf_checkpoint(folder, fewer)


def test_qlora_nf4_quantizes_the_frozen_base_and_trains_only_adapters(tmp_path, tiny):
    cfg, src = tiny
    folder = checkpoints.write_hf_checkpoint(
        src, cfg, tmp_path / "m", extra_files={"tokenizer.model": testing.tokenizer_path()}
    )
    q = models.apply_lora(
        models.load_model("tiny-gemma3", path=folder, verbose=False).model,
        rank=4,
        alpha=8.0,
        qlora=True,
        tile_size=32,
        verbose=False,
    )
    diff = np.abs(_logits(q) - _logits(src)).max()
    assert 0 < diff < 0.5 * np.abs(_logits(src)).max()  # nf4 changes the base a little, not a lot
    trainable, total = models.count_params(q)
    assert 0 < trainable < total
