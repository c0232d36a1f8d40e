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
# | model | `tiny-gemma3-sft` + LoRA rank 16 on the shared reference (the bars are met with little room: see the recipe) | `gemma-3-1b-it` + LoRA rank 64 (or 01's export via `MODEL_PATH`) |
# | pairs | 1,000 synthetic questions x 3 samples at T=1.5 | 2,000 GSM8K questions x 4 samples at T=1.0 |
# | training | see the recipe table below | up to 1,000 steps x 8 pairs, beta 0.1, lr 5e-6, clip 0.1 |
#
# **Held-out preference accuracy** is measured on pairs built from *test* questions: the share of pairs
# where the policy's implicit DPO reward, `beta * (log pi/pi_ref)`, is higher for chosen than for
# rejected. At step 0 the policy *is* the reference, every pair is a tie, and ties count one half.
#
# **Sessions**: one clock (`SESSION_HOURS`) from the first cell; checkpoints and the pairs stay in
# `OUTPUT_DIR`, so a rerun resumes, and a new session continues with `RESUME_FROM`.
# Results: `OUTPUT_DIR/summary.json`, `curves.png`, `eval.png`, the pairs as JSONL, `metrics.jsonl`,
# TensorBoard logs, checkpoints, exports in `OUTPUT_DIR/export`.

# %%
# Install: makes `import tunixkit` work in this kernel (Kaggle, Colab) without a restart and without
# touching the preinstalled jax/libtpu; does nothing where tunixkit is already importable.
import importlib.util
import os
import runpy
import subprocess
import time

os.environ.setdefault("TUNIXKIT_SESSION_START", str(time.time()))  # the session clock starts here
# The tunixkit commit this notebook was tested with (written by scripts/release.py): a re-run months
# later installs the same code. TUNIXKIT_SOURCE: the repository (a URL, or a folder used as it is,
# e.g. the repository attached as a Kaggle dataset when the Internet is off).
TUNIXKIT_RELEASE = os.environ.get("TUNIXKIT_RELEASE", "2ea96805a00a97ea87380ee2046c13a7df2692ea")
if importlib.util.find_spec("tunixkit") is None:
    src = os.environ.get("TUNIXKIT_SOURCE", "https://github.com/tunixkit/tunixkit")
    if not os.path.isdir(src):
        dest = os.path.join(os.environ.get("TMPDIR", "/tmp"), "tunixkit-src")
        subprocess.run(["rm", "-rf", dest], check=True)
        subprocess.run(["git", "clone", "-q", src, dest], check=True)
        if subprocess.run(["git", "-C", dest, "checkout", "-q", TUNIXKIT_RELEASE]).returncode:
            raise RuntimeError(
                f"tunixkit release {TUNIXKIT_RELEASE!r} is not in {src}: set TUNIXKIT_RELEASE to a "
                "commit or tag it has (the notebook of that commit names its own), or attach the "
                "repository and set TUNIXKIT_SOURCE to its folder"
            )
        src = dest
    runpy.run_path(f"{src}/install_in_kernel.py")  # the setup script, then this kernel's sys.path

# %% tags=["parameters"]
PROFILE = None  # "smoke", "full", or None for automatic ($TUNIXKIT_PROFILE, else by device)
OUTPUT_DIR = "runs/03_dpo"  # everything this notebook writes goes here
SESSION_HOURS = None  # the session's hard limit; None: 9 on Kaggle, 12 on Colab, none elsewhere
RESUME_FROM = None  # a previous session's OUTPUT_DIR (read-only is fine) to continue from
START_FRESH = False  # True: move an OUTPUT_DIR made with other settings aside and start again
COMPILE_CACHE = None  # where compiled programs are kept; None: OUTPUT_DIR/jax_cache; False: off
REHEARSAL = False  # True: time a few steps at the real shapes, project the session, no long run
REHEARSAL_FROM = None  # a rehearsal's OUTPUT_DIR or rehearsal.json: sizes the LR schedule
MODEL_ID = None  # None: the profile's model
MODEL_PATH = None  # a local HF-layout folder to start from (e.g. 01_qlora_sft's export/hf)
SOURCE = "auto"  # full profile: "auto" (Kaggle on Kaggle, else Hugging Face), "hf", "kaggle"
NUM_STEPS = None  # optimizer steps; None: the profile's
LEARNING_RATE = None  # peak learning rate; None: the profile's
LORA_RANK = None  # adapter rank; None: the profile's
EVAL_QUESTIONS = None  # test questions for the greedy evaluation; None: all
ALGORITHM = None  # "dpo" or "orpo"; None: the profile's default (DPO)
PAIRS = "on-policy"  # or a preference dataset: HF id or local .jsonl/.json/.csv/.parquet
FIELDS = ("prompt", "chosen", "rejected")  # the dataset's prompt, chosen and rejected columns
DATA_SOURCE = "hf"  # full profile GSM8K: "hf", "tfds" or "kaggle"
GSM8K_PATH = None  # full: a local GSM8K (a file, or the openai/gsm8k folder); None: download
KAGGLE_MODEL = None  # to upload the export: "<user>/<model>/jax/<variation>"; None: no upload
RECIPE_OVERRIDES = {}  # any other recipe field by name, e.g. {"batch_size": 4, "eval.batch_size": 8}

# %%
import dataclasses

from IPython.display import Markdown, display

from tunixkit import (
    evaluation,
    models,
    pipeline,
    preferences,
    recipes,
    runlog,
    runtime,
    training,
)
from tunixkit.tools import memplan

rt, recipe, out_dir, clock = recipes.start_notebook(recipes.DPO, globals())
recipe

# %% [markdown]
# ## Models
# The reference model stays frozen. With LoRA the policy's adapters sit on the reference's own
# backbone (one copy in memory); full fine-tuning loads a second copy.

# %%
mesh = runtime.make_mesh()
# TPU/GPU: does the recipe fit the chip? (before any weights load)
memplan.check("dpo", recipe, mesh)
reference = models.load_model(recipe.model_id, source=SOURCE, path=MODEL_PATH, mesh=mesh)
clock.record("load", reference.load_seconds)  # sizes the export the session clock keeps time for
actor = models.trainable(  # LoRA on the reference's weights; without a rank, a second copy
    reference,
    lora_rank=recipe.lora_rank,
    lora_alpha=recipe.lora_alpha,
    mesh=mesh,
)
policy = dataclasses.replace(reference, model=actor)

# %% [markdown]
# ## Preference pairs
# Built once and saved to `OUTPUT_DIR/pairs_*.jsonl`; a rerun (resume) reads them back, so it trains
# on exactly the same pairs. The on-policy pass (the full preset samples 4 answers to each of 2,000
# questions) is timed and on the session clock: it takes half the training time left at most, then
# stops and trains on the pairs it made (said); a rehearsal samples two batches of it and projects
# the rest.

# %%
load = dict(data_dir=out_dir / "data", source=DATA_SOURCE, path=GSM8K_PATH)
test_records = recipes.gsm8k(rt, "test", limit=recipe.eval_questions, **load)
test_records = test_records[: clock.sized(len(test_records))]  # a rehearsal takes a few
pair_records = (
    recipes.gsm8k(rt, "train", limit=recipe.pair_questions, **load) if PAIRS == "on-policy" else []
)
n_pair_records = len(pair_records)  # a rehearsal samples two batches of them, timed and projected
per_batch = max(1, recipe.eval.batch_size // recipe.pair_samples)
pair_records = pair_records[: clock.sized(n_pair_records, label="pairs", batch=per_batch)]
with (
    clock.timed("pairs", items=len(pair_records), planned=n_pair_records),
    runtime.parameter_for_a_copy("PAIRS"),  # offline: a download error names the parameter
):
    pairs = preferences.training_pairs(
        out_dir,
        PAIRS,
        heldout=recipe.heldout_questions,
        policy=reference,
        train_records=pair_records,
        heldout_records=test_records,
        config=dataclasses.replace(recipe.eval, temperature=recipe.pair_temperature),
        samples=recipe.pair_samples,
        fields=FIELDS,
        clock=clock.part(0.5),  # half the training time left at most; the rest trains
    )
pairs["train"][0]

# %% [markdown]
# ## Before training
# Greedy evaluation on the test questions, and the held-out pairs scored by the starting policy.

# %%
lengths = dict(
    max_prompt_length=recipe.max_prompt_length, max_response_length=recipe.max_response_length
)
# (a rehearsal scores two batches of them, timed, and projects the rest)
n_heldout = clock.sized(len(pairs["heldout"]), label="held-out scoring", batch=recipe.batch_size)
heldout = preferences.preference_dataset(
    pairs["heldout"][:n_heldout], reference.tokenizer, batch_size=recipe.batch_size, **lengths
)
with clock.timed("evaluation", items=len(test_records)):
    before = evaluation.evaluate(
        policy, test_records, name="before", config=recipe.eval, output_dir=out_dir, reuse=True
    )
with clock.timed("held-out scoring", items=n_heldout):
    scores_before = preferences.score(actor, reference.model, heldout, beta=recipe.beta)
display(Markdown(evaluation.comparison_table([before])))
scores_before

# %% [markdown]
# ## Train
# `DPOTrainer` logs the reward margin and the reward accuracy on each batch, and on the held-out
# pairs every `eval_every` steps and at the last step. Checkpoints every `checkpoint_every` steps;
# a rerun resumes.

# %%
batches = preferences.preference_dataset(
    pairs["train"],
    reference.tokenizer,
    batch_size=recipe.batch_size,
    num_batches=recipe.steps,
    **lengths,
)
trainer = preferences.trainer(
    recipe,
    actor,
    reference.model,
    output_dir=out_dir,
    schedule_steps=clock.schedule_steps(recipe.steps, label=recipe.algorithm.upper()),
)
names = ("loss", "rewards/margin", "rewards/accuracy")
trained = training.run(
    trainer,
    batches,
    heldout,
    mesh=mesh,
    metrics_file=out_dir / "metrics.jsonl",
    metric_names=names,
    session=clock,
    label=recipe.algorithm.upper(),
)

# %%
metrics = runlog.read_metrics(out_dir / "metrics.jsonl")
fig = runlog.plot_metrics(
    metrics,
    out_dir / "curves.png",
    names=names,
    title=f"{recipe.algorithm.upper()}, {recipe.model_id}",
)

# %% [markdown]
# ## Export
# Before the final evaluation, so a session short of time still leaves a model.
# `export/{hf,orbax}`, and the judged model `ckpts/actor/<step>/model_params` (merged).

# %%
# timed as the export; prints the judged model's path
export = pipeline.export_judged(actor, reference, clock, trained.steps, recipe, mesh=mesh)

# %% [markdown]
# ## After training
# Preference figures on the held-out pairs, then greedy generation: preference tuning can raise the
# preference metrics while damaging generation, so both are shown. The export stays the judged
# model unless it answers fewer questions right than the start model and a paired test (McNemar's)
# says that is not chance: then the start model is the judged model again. With `KAGGLE_MODEL` set,
# the judged model's Orbax export is uploaded then.

# %%
with clock.timed("held-out scoring", items=n_heldout):
    scores_after = preferences.score(actor, reference.model, heldout, beta=recipe.beta)
n = clock.fit(len(test_records))
with clock.timed("evaluation", items=n):
    # greedy answers: of the export itself (the adapters merged), not the adapters in memory
    exported = models.load_model(recipe.model_id, path=export.hf, mesh=mesh, verbose=False)
    after = evaluation.evaluate(
        exported, test_records[:n], name="after", config=recipe.eval, output_dir=out_dir
    )
display(
    Markdown(
        f"| held-out pairs (n={scores_after.n}) | before | after |\n|---|---|---|\n"
        f"| preference accuracy (implicit reward) | {scores_before.reward_accuracy:.3f} | {scores_after.reward_accuracy:.3f} |\n"
        f"| policy log p(chosen) > log p(rejected) | {scores_before.likelihood_ranking:.3f} | {scores_after.likelihood_ranking:.3f} |\n"
        f"| mean reward margin | {scores_before.margin:.3f} | {scores_after.margin:.3f} |"
    )
)
display(Markdown(evaluation.comparison_table([before.first(n), after])))
fig = evaluation.plot_comparison(
    [before.first(n), after],
    out_dir / "eval.png",
    title=f"GSM8K before/after {recipe.algorithm.upper()}",
)
# the judged model is the better one: the export, unless it got fewer questions right than the
# start model and a paired test says that is not chance (then the start model is judged again)
adoption = pipeline.finish(  # then uploads the judged model (the trained or the start's)
    export,
    before.first(n),
    after,
    start=reference,
    kaggle_model=KAGGLE_MODEL,
    notes=f"{recipe.algorithm.upper()}, {trained.steps} steps",
    mesh=mesh,
)
judged_path, unrestricted_kaggle_model = adoption.judged, adoption.kaggle_model

# %%
margins = metrics["train"]["rewards/margin"][1]
w = max(1, min(10, len(margins) // 4))
summary = {
    "profile": rt.profile,
    "model_id": recipe.model_id,
    "algorithm": recipe.algorithm,
    "lora_rank": recipe.lora_rank,
    "pairs": {k: len(v) for k, v in pairs.items()},
    "steps": trained.steps,
    "resumed_from": trained.resumed_from,
    "stopped": trained.stopped,
    "seconds": clock.elapsed(),
    "train_seconds": trained.seconds,
    "heldout_reward_accuracy_before": scores_before.reward_accuracy,
    "heldout_reward_accuracy_after": scores_after.reward_accuracy,
    "heldout_likelihood_ranking_before": scores_before.likelihood_ranking,
    "heldout_likelihood_ranking_after": scores_after.likelihood_ranking,
    "heldout_margin_after": scores_after.margin,
    "margin_first": float(margins[:w].mean()),
    "margin_last": float(margins[-w:].mean()),
    "accuracy_before": before.first(n).accuracy,
    "accuracy_after": after.accuracy,
    "format_rate_before": before.first(n).format_rate,
    "format_rate_after": after.format_rate,
    "exports": {"hf": export.hf, "orbax": export.orbax},
    "unrestricted_kaggle_model": unrestricted_kaggle_model,
    "adoption": adoption.report(),
}
runlog.write_summary(out_dir, summary)
summary

# %% [markdown]
# ## Rehearsal
# With `REHEARSAL = True` everything above was a rehearsal at the recipe's real shapes (in
# `OUTPUT_DIR/rehearsal`, a few steps and evaluation items): here it becomes the real run's schedule
# for this session (each stage's seconds per step and compile time, the steps that fit, when the
# export and the last evaluation end, peak memory, disk), written to `OUTPUT_DIR/rehearsal.json`.
# A real run shows nothing here.

# %%
rehearsal = clock.rehearsal_report()

# %% [markdown]
# ## Checks
# The smoke run must show the preference being learned on pairs it never trained on: held-out
# preference accuracy at least 0.7 and a margin grown by more than 1 (learning bars: each fails
# with training switched off), without costing greedy generation more than noise: greedy accuracy
# may fall by at most 0.05, and the format must hold (guards). The bars are `recipes.DPO.BARS`; the figures and what
# each bar gave go to `OUTPUT_DIR/checks.json`.

# %%
# What must hold is asserted; what learning should show is asserted in a whole smoke run of the
# preset (the run its bars were measured on) and only warned about with other settings and in full
# (a noisy figure must not end a long run in an error).
checks = evaluation.Checks.for_run(rt, recipe, rehearsal=REHEARSAL)
checks.must(trained.ended_well(clock.hours), trained)  # all steps, STOP, the session's clock
figures = {
    "preference_accuracy_before": scores_before.reward_accuracy,
    "preference_accuracy_after": scores_after.reward_accuracy,
    "margin_gain": summary["margin_last"] - summary["margin_first"],
    "greedy_accuracy_change": after.accuracy - before.first(n).accuracy,  # the same questions
    "format_after": after.format_rate,
}
if trained.stopped == "done":  # a whole run: the recipe's bars (recorded in checks.json)
    checks.bars(recipe.BARS, figures, out_dir / "checks.json")
else:  # a session stopped early is judged at its end
    checks.should(figures["margin_gain"] > 0, f"held-out margin grew {figures['margin_gain']:.3f}")
checks.done(recipe.algorithm.upper())
print(f"unrestricted_kaggle_model = {unrestricted_kaggle_model!r}")  # the id the track reads, last
