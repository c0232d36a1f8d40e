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
# # 03 · DPO (and ORPO) preference tuning
#
# Direct Preference Optimization with tunix's `DPOTrainer`: for each prompt, a *chosen* and a
# *rejected* answer; the policy learns to make chosen more likely than rejected, relative to a frozen
# reference model (`beta` sets how far it may move). `ALGORITHM = "orpo"` switches to ORPO, which adds
# the preference term to plain SFT and needs no reference model while training.
#
# Pairs come from one of two sources:
# - **on-policy** (default, offline): the model answers GSM8K training questions several times; a
#   correct, well-formatted answer is chosen (the likeliest of several; the reference solution when
#   none is), a wrong or badly formatted one is rejected (a format error before a wrong number);
# - **a preference dataset** (`PAIRS = "<HF dataset id or file>"`, with its column names in `FIELDS`),
#   e.g. a math preference set or UltraFeedback binarized.
#
# | | smoke (CPU, CI) | full (TPU/GPU) |
# |---|---|---|
# | model | `tiny-gemma3-sft`, full fine-tuning | `gemma-3-1b-it` + LoRA rank 64 (or 01's export via `MODEL_PATH`) |
# | pairs | 1,000 synthetic questions x 3 samples at T=1.5 | 2,000 GSM8K questions x 4 samples at T=1.0 |
# | training | 80 steps x 16 pairs, beta 0.5, lr 1e-4 | up to 1,000 steps x 8 pairs, beta 0.1, lr 3e-5, clip 0.1, 6 h budget |
#
# **Held-out preference accuracy** is measured on pairs built from *test* questions: the share of pairs
# where the policy's implicit DPO reward, `beta * (log pi/pi_ref)`, is higher for chosen than for
# rejected. At step 0 the policy *is* the reference, every pair is a tie, and ties count one half.
#
# Results: `OUTPUT_DIR/summary.json`, `curves.png`, `eval.png`, the pairs as JSONL (reused by a rerun),
# `metrics.jsonl`, TensorBoard logs, checkpoints (a rerun resumes), exports in `OUTPUT_DIR/export`.

# %% tags=["parameters"]
PROFILE = None  # "smoke", "full", or None for automatic ($TUNIXKIT_PROFILE, else by device)
OUTPUT_DIR = "runs/03_dpo"  # everything this notebook writes goes here
SOURCE = "auto"  # full profile: "auto" (Kaggle on Kaggle, else Hugging Face), "hf", "kaggle"
MODEL_PATH = None  # a local HF-layout folder to start from (e.g. 01_qlora_sft's export/hf)
ALGORITHM = None  # "dpo" or "orpo"; None: the profile's default (DPO)
PAIRS = "on-policy"  # or a preference dataset: HF id or local .jsonl/.json/.csv/.parquet
FIELDS = ("prompt", "chosen", "rejected")  # the dataset's prompt, chosen and rejected columns
DATA_SOURCE = "hf"  # full profile GSM8K: "hf", "tfds" or "kaggle"
BUDGET_HOURS = None  # training wall-clock budget; None: the profile's default

# %%
import dataclasses
import json
import time

from IPython.display import Markdown, display
from tunix.sft.dpo import dpo_trainer

from tunixkit import data, evaluation, models, preferences, recipes, runlog, runtime, training

rt, recipe, out_dir, started = recipes.start(
    recipes.DPO, PROFILE, OUTPUT_DIR, algorithm=ALGORITHM, budget_hours=BUDGET_HOURS
)
recipe

# %% [markdown]
# ## Models
# The reference model stays frozen. With LoRA the policy's adapters sit on the reference's own
# backbone (one copy in memory); full fine-tuning (smoke) loads a second copy.

# %%
mesh = runtime.make_mesh()
reference = models.load_model(recipe.model_id, source=SOURCE, path=MODEL_PATH, mesh=mesh)
if recipe.lora_rank:
    actor = models.apply_lora(reference.model, family=reference.family, rank=recipe.lora_rank,
                              alpha=recipe.lora_alpha, mesh=mesh)  # fmt: skip
else:
    actor = models.load_model(recipe.model_id, source=SOURCE, path=MODEL_PATH, mesh=mesh).model
policy = dataclasses.replace(reference, model=actor)

# %% [markdown]
# ## Preference pairs
# Built once and saved to `OUTPUT_DIR/pairs_*.jsonl`; a rerun (resume) reads them back, so it trains
# on exactly the same pairs.

# %%
load = dict(data_dir=out_dir / "data", source=DATA_SOURCE)
test_records = recipes.gsm8k(rt, "test", limit=recipe.eval_questions, **load)
pair_files = {"train": out_dir / "pairs_train.jsonl", "heldout": out_dir / "pairs_heldout.jsonl"}
if all(f.is_file() for f in pair_files.values()):
    pairs = {k: data.read_rows(f) for k, f in pair_files.items()}
    print(f"read {len(pairs['train'])} training and {len(pairs['heldout'])} held-out pairs")
elif PAIRS == "on-policy":
    train_records = recipes.gsm8k(rt, "train", limit=recipe.pair_questions, **load)
    sampled = dataclasses.replace(recipe.eval, temperature=recipe.pair_temperature)
    pairs = {"train": preferences.on_policy_pairs(reference, train_records, sampled, samples=recipe.pair_samples),
             "heldout": preferences.on_policy_pairs(reference, test_records[: recipe.heldout_questions],
                                                    dataclasses.replace(sampled, seed=sampled.seed + 1),
                                                    samples=recipe.pair_samples)}  # fmt: skip
else:
    everything = preferences.dataset_pairs(PAIRS, fields=FIELDS)
    pairs = {"train": everything[recipe.heldout_questions :],
             "heldout": everything[: recipe.heldout_questions]}  # fmt: skip
for k, f in pair_files.items():
    data.write_jsonl(pairs[k], f)
pairs["train"][0]

# %% [markdown]
# ## Before training
# Greedy evaluation on the test questions, and the held-out pairs scored by the starting policy.

# %%
lengths = dict(
    max_prompt_length=recipe.max_prompt_length, max_response_length=recipe.max_response_length
)
heldout = preferences.preference_dataset(
    pairs["heldout"], reference.tokenizer, batch_size=recipe.batch_size, **lengths
)
before = evaluation.evaluate(
    policy, test_records, name="before", config=recipe.eval, output_dir=out_dir
)
scores_before = preferences.score(actor, reference.model, heldout, beta=recipe.beta)
print(before.summary())
scores_before

# %% [markdown]
# ## Train
# `DPOTrainer` logs the reward margin and the reward accuracy on each batch, and on the held-out
# pairs every `eval_every` steps. Checkpoints every `checkpoint_every` steps; a rerun resumes.

# %%
batches = preferences.preference_dataset(pairs["train"], reference.tokenizer, batch_size=recipe.batch_size,
                                         num_batches=recipe.steps, **lengths)  # fmt: skip
config = training.trainer_config(
    out_dir, max_steps=recipe.steps, eval_every=recipe.eval_every, checkpoint_every=recipe.checkpoint_every,
    description=recipe.algorithm.upper(), config_cls=dpo_trainer.DPOTrainingConfig,
    algorithm=recipe.algorithm, beta=recipe.beta, lambda_orpo=recipe.lambda_orpo,
)  # fmt: skip
trainer = dpo_trainer.DPOTrainer(
    actor, reference.model if recipe.algorithm == "dpo" else None,
    training.optimizer(recipe.learning_rate, recipe.steps, clip_norm=recipe.clip_norm), config,
)  # fmt: skip
names = ("loss", "rewards/margin", "rewards/accuracy")
trained = training.run(trainer, batches, heldout, mesh=mesh, metrics_file=out_dir / "metrics.jsonl",
                       metric_names=names, budget_seconds=recipe.budget_hours * 3600)  # fmt: skip

# %%
metrics = runlog.read_metrics(out_dir / "metrics.jsonl")
fig = runlog.plot_metrics(metrics, out_dir / "curves.png", names=names,
                            title=f"{recipe.algorithm.upper()}, {recipe.model_id}")  # fmt: skip

# %% [markdown]
# ## After training
# Preference figures on the held-out pairs, then greedy generation: preference tuning can raise the
# preference metrics while damaging generation, so both are shown.

# %%
scores_after = preferences.score(actor, reference.model, heldout, beta=recipe.beta)
after = evaluation.evaluate(
    policy, test_records, name="after", config=recipe.eval, output_dir=out_dir
)
display(Markdown(f"| held-out pairs (n={scores_after.n}) | before | after |\n|---|---|---|\n"
                 f"| preference accuracy (implicit reward) | {scores_before.reward_accuracy:.3f} | {scores_after.reward_accuracy:.3f} |\n"
                 f"| policy log p(chosen) > log p(rejected) | {scores_before.pref_accuracy:.3f} | {scores_after.pref_accuracy:.3f} |\n"
                 f"| mean reward margin | {scores_before.margin:.3f} | {scores_after.margin:.3f} |"))  # fmt: skip
display(Markdown(evaluation.comparison_table([before, after])))
fig = evaluation.plot_comparison(
    [before, after], out_dir / "eval.png", title=f"GSM8K before/after {recipe.algorithm.upper()}"
)

# %% [markdown]
# ## Export

# %%
exports = models.export(actor, reference, out_dir / "export", lora_rank=recipe.lora_rank,
                        lora_alpha=recipe.lora_alpha, mesh=mesh)  # fmt: skip
unrestricted_kaggle_model = str(exports["orbax"])
exports

# %%
margins = metrics["train"]["rewards/margin"][1]
w = max(1, min(10, len(margins) // 4))
summary = {
    "profile": rt.profile,
    "model_id": recipe.model_id,
    "algorithm": recipe.algorithm,
    "pairs": {k: len(v) for k, v in pairs.items()},
    "steps": trained.steps,
    "resumed_from": trained.resumed_from,
    "seconds": time.perf_counter() - started,
    "train_seconds": trained.seconds,
    "heldout_pref_before": scores_before.reward_accuracy,
    "heldout_pref_after": scores_after.reward_accuracy,
    "heldout_rank_before": scores_before.pref_accuracy,
    "heldout_rank_after": scores_after.pref_accuracy,
    "heldout_margin_after": scores_after.margin,
    "margin_first": float(margins[:w].mean()),
    "margin_last": float(margins[-w:].mean()),
    "accuracy_before": before.accuracy,
    "accuracy_after": after.accuracy,
    "format_rate_before": before.format_rate,
    "format_rate_after": after.format_rate,
    "exports": {k: str(v) for k, v in exports.items()},
}
(out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
summary

# %% [markdown]
# ## Checks
# The smoke run must show the preference being learned on pairs it never trained on: held-out
# preference accuracy at least 0.9, and a growing margin.

# %%
assert trained.steps == recipe.steps or trained.seconds >= recipe.budget_hours * 3600, trained
assert summary["margin_last"] > summary["margin_first"], summary
if rt.smoke:
    assert scores_after.reward_accuracy >= 0.9, scores_after
    assert scores_after.reward_accuracy > scores_before.reward_accuracy, (
        scores_before,
        scores_after,
    )
print(f"{recipe.algorithm.upper()} OK")
