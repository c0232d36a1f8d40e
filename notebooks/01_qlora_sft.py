# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · LoRA / QLoRA SFT into the reasoning format
#
# Supervised fine-tuning with tunix's `PeftTrainer` and qwix LoRA adapters: the model learns to answer
# as `<reasoning>...</reasoning><answer>...</answer>` from GSM8K's worked solutions. Set `QLORA = True`
# to train the adapters over an nf4-quantised backbone (about a quarter of the backbone's bf16
# memory). The result is a good starting point for 02_grpo_gsm8k (`MODEL_PATH = ".../export/hf"`).
#
# | | smoke (CPU, CI) | full (TPU/GPU) |
# |---|---|---|
# | model | `tiny-gemma3` (random weights), LoRA rank 16 | `gemma-3-1b-it` (or `gemma-3-270m-it`), LoRA rank 64, alpha 64 |
# | data | synthetic GSM8K-style problems | GSM8K train (7,473 solutions), or any dataset via `DATASET` |
# | steps | 150 x 16 examples | 930 x 16 (~2 epochs) within a 7 h budget |
#
# **Kaggle TPU v5e-8**: the mesh is `(8, 1)` over `("fsdp", "tp")`; each batch is split over the 8
# cores. Checkpoints every `checkpoint_every` steps in `OUTPUT_DIR/checkpoints`: **run the notebook
# again with the same `OUTPUT_DIR` and it resumes** (weights, optimizer and the data position).
#
# Results: `OUTPUT_DIR/summary.json`, `loss.png`, `eval.png`, `metrics.jsonl` (every logged loss, across
# resumed sessions), predictions as JSONL, TensorBoard logs in `OUTPUT_DIR/tensorboard`, exports in
# `OUTPUT_DIR/export/{hf,orbax}`.

# %% tags=["parameters"]
PROFILE = None  # "smoke", "full", or None for automatic ($TUNIXKIT_PROFILE, else by device)
OUTPUT_DIR = "runs/01_qlora_sft"  # everything this notebook writes goes here
SOURCE = "auto"  # full profile: "auto" (Kaggle on Kaggle, else Hugging Face), "hf", "kaggle"
MODEL_ID = None  # None: the profile's model; e.g. "gemma-3-270m-it"
QLORA = None  # True: nf4 backbone (QLoRA); None: the profile's default (LoRA)
DATA_SOURCE = "hf"  # full profile GSM8K: "hf", "tfds" or "kaggle"
DATASET = None  # None: GSM8K in the reasoning format; or a HF dataset id / local file ...
PROMPT_FIELD, RESPONSE_FIELD = "prompt", "response"  # ... and its two text columns
BUDGET_HOURS = None  # training wall-clock budget; None: the profile's default

# %%
import dataclasses
import json
import time

from IPython.display import Markdown, display
from tunix.sft import peft_trainer

from tunixkit import data, evaluation, models, recipes, runlog, runtime, training

rt, recipe, out_dir, started = recipes.start(
    recipes.SFT, PROFILE, OUTPUT_DIR, model_id=MODEL_ID, qlora=QLORA, budget_hours=BUDGET_HOURS
)
recipe

# %% [markdown]
# ## Data
# Each example is the chat prompt (with the reasoning-format system prompt) and a target completion;
# the loss falls on the target only. GSM8K solutions become the `<reasoning>` and the `#### N` line
# the `<answer>`. Held-out test questions give the eval loss and the before/after evaluation.

# %%
load = dict(data_dir=out_dir / "data", source=DATA_SOURCE)
train_records = recipes.gsm8k(rt, "train", **load)
test_records = recipes.gsm8k(rt, "test", limit=recipe.eval_questions, **load)
if DATASET is None:
    train_pairs = [data.sft_pair(r) for r in train_records]
else:  # any instruction dataset: its prompt column goes into the chat template as is
    rows = data.load_rows(DATASET, "train")
    train_pairs = [(data.format_prompt(p, system_prompt=None), r + data.END_OF_TURN)
                   for p, r in data.columns(rows, [PROMPT_FIELD, RESPONSE_FIELD], source=DATASET)]  # fmt: skip
eval_pairs = [data.sft_pair(r) for r in test_records[: recipe.eval_examples]]
print(train_pairs[0][0] + train_pairs[0][1])

# %% [markdown]
# ## Model and adapters
# LoRA adapters on the attention and MLP projections; only they are trained. With QLoRA the frozen
# backbone is stored in nf4.

# %%
mesh = runtime.make_mesh()
base = models.load_model(recipe.model_id, source=SOURCE, mesh=mesh)
model = models.apply_lora(base.model, family=base.family, rank=recipe.lora_rank,
                          alpha=recipe.lora_alpha, qlora=recipe.qlora, mesh=mesh)  # fmt: skip
tuned = dataclasses.replace(base, model=model)
size = models.footprint(model)
size

# %% [markdown]
# ## Before training
# Greedy answers to the test questions: format compliance and accuracy (95% CI).

# %%
before = evaluation.evaluate(
    tuned, test_records, name="before", config=recipe.eval, output_dir=out_dir
)
print(before.summary())

# %% [markdown]
# ## Train
# AdamW with warmup-cosine and gradient clipping. The eval loss on held-out examples is measured
# every `eval_every` steps (and at the start). TensorBoard: `tensorboard --logdir OUTPUT_DIR/tensorboard`.

# %%
batches = training.sft_dataset(train_pairs, base.tokenizer, max_len=recipe.max_len,
                               batch_size=recipe.batch_size, num_batches=recipe.steps)  # fmt: skip
eval_batches = training.sft_dataset(eval_pairs, base.tokenizer, max_len=recipe.max_len,
                                    batch_size=recipe.batch_size)  # fmt: skip
config = training.trainer_config(out_dir, max_steps=recipe.steps, eval_every=recipe.eval_every,
                                 checkpoint_every=recipe.checkpoint_every, description="SFT")  # fmt: skip
trainer = peft_trainer.PeftTrainer(
    model, training.optimizer(recipe.learning_rate, recipe.steps), config
).with_gen_model_input_fn(training.model_inputs_fn(training.pad_id(base.tokenizer)))
trained = training.run(trainer, batches, eval_batches, mesh=mesh, metrics_file=out_dir / "metrics.jsonl",
                       budget_seconds=recipe.budget_hours * 3600)  # fmt: skip
peak_bytes, peak_what = runtime.peak_memory()

# %%
metrics = runlog.read_metrics(out_dir / "metrics.jsonl")
fig = runlog.plot_metrics(metrics, out_dir / "loss.png", title=f"SFT, {recipe.model_id}")
eval_steps, eval_losses = metrics["eval"]["loss"]
print(
    f"eval loss {eval_losses[0]:.3f} (step {eval_steps[0]}) -> {eval_losses[-1]:.3f} (step {eval_steps[-1]})"
)

# %% [markdown]
# ## After training

# %%
after = evaluation.evaluate(
    tuned, test_records, name="after", config=recipe.eval, output_dir=out_dir
)
display(Markdown(evaluation.comparison_table([before, after])))
display(Markdown(evaluation.side_by_side([before, after], k=3)))
fig = evaluation.plot_comparison(
    [before, after], out_dir / "eval.png", title="GSM8K before/after SFT"
)

# %% [markdown]
# ## Memory
# Trainable parameters, the bytes the parameters take, and the peak memory of the run (on CPU the
# process's resident memory). `bench/sft_step.py` compares LoRA, QLoRA and full fine-tuning.

# %%
memory = {"mode": "QLoRA (nf4)" if recipe.qlora else "LoRA", "params": size["params"],
          "trainable": size["trainable"], "param_MiB": size["bytes"] / 2**20,
          "peak_MiB": peak_bytes / 2**20, "peak_measures": peak_what}  # fmt: skip
memory

# %% [markdown]
# ## Export
# `export/hf`: LoRA merged into the base weights in the Hugging Face layout (loads in tunix and
# `transformers`; 02_grpo_gsm8k's `MODEL_PATH`). `export/orbax`: params for a Kaggle Model.

# %%
exports = models.export(model, base, out_dir / "export", lora_rank=recipe.lora_rank,
                        lora_alpha=recipe.lora_alpha, mesh=mesh)  # fmt: skip
unrestricted_kaggle_model = str(exports["orbax"])
exports

# %%
summary = {
    "profile": rt.profile,
    "model_id": recipe.model_id,
    "qlora": recipe.qlora,
    "steps": trained.steps,
    "resumed_from": trained.resumed_from,
    "seconds": time.perf_counter() - started,
    "train_seconds": trained.seconds,
    "format_rate_before": before.format_rate,
    "format_rate_after": after.format_rate,
    "accuracy_before": before.accuracy,
    "accuracy_after": after.accuracy,
    "eval_loss_first": float(eval_losses[0]),
    "eval_loss_last": float(eval_losses[-1]),
    "eval_loss_steps": [int(eval_steps[0]), int(eval_steps[-1])],
    "weights_digest": runlog.digest(model),
    "memory": memory,
    "eval": {"before": before.summary(), "after": after.summary()},
    "exports": {k: str(v) for k, v in exports.items()},
}
(out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
{k: v for k, v in summary.items() if not isinstance(v, dict)}

# %% [markdown]
# ## Checks
# The smoke run must show SFT teaching the format: compliance from at most 0.2 to at least 0.9, and
# the held-out loss at least halved.

# %%
assert trained.steps == recipe.steps or trained.seconds >= recipe.budget_hours * 3600, trained
assert summary["eval_loss_last"] < summary["eval_loss_first"], summary
if rt.smoke:
    assert before.format_rate <= 0.2, before.format_rate
    assert after.format_rate >= 0.9, after.format_rate
    assert summary["eval_loss_last"] <= 0.5 * summary["eval_loss_first"], summary
print("SFT OK")
