"""Resume: an interrupted LoRA SFT run restarts from its last checkpoint, exact weights and step."""

import jax
import numpy as np
from flax import nnx
from tunix.sft import peft_trainer

from tunixkit import data, models, testing, training


def _run(ckpt_dir, max_steps, lora_seed):
    lm = models.load_model("tiny-gemma3", verbose=False)
    lora = models.apply_lora(lm.model, rank=4, alpha=8.0, seed=lora_seed, verbose=False)
    records, _ = data.to_records(testing.synthetic_gsm8k(64, seed=3), "synthetic", verbose=False)
    ds = training.sft_dataset(
        [data.sft_pair(r) for r in records],
        lm.tokenizer,
        max_len=144,
        batch_size=4,
        num_batches=8,
        seed=0,
    )
    root, opts = training.checkpointing(ckpt_dir, every_steps=2)
    trainer = peft_trainer.PeftTrainer(
        lora,
        training.optimizer(3e-3, 8),
        peft_trainer.TrainingConfig(
            eval_every_n_steps=10**9,
            max_steps=max_steps,
            checkpoint_root_directory=root,
            checkpointing_options=opts,
            pbar_description=None,
        ),
    )
    restored_step = trainer.train_steps
    restored = jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(lora, nnx.LoRAParam)))
    trainer.with_gen_model_input_fn(training.model_inputs_fn(lm.tokenizer.pad_id())).train(ds)
    final = jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(lora, nnx.LoRAParam)))
    return restored_step, restored, final, trainer.train_steps


def _equal(a, b):
    return all(jax.tree.leaves(jax.tree.map(np.array_equal, a, b)))


def test_interrupted_run_resumes_to_identical_weights(tmp_path):
    _, _, straight, steps = _run(tmp_path / "straight", 8, lora_seed=1)
    assert steps == 8
    _, _, at4, _ = _run(tmp_path / "resumed", 4, lora_seed=1)  # "interrupted" after step 4
    step, restored, resumed, steps = _run(
        tmp_path / "resumed", 8, lora_seed=99
    )  # other init: must be overwritten
    assert step == 4 and steps == 8
    assert _equal(restored, at4), "resume did not restore the checkpointed LoRA weights"
    assert _equal(resumed, straight), (
        "resumed run ended with different weights than an uninterrupted one"
    )
