"""Gemma2-2B's code path, at a tiny shape: everything the notebooks' full profile does with it.

The tiny Gemma2 (``tiny-gemma2``: one local and one global layer, grouped-query attention, the
2B's soft-caps) is written in the HF layout and loaded through the real loader, then: QLoRA and
LoRA SFT steps, a GRPO step with LoRA on the shared reference and a KL term, DPO steps and their
held-out scores, greedy evaluation, and the merged HF + Orbax export (its transformers cross-check is
in ``test_transformers_xcheck.py``). The released config.json parses in ``test_models.py``.
"""

import numpy as np
import pytest
from flax import nnx

from tunixkit import (
    data,
    evaluation,
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

ID = "tiny-gemma2"


@pytest.fixture(scope="module")
def records():
    return data.to_records(testing.synthetic_gsm8k(64, seed=8, max_operand=9), "s", verbose=False)[
        0
    ]


def _sft(model, tok, records, steps=2):
    from tunix.sft import peft_trainer

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
    return trainer.train_steps


@pytest.mark.parametrize("qlora", [True, False])
def test_sft_steps_train_only_the_adapters(records, qlora):
    lm = models.load_model(ID, verbose=False)
    assert lm.family == "gemma2" and lm.tokenizer.stop_ids() == lm.eos_ids
    tuned = models.apply_lora(
        lm.model, family="gemma2", rank=4, alpha=8.0, qlora=qlora, verbose=False
    )
    before = runlog.digest(tuned)
    backbone = {
        k: np.asarray(v) for k, v in nnx.to_flat_state(nnx.state(tuned, nnx.Not(nnx.LoRAParam)))
    }
    assert _sft(tuned, lm.tokenizer, records) == 2
    assert runlog.digest(tuned) != before
    after = dict(nnx.to_flat_state(nnx.state(tuned, nnx.Not(nnx.LoRAParam))))
    assert all(np.array_equal(backbone[k], np.asarray(after[k])) for k in backbone)


def test_grpo_step_with_lora_on_the_shared_reference(tmp_path, records):
    mesh = runtime.make_mesh()
    reference = models.load_model(ID, mesh=mesh, verbose=False)
    actor = models.apply_lora(
        reference.model, family="gemma2", rank=4, alpha=8.0, mesh=mesh, verbose=False
    )
    settings = rl.GRPOSettings(
        learning_rate=1e-3,
        beta=0.1,
        max_prompt_length=96,
        max_generation_steps=16,
        batch_size=2,
        num_generations=2,
        num_steps=2,
        checkpoint_every=2,
    )
    learner, _ = rl.build_grpo(
        actor,
        reference.model,
        reference.tokenizer,
        mesh=mesh,
        settings=settings,
        reward_fns=rewards.DEFAULT_REWARDS,
        output_dir=tmp_path,
        eos_ids=reference.eos_ids,
        vocab_size=reference.config.num_embed,
    )
    batches = data.grpo_dataset(records, batch_size=2, num_batches=2)
    result = training.run(
        learner, batches, mesh=mesh, metrics_file=tmp_path / "metrics.jsonl", label="GRPO"
    )
    assert (result.steps, result.stopped) == (2, "done")
    series = rl.curves(tmp_path / "metrics.jsonl")
    assert len(series["reward"][1]) == 2 and np.all(np.isfinite(series["kl"][1]))


def test_dpo_steps_and_heldout_scores(tmp_path, records):
    from tunix.sft.dpo import dpo_trainer

    reference = models.load_model(ID, verbose=False)
    actor = models.apply_lora(reference.model, family="gemma2", rank=4, alpha=8.0, verbose=False)
    pairs = [
        {
            "prompt": prompting.format_prompt(r["question"]),
            "chosen": prompting.format_completion(r["solution"], r["answer"]),
            "rejected": "no idea" + prompting.END_OF_TURN,
        }
        for r in records[:16]
    ]
    lengths = {"max_prompt_length": 88, "max_response_length": 48}
    heldout = preferences.preference_dataset(
        pairs[:8], reference.tokenizer, batch_size=4, **lengths
    )
    before = preferences.score(actor, reference.model, heldout, beta=0.5)
    assert before.reward_accuracy == 0.5  # the policy is the reference: every pair a tie
    config = training.trainer_config(
        tmp_path,
        max_steps=3,
        eval_every=10**6,
        checkpoint_every=10,
        description=None,
        config_cls=dpo_trainer.DPOTrainingConfig,
        algorithm="dpo",
        beta=0.5,
        lambda_orpo=0.1,
    )
    trainer = dpo_trainer.DPOTrainer(actor, reference.model, training.optimizer(1e-2, 3), config)
    batches = preferences.preference_dataset(
        pairs, reference.tokenizer, batch_size=4, num_batches=3, **lengths
    )
    training.run(trainer, batches, metrics_file=tmp_path / "metrics.jsonl", label="DPO")
    after = preferences.score(actor, reference.model, heldout, beta=0.5)
    assert after.margin > before.margin


def test_evaluation_and_export(tmp_path, records):
    lm = models.load_model(ID, verbose=False)
    result = evaluation.evaluate(
        lm, records[:4], name="g2", config=evaluation.EvalConfig.smoke(), progress=False
    )
    assert result.n == 4 and result.mean_tokens > 0
    tuned = models.apply_lora(lm.model, family="gemma2", rank=4, alpha=8.0, verbose=False)
    out = models.export(tuned, lm, tmp_path / "export", lora_rank=4, lora_alpha=8.0)
    again = models.load_model(ID, path=out["hf"], verbose=False)
    judged = testing.load_orbax_export(out["orbax"])  # tunix alone, as the judges load it
    assert runlog.digest(judged) == runlog.digest(again.model)
