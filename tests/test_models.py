"""Loading real-layout checkpoints, validation errors, LoRA/QLoRA, Orbax round trips, the export."""

import json
import pathlib

import jax
import numpy as np
import pytest
from flax import nnx

from tunixkit import checkpoints, families, models, packaged, runlog, testing


@pytest.fixture(scope="module")
def tiny():
    cfg = testing.config("tiny-gemma3")
    return cfg, testing.randomize_all(testing.random_model(cfg))


def _write(tmp_path, cfg, src, **kw):
    return checkpoints.write_hf_checkpoint(
        src, cfg, tmp_path / "m", extra_files={"tokenizer.model": testing.tokenizer_path()}, **kw
    )


@pytest.mark.parametrize("shards", [1, 2])
def test_hf_layout_loads_exactly_through_real_path(tmp_path, tiny, shards):
    cfg, src = tiny
    folder = _write(tmp_path, cfg, src, shards=shards)
    if shards > 1:
        index = json.loads((folder / checkpoints.INDEX_FILE).read_text())
        assert len(set(index["weight_map"].values())) == shards
    lm = models.load_model("tiny-gemma3", path=folder, verbose=False)
    a, b = nnx.to_pure_dict(nnx.state(src)), nnx.to_pure_dict(nnx.state(lm.model))
    diffs = jax.tree.leaves(
        jax.tree.map(lambda x, y: float(np.abs(np.asarray(x) - np.asarray(y)).max()), a, b)
    )
    assert max(diffs) == 0.0
    np.testing.assert_array_equal(testing.logits(src), testing.logits(lm.model))
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
    with pytest.raises(families.UnknownFamilyError, match="Known families: .*gemma3.*qwen3"):
        families.get("mistral")
    (tmp_path / "empty").mkdir()
    with pytest.raises(checkpoints.CheckpointError, match="no config.json"):
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


def _backbone(model) -> dict:
    return dict(jax.tree_util.tree_flatten_with_path(nnx.state(model, nnx.Not(nnx.LoRAParam)))[0])


def test_lora_shares_the_backbone_and_round_trips(tmp_path, tiny):
    cfg, src = tiny
    folder = _write(tmp_path, cfg, src)
    base = models.load_model("tiny-gemma3", path=folder, verbose=False).model
    lora = models.apply_lora(base, rank=4, alpha=8.0, verbose=False)
    shared, own = _backbone(base), _backbone(lora)
    assert shared.keys() == own.keys() and all(own[k] is shared[k] for k in shared), (
        "LoRA copied the backbone"
    )
    trainable, total = models.count_params(lora)
    assert 0 < trainable < total / 5
    np.testing.assert_allclose(
        testing.logits(lora), testing.logits(src), atol=1e-5
    )  # B = 0 at init
    for _, v in nnx.iter_graph(lora):  # pretend training moved the adapters
        if isinstance(v, nnx.LoRAParam):
            v.value = v.value + 0.05
    want = testing.logits(lora)
    checkpoints.save_state(lora, tmp_path / "lora", lora_only=True)
    fresh = models.apply_lora(
        models.load_model("tiny-gemma3", path=folder, verbose=False).model,
        rank=4,
        alpha=8.0,
        seed=9,
        verbose=False,
    )
    checkpoints.restore_state(fresh, tmp_path / "lora", lora_only=True)
    np.testing.assert_array_equal(testing.logits(fresh), want)


def test_the_model_to_train_is_lora_on_the_weights_or_a_copy_beside_the_reference(tmp_path, tiny):
    """models.trainable: LoRA on the loaded weights (sharing them); no rank with a frozen
    reference: a second copy of the same weights (training it leaves the reference alone); no rank
    and no reference (SFT): the loaded model itself."""
    cfg, src = tiny
    loaded = models.load_model("tiny-gemma3", path=_write(tmp_path, cfg, src), verbose=False)
    lora = models.trainable(loaded, lora_rank=4, lora_alpha=8.0, verbose=False)
    assert 0 < models.count_params(lora)[0] < models.count_params(loaded.model)[1] / 5
    shared, own = _backbone(loaded.model), _backbone(lora)
    assert all(own[k] is shared[k] for k in shared)
    copy = models.trainable(loaded, lora_rank=None, verbose=False)
    assert copy is not loaded.model
    assert not any(a is b for a, b in zip(_backbone(copy).values(), shared.values(), strict=True))
    np.testing.assert_array_equal(testing.logits(copy), testing.logits(loaded.model))
    assert models.trainable(loaded, lora_rank=None, reference=False) is loaded.model


@pytest.mark.parametrize("preset", ["GRPO", "DPO"])
def test_lora_rank_knob_alone_gives_adapters_scaled_by_one(tmp_path, tiny, preset):
    from tunixkit import recipes

    # LORA_RANK alone must give adapters scaled by 1, also on a recipe that fine-tunes fully (DPO
    # smoke): an alpha of 0, which such recipes once carried, scales them by 0 (no effect, no gradient)
    recipe = recipes.start(getattr(recipes, preset), "smoke", tmp_path, verbose=False, lora_rank=4)
    recipe = recipe.recipe
    # a model of its own: the adapters share its arrays, and randomize_all sets them
    src = testing.random_model(tiny[0])
    lora = models.apply_lora(src, rank=recipe.lora_rank, alpha=recipe.lora_alpha, verbose=False)
    scaled = models.apply_lora(src, rank=4, alpha=4.0, verbose=False)
    for model in (lora, scaled):
        testing.randomize_all(model, seed=3)  # the same adapters (and backbone) in both
    np.testing.assert_array_equal(testing.logits(lora), testing.logits(scaled))
    assert np.abs(testing.logits(lora) - testing.logits(src)).max() > 1e-3
    with pytest.raises(ValueError, match="alpha must be > 0"):
        models.apply_lora(src, rank=4, alpha=0.0, verbose=False)


def _train(model, tok, steps: int = 3):
    from tunix.sft import peft_trainer

    from tunixkit import data, training

    records = data.to_records(testing.synthetic_gsm8k(32, seed=4), "s", verbose=False)[0]
    ds = training.sft_dataset(
        [data.sft_pair(r) for r in records],
        tok,
        max_len=144,
        batch_size=4,
        num_batches=steps,
        verbose=False,
    )
    config = peft_trainer.TrainingConfig(
        eval_every_n_steps=10**6, max_steps=steps, pbar_description=None
    )
    trainer = peft_trainer.PeftTrainer(model, training.optimizer(1e-2, steps), config)
    trainer.with_gen_model_input_fn(training.model_inputs_fn(tok.pad_id())).train(ds)


def test_qlora_quantizes_the_backbone_to_nf4_and_trains_only_adapters(tmp_path, tiny):
    cfg, src = tiny
    lm = models.load_model("tiny-gemma3", path=_write(tmp_path, cfg, src), verbose=False)
    q = models.apply_lora(lm.model, rank=4, alpha=8.0, qlora=True, verbose=False)
    kernels = [n for _, n in nnx.iter_graph(q) if type(n).__name__ == "QArray"]
    assert len(kernels) == 6 * cfg.num_layers  # q, kv, attn_vec, gate, up, down in every layer
    assert {k.qtype for k in kernels} == {"nf4"} and {
        str(k.qvalue.value.dtype) for k in kernels
    } == {"uint4"}
    assert models.footprint(q)["bytes"] < 0.5 * models.footprint(lm.model)["bytes"]
    diff = np.abs(testing.logits(q) - testing.logits(src)).max()
    assert (
        0 < diff < 0.5 * np.abs(testing.logits(src)).max()
    )  # nf4 changes the base a little, not a lot
    frozen = {k: np.asarray(v) for k, v in _backbone(q).items()}
    adapters = runlog.digest(q)
    _train(q, lm.tokenizer)
    after = _backbone(q)
    assert all(np.array_equal(frozen[k], np.asarray(after[k])) for k in frozen), (
        "QLoRA training moved the backbone"
    )
    assert runlog.digest(q) != adapters, "QLoRA training did not move the adapters"


def test_config_json_round_trip_and_extra_tensors_rejected(tmp_path, tiny):
    cfg, src = tiny
    folder = checkpoints.write_hf_checkpoint(src, cfg, tmp_path / "m")
    back = families.get("gemma3").config_from_hf(families.read_hf_config(folder), cfg.param_dtype)
    assert checkpoints.tunix_config_dict(back) == checkpoints.tunix_config_dict(cfg)
    fewer = testing.gemma3_config(cfg.num_embed, testing.TinyShape(num_layers=1))
    with pytest.raises(checkpoints.CheckpointError, match="does not expect.*num_layers=1"):
        checkpoints.validate_hf_checkpoint(folder, fewer)


@pytest.mark.parametrize("model_id", sorted(m for m, s in models.MODELS.items() if s.preset))
def test_released_config_json_gives_tunix_preset(model_id):
    """The config.json of each released model (as published on the Hugging Face hub, kept in
    tests/data) parses to tunix's preset for it, so downloads load with the right shape. One known
    difference: tunix's Gemma2-2B preset pads the vocabulary to 256,128 rows while the checkpoint
    has 256,000 (tunix's loader quietly uses the checkpoint's; tunixkit's config says so upfront).
    A packaged model (``gemma-3-270m``) is checked on the config.json written from its GGUF."""
    spec = models.get_spec(model_id)
    fam = families.get(spec.family)
    if spec.packaged:  # from the package index: the config.json its conversion writes and loads
        hf = families.read_hf_config(packaged.materialize(model_id))
    else:
        hf = json.loads(
            (pathlib.Path(__file__).parent / "data" / f"{model_id}.config.json").read_text()
        )
    preset = checkpoints.tunix_config_dict(getattr(fam.config_cls(), spec.preset)())
    parsed = checkpoints.tunix_config_dict(fam.config_from_hf(hf, preset.get("param_dtype")))
    if spec.family == "gemma2":
        assert (preset.pop("num_embed"), parsed.pop("num_embed")) == (256128, hf["vocab_size"])
    assert parsed == preset


def _perturb_adapters(model, seed: int) -> None:
    key = jax.random.key(seed)
    for _, v in nnx.iter_graph(model):
        if isinstance(v, nnx.LoRAParam):
            key, sub = jax.random.split(key)
            v.value = 0.05 * jax.random.normal(sub, v.value.shape).astype(v.value.dtype)


def _copy_adapters(src, dst) -> None:
    nnx.update(dst, nnx.state(src, nnx.LoRAParam))


@pytest.mark.parametrize("qlora", [False, True])
def test_export_merges_adapters_and_orbax_loads_with_tunix_alone(tmp_path, tiny, qlora):
    """LoRA is merged into the base weights; QLoRA adapters into the *original* (unquantized) base
    weights, so the export equals the same adapters on the bf16/fp32 base. The Orbax export loads
    with tunix's own model class, config and Orbax, as the competition's judges load it."""
    cfg, src = tiny
    base = models.load_model("tiny-gemma3", path=_write(tmp_path, cfg, src), verbose=False)
    tuned = models.apply_lora(base.model, rank=4, alpha=8.0, qlora=qlora, verbose=False)
    _perturb_adapters(tuned, 5)
    on_original = models.apply_lora(
        models.load_model("tiny-gemma3", path=base.path, verbose=False).model,
        rank=4,
        alpha=8.0,
        verbose=False,
    )
    _copy_adapters(tuned, on_original)
    want = testing.logits(on_original)
    out = models.export(tuned, base, tmp_path / "export", lora_rank=4, lora_alpha=8.0)
    merged = models.load_model("tiny-gemma3", path=out["hf"], verbose=False)
    assert not jax.tree.leaves(nnx.state(merged.model, nnx.LoRAParam))
    assert (out["hf"] / "tokenizer.model").is_file() and (
        out["orbax"] / "tokenizer.model"
    ).is_file()
    np.testing.assert_allclose(testing.logits(merged.model), want, atol=1e-4)
    judged = testing.load_orbax_export(out["orbax"])
    np.testing.assert_array_equal(testing.logits(judged), testing.logits(merged.model))


def test_merge_handles_fused_qkv_that_tunix_merger_cannot(tmp_path):
    """num_heads == num_kv_heads fuses q/k/v into one einsum, which tunix 0.1.7's own merger
    mis-names (qk_einsum) and fails on; tunixkit merges in memory."""
    cfg = testing.gemma3_config(
        testing.load_tokenizer().vocab_size, testing.TinyShape(num_heads=2, num_kv_heads=2)
    )
    src = testing.randomize_all(testing.random_model(cfg))
    base = models.load_model("tiny-gemma3", path=_write(tmp_path, cfg, src), verbose=False)
    assert base.model.layers[0].attn.use_qkv_einsum
    tuned = models.apply_lora(base.model, rank=4, alpha=8.0, verbose=False)
    _perturb_adapters(tuned, 6)
    want = testing.logits(tuned)
    out = models.export(tuned, base, tmp_path / "export", lora_rank=4, lora_alpha=8.0)
    np.testing.assert_allclose(
        testing.logits(models.load_model("tiny-gemma3", path=out["hf"], verbose=False).model),
        want,
        atol=1e-4,
    )


def test_qlora_shards_when_the_mesh_cannot_split_the_scales():
    """gemma-3-1b's width 1,152 makes 9 nf4 tiles, which 8 devices cannot split; here a width of 96
    makes 3 tiles of 32 on the tests' 2 devices. The scales are replicated instead of failing."""
    from tunixkit import runtime

    cfg = testing.gemma3_config(
        testing.load_tokenizer().vocab_size, testing.TinyShape(embed_dim=96, hidden_dim=384)
    )
    mesh = runtime.make_mesh()
    assert mesh.shape["fsdp"] == 2
    q = models.apply_lora(
        testing.random_model(cfg), rank=4, alpha=8.0, qlora=True, mesh=mesh, verbose=False
    )
    scale = q.layers[0].attn.kv_einsum.w.array.scale.value
    assert scale.shape[2] == 3 and scale.sharding.spec[2] is None
    assert np.isfinite(testing.logits(q)).all()


def test_orbax_export_from_a_mesh_loads_on_another_machine(tmp_path, tiny):
    """The judges load the export on their own machine: an export written from a 2-device mesh
    restores with tunix's classes and a plain Orbax restore in a 1-device process (a checkpoint
    that kept the mesh's devices raised "Topology mismatch" there)."""
    import subprocess
    import sys

    from tunixkit import runtime

    cfg, src = tiny
    mesh = runtime.make_mesh()
    assert mesh.devices.size == 2
    base = models.load_model(
        "tiny-gemma3", path=_write(tmp_path, cfg, src), mesh=mesh, verbose=False
    )
    out = models.export(base.model, base, tmp_path / "export", mesh=mesh)
    np.save(tmp_path / "want.npy", testing.logits(base.model))
    code = (
        "import sys, numpy as np; from tunixkit import testing; "
        "got = testing.logits(testing.load_orbax_export(sys.argv[1])); "
        "np.testing.assert_allclose(got, np.load(sys.argv[2]), atol=1e-5); print('ok')"
    )
    env = {**__import__("os").environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(out["orbax"]), str(tmp_path / "want.npy")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
