"""Llama 3.x, Qwen2/2.5 and Qwen3 through tunix's own model code, checked as the Gemma families are.

- **Equal logits to transformers** (``LlamaForCausalLM``, ``Qwen2ForCausalLM``,
  ``Qwen3ForCausalLM``, fp32, eager attention) for a tiny random model written in the HF layout and
  read by tunixkit's loader: every weight random (norms around 1, Qwen2's biases too), untied
  output heads where the family allows them, and RoPE bases other than tunix's default 1,000,000
  (Llama 3's 500,000 with Llama 3.1's frequency scaling; Qwen3 at 100,000), which
  ``_compat.config_rope`` makes tunix use.
- **The merged LoRA export** loads in transformers with the LoRA model's logits.
- **Chat template, BOS and stop pieces** as each family's tokenizer and template write them.
- **The training path**: LoRA SFT steps train only the adapters, greedy evaluation answers, and the
  export reloads (tunixkit and tunix's Orbax alone) to the same weights; GRPO and DPO steps run on
  Qwen3 (the model call they make is the one evaluation and SFT make, per family).

torch==2.13.0 comes from ``<venv>/xcheck`` (requirements-xcheck.txt), as in
``test_transformers_xcheck.py``.
"""

import dataclasses
import importlib
import pathlib
import sys

import jax
import numpy as np
import pytest

# As in test_transformers_xcheck.py: torch on the path before transformers is first imported.
XCHECK = pathlib.Path(sys.prefix) / "xcheck"
if XCHECK.is_dir():
    sys.path.append(str(XCHECK))
import torch  # noqa: E402
import transformers  # noqa: E402
from flax import nnx  # noqa: E402

from tunixkit import (  # noqa: E402
    _compat,
    checkpoints,
    data,
    evaluation,
    families,
    models,
    preferences,
    prompting,
    rewards,
    rl,
    runlog,
    runtime,
    testing,
    training,
)

NEW = ("llama3", "qwen2", "qwen3")
LLAMA31_SCALING = {  # Llama 3.1's kind, its original context shrunk to reach the tiny positions
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}


def _config(family: str):
    cfg = testing.config(f"tiny-{family}")
    if family == "llama3":
        fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
        return _compat.llama3_config(fields | {"weight_tying": False}, LLAMA31_SCALING)
    if family == "qwen2":
        return dataclasses.replace(cfg, rope_theta=10_000, use_tied_embedding=False)
    return dataclasses.replace(cfg, rope_theta=100_000)


def _random(cfg, family: str, seed: int = 0):
    model = testing.randomize_all(testing.random_model(cfg, family=family), seed=seed)
    for _, node in nnx.iter_graph(model):  # RMSNorm weights multiply (no 1 + w): around 1
        if type(node).__name__ == "RMSNorm":
            node.w.value = node.w.value + 1.0
    return model


def _hf_logits(folder, family: str, toks):
    cls = getattr(transformers, families.get(family).architecture)
    hf = cls.from_pretrained(str(folder), dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        return hf(input_ids=torch.from_numpy(toks).long()).logits.float().numpy()


@pytest.fixture(scope="module", params=NEW)
def written(request, tmp_path_factory):
    family = request.param
    tmp = tmp_path_factory.mktemp(family)
    cfg = _config(family)
    src = _random(cfg, family)
    tok = testing.write_family_tokenizer(family, tmp / "base")
    folder = checkpoints.write_hf_checkpoint(
        src,
        cfg,
        tmp / "base",
        family=family,
        eos_token_id=tok.stop_ids(families.get(family).end_of_turn),
        pad_token_id=tok.pad_id(),
        bos_token_id=tok.bos_id(),
    )
    toks = np.random.default_rng(0).integers(4, tok.vocab_size, size=(2, 40)).astype(np.int32)
    return family, cfg, src, folder, toks, tmp


def test_loaded_checkpoint_has_the_logits_of_transformers(written):
    family, cfg, src, folder, toks, _ = written
    loaded = models.load_model(f"tiny-{family}", path=folder, verbose=False)
    assert loaded.config == cfg  # config.json -> tunix config, the RoPE scaling included
    ours = testing.logits(loaded.model, toks)
    assert np.abs(ours).max() > 1.0  # a meaningful comparison, not two near-zero outputs
    np.testing.assert_allclose(ours, testing.logits(src, toks), atol=1e-5)
    np.testing.assert_allclose(_hf_logits(folder, family, toks), ours, atol=1e-4)


def test_merged_lora_export_matches_in_transformers(written):
    family, _, _, folder, toks, tmp = written
    base = models.load_model(f"tiny-{family}", path=folder, verbose=False)
    lora = models.apply_lora(base.model, family=family, rank=4, alpha=8.0, verbose=False)
    key, wrapped = jax.random.key(3), set()
    for path, v in nnx.iter_graph(lora):
        if isinstance(v, nnx.LoRAParam):
            key, sub = jax.random.split(key)
            v.value = v.value + 0.05 * jax.random.normal(sub, v.value.shape)
            wrapped.add(str(path[-2]))
    assert wrapped == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    want = testing.logits(lora, toks)
    out = models.export(lora, base, tmp / "export", lora_rank=4, lora_alpha=8.0)
    merged = models.load_model(f"tiny-{family}", path=out["hf"], verbose=False)
    np.testing.assert_allclose(testing.logits(merged.model, toks), want, atol=2e-5)
    np.testing.assert_allclose(_hf_logits(out["hf"], family, toks), want, atol=1e-4)


def test_tunix_rotates_by_the_config_rope_base():
    """With ``_compat.config_rope`` two bases give two models; tunix's own attention block (what
    the patch wraps) rotates both by its default base, so they would be one model."""
    from tunix.models.llama3 import model as llama3

    cfg = testing.config("tiny-llama3")
    model = _random(cfg, "llama3")
    other = nnx.merge(nnx.graphdef(model), nnx.state(model))
    other.config = dataclasses.replace(cfg, rope_theta=10_000)
    for layer in other.layers:
        layer.attn.config = other.config
    assert not np.allclose(testing.logits(model), testing.logits(other), atol=1e-3)
    patched = llama3.Attention.block
    llama3.Attention.block = patched.__wrapped__
    try:
        np.testing.assert_allclose(testing.logits(model), testing.logits(other), atol=1e-6)
    finally:
        llama3.Attention.block = patched


@pytest.mark.parametrize("family", NEW)
def test_qwen_trains_with_qlora(family):
    """QLoRA (nf4) weights through tunix's Qwen ``Einsum``, which casts its weight with
    ``jnp.astype`` (``_compat.quantizable_einsum``); Llama's Einsum takes them as they are."""
    lm = models.load_model(f"tiny-{family}", verbose=False)
    lora = models.apply_lora(lm.model, family=family, rank=4, qlora=True, verbose=False)
    plain = testing.logits(lm.model)
    quantized = testing.logits(lora)  # nf4 backbone, zero-initialised adapters' B: close
    assert np.abs(quantized - plain).max() < 0.2 * np.abs(plain).max()
    if family == "llama3":
        return
    einsum = importlib.import_module(families.get(family).model_module).Einsum
    patched = einsum.__call__
    einsum.__call__ = patched.__wrapped__
    try:
        with pytest.raises(TypeError, match="astype requires ndarray"):
            testing.logits(lora)
    finally:
        einsum.__call__ = patched


def test_a_config_tunix_cannot_build_is_refused(tmp_path):
    hf = families.get("qwen2").hf_config(testing.config("tiny-qwen2"))
    with pytest.raises(ValueError, match="sliding-window attention"):
        families.get("qwen2").config_from_hf(hf | {"use_sliding_window": True}, None)
    with pytest.raises(ValueError, match="RoPE scaling 'yarn'"):
        families.get("qwen3").config_from_hf(
            hf | {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, None
        )
    with pytest.raises(ValueError, match="attention biases"):
        families.get("llama3").config_from_hf(hf | {"attention_bias": True}, None)


CHATS = {  # what each family's Hugging Face chat template writes for a system and a user turn
    "llama3": "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\n1+1?<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "qwen2": "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n1+1?<|im_end|>\n"
    "<|im_start|>assistant\n",
}
CHATS["qwen3"] = CHATS["qwen2"]
FIRST = {"llama3": "<|begin_of_text|>", "qwen2": "<|im_start|>", "qwen3": "<|im_start|>"}


@pytest.mark.parametrize("family", NEW)
def test_chat_template_bos_and_stop_pieces(family):
    lm = models.load_model(f"tiny-{family}", verbose=False)
    prompt = lm.chat.prompt("1+1?", "Be brief.")
    assert prompt == CHATS[family] == prompting.format_prompt("1+1?", "Be brief.", family=family)
    tok = lm.tokenizer
    ids = tok.with_bos(tok.encode(prompt))
    assert tok.decode(ids[:1]) == FIRST[family]  # Qwen's tokenizer prepends no BOS
    assert (tok.bos_id() is None) == (family != "llama3")
    end = tok.token_id(lm.chat.end_of_turn)
    assert end is not None and tok.encode(lm.chat.end_of_turn) == [end]
    assert lm.eos_ids == [end]
    good = prompting.format_completion("1+1=2", "2", family=family)
    assert rewards.format_exact([prompt], [good])[0] > 0


@pytest.fixture(scope="module")
def records():
    rows = testing.synthetic_gsm8k(48, seed=8, max_operand=9)
    return data.to_records(rows, "s", verbose=False)[0]


@pytest.mark.parametrize("family", NEW)
def test_lora_sft_evaluation_and_export_and_qwen3_grpo_dpo(family, records, tmp_path):
    from tunix.sft import peft_trainer

    mesh = runtime.make_mesh()
    lm = models.load_model(f"tiny-{family}", mesh=mesh, verbose=False)
    tok = lm.tokenizer
    tuned = models.apply_lora(lm.model, family=family, rank=4, alpha=8.0, mesh=mesh, verbose=False)
    backbone = runlog.digest(nnx.state(tuned, nnx.Not(nnx.LoRAParam)))
    before = runlog.digest(tuned)

    pairs = [data.sft_pair(r, family=family) for r in records]
    ds = training.sft_dataset(pairs, tok, max_len=144, batch_size=4, num_batches=2, verbose=False)
    config = peft_trainer.TrainingConfig(
        eval_every_n_steps=10**6, max_steps=2, pbar_description=None
    )
    trainer = peft_trainer.PeftTrainer(tuned, training.optimizer(1e-2, 2), config)
    trainer.with_gen_model_input_fn(training.model_inputs_fn(tok.pad_id())).train(ds)
    assert trainer.train_steps == 2 and runlog.digest(tuned) != before
    assert runlog.digest(nnx.state(tuned, nnx.Not(nnx.LoRAParam))) == backbone
    if family == "qwen3":  # GRPO and DPO once: the model call they add is the families' same
        _grpo_and_dpo_steps(lm, tuned, pairs, records, mesh, tmp_path)

    result = evaluation.evaluate(
        lm, records[:4], name=family, config=evaluation.EvalConfig.smoke(), progress=False
    )
    assert result.n == 4 and result.mean_tokens > 0
    out = models.export(tuned, lm, tmp_path / "export", lora_rank=4, lora_alpha=8.0, mesh=mesh)
    again = models.load_model(f"tiny-{family}", path=out["hf"], verbose=False)
    orbax = testing.load_orbax_export(out["orbax"])  # tunix alone rebuilds it
    assert runlog.digest(orbax) == runlog.digest(again.model)
    np.testing.assert_allclose(testing.logits(again.model), testing.logits(tuned), atol=2e-5)


def _grpo_and_dpo_steps(lm, tuned, pairs, records, mesh, tmp_path):
    from tunix.sft.dpo import dpo_trainer

    tok = lm.tokenizer
    family = lm.family
    settings = rl.GRPOSettings(
        learning_rate=1e-3,
        beta=0.1,
        max_prompt_length=96,
        max_generation_steps=16,
        batch_size=2,
        num_generations=2,
        num_steps=1,
        checkpoint_every=1,
    )
    learner, _ = rl.build_grpo(
        tuned,
        lm.model,
        tok,
        mesh=mesh,
        settings=settings,
        reward_fns=rewards.DEFAULT_REWARDS,
        output_dir=tmp_path / "grpo",
        eos_ids=lm.eos_ids,
        vocab_size=families.vocab_size(lm.config),
        family=family,
    )
    fit = evaluation.prompt_fitter(tok, settings.max_prompt_length)
    grpo_batches = data.grpo_dataset(records, batch_size=2, num_batches=1, family=family, fit=fit)
    result = training.run(
        learner, grpo_batches, mesh=mesh, metrics_file=tmp_path / "grpo.jsonl", label="GRPO"
    )
    assert (result.steps, result.stopped) == (1, "done")

    dpo_pairs = [
        {"prompt": p, "chosen": c, "rejected": "no" + lm.chat.end_of_turn} for p, c in pairs[:8]
    ]
    lengths = {"max_prompt_length": 96, "max_response_length": 48}
    dpo = dpo_trainer.DPOTrainer(
        tuned,
        lm.model,
        training.optimizer(1e-2, 2),
        training.trainer_config(
            tmp_path / "dpo",
            max_steps=2,
            eval_every=10**6,
            checkpoint_every=10,
            description=None,
            config_cls=dpo_trainer.DPOTrainingConfig,
            algorithm="dpo",
            beta=0.5,
        ),
    )
    batches = preferences.preference_dataset(dpo_pairs, tok, batch_size=4, num_batches=2, **lengths)
    assert training.run(dpo, batches, metrics_file=tmp_path / "dpo.jsonl", label="DPO").steps == 2
