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
# # 01 · QLoRA / LoRA SFT into the reasoning format
#
# Supervised fine-tuning with tunix's `PeftTrainer` and qwix adapters: the model learns to answer
# as `<reasoning>...</reasoning><answer>...</answer>` from GSM8K's worked solutions. By default the
# adapters train over an nf4-quantised backbone (QLoRA, about a quarter of the backbone's bf16
# memory); `QLORA = False` trains plain LoRA. The result is a good starting point for
# 02_grpo_gsm8k (`MODEL_PATH = ".../export/hf"`).
#
# | | smoke (CPU, CI) | full (TPU/GPU) |
# |---|---|---|
# | model | `tiny-gemma3` (random weights), QLoRA rank 16 | `gemma-3-1b-it` (or `gemma-2-2b-it`, `gemma-3-270m-it`), QLoRA rank 64 |
# | data | synthetic GSM8K-style problems | GSM8K train (7,473 solutions), or any dataset via `DATASET` |
# | steps | 150 x 16 examples | 930 x 16 (~2 epochs), as many as the session allows |
#
# **Kaggle TPU v5e-8**: the mesh is `(8, 1)` over `("fsdp", "tp")`; each batch is split over the 8
# cores. **Sessions**: one clock (`SESSION_HOURS`, 9 on Kaggle) from the first cell stops training
# in time to checkpoint, export and evaluate. Checkpoints every `checkpoint_every` steps: run again
# with the same `OUTPUT_DIR` and it resumes; in a new session set `RESUME_FROM` to the last one's
# output (read-only is fine, e.g. under `/kaggle/input`).
#
# Results: `OUTPUT_DIR/summary.json`, `loss.png`, `eval.png`, `metrics.jsonl` (every logged loss, across
# sessions), predictions as JSONL, TensorBoard logs, exports in `OUTPUT_DIR/export/{hf,orbax}`.

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
OUTPUT_DIR = "runs/01_qlora_sft"  # everything this notebook writes goes here
SESSION_HOURS = None  # the session's hard limit; None: 9 on Kaggle, 12 on Colab, none elsewhere
RESUME_FROM = None  # a previous session's OUTPUT_DIR (read-only is fine) to continue from
START_FRESH = False  # True: move an OUTPUT_DIR made with other settings aside and start again
COMPILE_CACHE = None  # where compiled programs are kept; None: OUTPUT_DIR/jax_cache; False: off
REHEARSAL = False  # True: time a few steps at the real shapes, project the session, no long run
REHEARSAL_FROM = None  # a rehearsal's OUTPUT_DIR or rehearsal.json: sizes the LR schedule
MODEL_ID = None  # None: the profile's model; e.g. "gemma-2-2b-it", "gemma-3-270m" (no hub needed)
SOURCE = "auto"  # full profile: "auto" (Kaggle on Kaggle, else Hugging Face), "hf", "kaggle"
NUM_STEPS = None  # optimizer steps; None: the profile's
LEARNING_RATE = None  # peak learning rate; None: the profile's
LORA_RANK = None  # adapter rank; None: the profile's
QLORA = None  # False: plain LoRA (bf16 backbone); None: the profile's (QLoRA)
EVAL_QUESTIONS = None  # test questions for the before/after evaluation; None: all
DATA_SOURCE = "hf"  # full profile GSM8K: "hf", "tfds" or "kaggle"
GSM8K_PATH = None  # full: a local GSM8K (a file, or the openai/gsm8k folder); None: download
DATASET = None  # None: GSM8K in the reasoning format; or a HF dataset id / local file ...
PROMPT_FIELD, RESPONSE_FIELD = "prompt", "response"  # ... and its two text columns
KAGGLE_MODEL = None  # to upload the export: "<user>/<model>/jax/<variation>"; None: no upload
RECIPE_OVERRIDES = {}  # any other recipe field by name, e.g. {"batch_size": 4, "eval.batch_size": 8}

# %%
import dataclasses

from IPython.display import Markdown, display

from tunixkit import (
    data,
    evaluation,
    families,
    models,
    pipeline,
    prompting,
    recipes,
    runlog,
    runtime,
    training,
)
from tunixkit.tools import memplan

rt, recipe, out_dir, clock = recipes.start_notebook(recipes.SFT, globals())
recipe

# %% [markdown]
# ## Data
# Each example is the chat prompt (with the reasoning-format system prompt) and a target completion;
# the loss falls on the target only. GSM8K solutions become the `<reasoning>` and the `#### N` line
# the `<answer>`. Held-out test questions give the eval loss and the before/after evaluation.

# %%
load = dict(data_dir=out_dir / "data", source=DATA_SOURCE, path=GSM8K_PATH)
train_records = recipes.gsm8k(rt, "train", **load)
test_records = recipes.gsm8k(rt, "test", limit=recipe.eval_questions, **load)
test_records = test_records[: clock.sized(len(test_records))]  # a rehearsal takes a few
family = models.get_spec(recipe.model_id).family  # its chat template writes the prompts
if DATASET is None:
    train_pairs = [data.sft_pair(r, family=family) for r in train_records]
else:  # any instruction dataset: its prompt column goes into the chat template as is
    with runtime.parameter_for_a_copy("DATASET"):  # offline: the error names the parameter
        rows = data.load_rows(DATASET, "train")
    end = families.get(family).end_of_turn
    train_pairs = [
        (prompting.format_prompt(p, system_prompt=None, family=family), r + end)
        for p, r in data.columns(rows, [PROMPT_FIELD, RESPONSE_FIELD], source=DATASET)
    ]
eval_pairs = [data.sft_pair(r, family=family) for r in test_records[: recipe.eval_examples]]
print(train_pairs[0][0] + train_pairs[0][1])

# %% [markdown]
# ## Model and adapters
# LoRA adapters on the attention and MLP projections; only they are trained. With QLoRA the frozen
# backbone is stored in nf4.

# %%
mesh = runtime.make_mesh()
# TPU/GPU: does the recipe fit the chip? (before any weights load)
memplan.check("sft", recipe, mesh)
base = models.load_model(recipe.model_id, source=SOURCE, mesh=mesh)
clock.record("load", base.load_seconds)  # sizes the export the session clock keeps time for
model = models.apply_lora(
    base.model,
    family=base.family,
    rank=recipe.lora_rank,
    alpha=recipe.lora_alpha,
    qlora=recipe.qlora,
    mesh=mesh,
)
tuned = dataclasses.replace(base, model=model)
size = models.footprint(model)
size

# %% [markdown]
# ## Before training
# Greedy answers to the test questions: format compliance and accuracy (95% CI). A resumed run
# reads them back from `OUTPUT_DIR`.

# %%
with clock.timed("evaluation", items=len(test_records)):
    before = evaluation.evaluate(
        tuned, test_records, name="before", config=recipe.eval, output_dir=out_dir, reuse=True
    )
display(Markdown(evaluation.comparison_table([before])))

# %% [markdown]
# ## Train
# AdamW with warmup-cosine and gradient clipping. The eval loss on held-out examples is measured
# at the start, every `eval_every` steps and at the last step. With `packing` each row of
# `max_len` tokens holds as many whole examples as fit, each attending only to itself:
# variable-length data trains with less padding (`bench/sft_packing.py`), and the loss is the
# same. TensorBoard: `tensorboard --logdir OUTPUT_DIR/tensorboard`.

# %%
rows = dict(max_len=recipe.max_len, batch_size=recipe.batch_size, packing=recipe.packing)
batches = training.sft_dataset(train_pairs, base.tokenizer, num_batches=recipe.steps, **rows)
eval_batches = training.sft_dataset(eval_pairs, base.tokenizer, **rows)
config = training.trainer_config(
    out_dir,
    max_steps=recipe.steps,
    eval_every=recipe.eval_every,
    checkpoint_every=recipe.checkpoint_every,
    description="SFT",
)
trainer = training.sft_trainer(
    model,
    training.optimizer(recipe.learning_rate, clock.schedule_steps(recipe.steps, label="SFT")),
    config,
    pad_id=base.tokenizer.pad_id(),
)
trained = training.run(
    trainer,
    batches,
    eval_batches,
    mesh=mesh,
    metrics_file=out_dir / "metrics.jsonl",
    session=clock,
    label="SFT",
)
peak_bytes, peak_what = runtime.peak_memory()

# %%
metrics = runlog.read_metrics(out_dir / "metrics.jsonl")
fig = runlog.plot_metrics(metrics, out_dir / "loss.png", title=f"SFT, {recipe.model_id}")
eval_steps, eval_losses = metrics["eval"]["loss"]
print(
    f"eval loss {eval_losses[0]:.3f} (step {eval_steps[0]}) -> {eval_losses[-1]:.3f} (step {eval_steps[-1]})"
)

# %% [markdown]
# ## Export
# Written before the final evaluation, so a session that runs out of time still leaves a model.
# `export/hf`: the adapters merged into the base weights in the Hugging Face layout (loads in tunix
# and `transformers`; 02_grpo_gsm8k's `MODEL_PATH`). `export/orbax`: params, their tunix config and
# the tokenizer, for a Kaggle Model; with `KAGGLE_MODEL` set the judged model's is uploaded after
# the final evaluation (below).
# `ckpts/actor/<step>/model_params`: the merged model where the competition's template writes its
# last checkpoint, the judged model (02 and 06 load it with tunix alone).

# %%
# timed as the export; prints the judged model's path
export = pipeline.export_judged(model, base, clock, trained.steps, recipe, mesh=mesh)

# %% [markdown]
# ## After training
# The same questions as before training (fewer, and said so, if the session is short of time).
# The export stays the judged model unless it got fewer right than the start model and a paired
# test (McNemar's) says that is not chance: then the start model is the judged model again.
# With `KAGGLE_MODEL` set, the judged model's Orbax export is uploaded then.

# %%
n = clock.fit(len(test_records))
with clock.timed("evaluation", items=n):
    # the export itself is measured (the merged weights 02 starts from and the judges load), not
    # the QLoRA model in memory: its nf4 backbone answers a little differently
    exported = models.load_model(recipe.model_id, path=export.hf, mesh=mesh, verbose=False)
    after = evaluation.evaluate(
        exported, test_records[:n], name="after", config=recipe.eval, output_dir=out_dir
    )
display(Markdown(evaluation.comparison_table([before.first(n), after])))
display(Markdown(evaluation.side_by_side([before.first(n), after], k=3)))
fig = evaluation.plot_comparison(
    [before.first(n), after], out_dir / "eval.png", title="GSM8K before/after SFT"
)
# the judged model is the better one: the export, unless it got fewer questions right than the
# start model and a paired test says that is not chance (then the start model is judged again)
adoption = pipeline.finish(  # then uploads the judged model (the trained or the start's)
    export,
    before.first(n),
    after,
    start=base,
    kaggle_model=KAGGLE_MODEL,
    notes=f"SFT, {trained.steps} steps",
    mesh=mesh,
)
judged_path, unrestricted_kaggle_model = adoption.judged, adoption.kaggle_model

# %% [markdown]
# ## Memory
# Trainable parameters, the bytes the parameters take, and the peak memory of the run (on CPU the
# process's resident memory). `bench/sft_step.py` compares LoRA, QLoRA and full fine-tuning.

# %%
memory = {
    "mode": "QLoRA (nf4)" if recipe.qlora else "LoRA",
    "params": size["params"],
    "trainable": size["trainable"],
    "param_MiB": size["bytes"] / 2**20,
    "peak_MiB": peak_bytes / 2**20,
    "peak_measures": peak_what,
}
memory

# %%
summary = {
    "profile": rt.profile,
    "model_id": recipe.model_id,
    "qlora": recipe.qlora,
    "steps": trained.steps,
    "resumed_from": trained.resumed_from,
    "stopped": trained.stopped,
    "seconds": clock.elapsed(),
    "train_seconds": trained.seconds,
    "format_rate_before": before.first(n).format_rate,
    "format_rate_after": after.format_rate,
    "accuracy_before": before.first(n).accuracy,
    "accuracy_after": after.accuracy,
    "eval_loss_first": float(eval_losses[0]),
    "eval_loss_last": float(eval_losses[-1]),
    "eval_loss_steps": [int(eval_steps[0]), int(eval_steps[-1])],
    "weights_digest": runlog.digest(model),
    "memory": memory,
    "eval": {"before": before.first(n).summary(), "after": after.summary()},
    "exports": {"hf": export.hf, "orbax": export.orbax},
    "unrestricted_kaggle_model": unrestricted_kaggle_model,
    "adoption": adoption.report(),
}
runlog.write_summary(out_dir, summary)
{k: v for k, v in summary.items() if not isinstance(v, dict)}

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
# The smoke run must show SFT teaching the format: compliance at least 0.5 after training and the
# held-out loss cut by 40% (learning bars: each fails with training switched off, and each sits at
# most half way from the untrained figure to the trained one: 0 -> 1.0, 1 -> 0.05), from a model
# whose compliance was at most 0.2 (a guard). The bars are `recipes.SFT.BARS`; the figures and what
# each bar gave go to `OUTPUT_DIR/checks.json`.

# %%
# What must hold is asserted; what learning should show is asserted in a whole smoke run of the
# preset (the run its bars were measured on) and only warned about with other settings and in full
# (a noisy figure must not end a long run in an error).
checks = evaluation.Checks.for_run(rt, recipe, rehearsal=REHEARSAL)
checks.must(trained.ended_well(clock.hours), trained)  # all steps, STOP, the session's clock
losses = summary["eval_loss_first"], summary["eval_loss_last"]
figures = {
    "format_before": before.format_rate,
    "format_after": after.format_rate,
    "eval_loss_ratio": losses[1] / losses[0],
}
if trained.stopped == "done":  # a whole run: the recipe's bars (recorded in checks.json)
    checks.bars(recipe.BARS, figures, out_dir / "checks.json")
else:  # a session stopped early is judged at its end
    checks.should(losses[1] < losses[0], f"eval loss {losses[0]:.3f} -> {losses[1]:.3f}")
checks.done("SFT")
print(f"unrestricted_kaggle_model = {unrestricted_kaggle_model!r}")  # the id the track reads, last
