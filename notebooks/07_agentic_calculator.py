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
# # 07 · Agentic GRPO with a calculator tool
#
# A small model that may call a tool during GRPO can beat one that only guesses once. Here the
# tool is a calculator: during a rollout the model writes
# `<tool_call>{"name": "calculator", "arguments": {"expression": "23 * 47"}}</tool_call>`, tunix's
# agentic learner runs the tool and hands the result back as a turn (`Tool returned result: 1081`),
# and the model answers in `<reasoning>`/`<answer>`. The reward is the answer's correctness.
#
# The calculator parses the expression and evaluates the syntax tree itself, with bounds on size,
# depth and exponents: model output is never run as Python, and any text gives a result or a short
# error for the model. A malformed call costs the episode its reward, never the run.
#
# 1. **Warm start** on traces, so that the model can call the tool at all. In smoke only 30% of the
#    traces use the tool and the rest answer directly, so the warm-started model mostly guesses;
# 2. **agentic GRPO** (LoRA on the shared reference, KL term) with the calculator: episodes that
#    call the tool and quote its result are rewarded, and the model learns to call it.
#
# In smoke (tiny 2-layer model, 20 GRPO steps of 4 questions x 4 episodes, about 3 minutes on 2 CPU
# cores) held-out accuracy with the tool goes from 0.05 (greedy, it never calls) to 0.92 (it always
# calls, every call runs); the last cell asserts that accuracy and well-formed calls rise.
#
# | | smoke (CPU, CI) | full (TPU) |
# |---|---|---|
# | model | `tiny-gemma3-sft`; the warm start fine-tunes every weight | `gemma-3-1b-it` (or `gemma-2-2b-it`), LoRA rank 64 in both stages |
# | questions | GSM8K-style, numbers up to 99, one calculation each | GSM8K (traces from its one-calculation problems) |
# | turns | 2 (a call, then the answer) | 4 |
#
# Results: `OUTPUT_DIR/summary.json`, `tool_curves.png`, `tool_eval.png`, `grpo/episodes.jsonl`
# (every training episode), `tool_<eval>.jsonl`, exports in `<stage>/export/{hf,orbax}`.

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
OUTPUT_DIR = "runs/07_agentic_calculator"  # everything this notebook writes goes here
SESSION_HOURS = None  # the session's hard limit; None: 9 on Kaggle, 12 on Colab, none elsewhere
RESUME_FROM = None  # a previous session's OUTPUT_DIR (read-only is fine) to continue from
START_FRESH = False  # True: move an OUTPUT_DIR made with other settings aside and start again
COMPILE_CACHE = None  # where compiled programs are kept; None: OUTPUT_DIR/jax_cache; False: off
REHEARSAL = False  # True: time a few steps at the real shapes, project the session, no long run
REHEARSAL_FROM = None  # a rehearsal's OUTPUT_DIR or rehearsal.json: sizes the LR schedule
MODEL_ID = None  # None: the profile's ("gemma-3-1b-it" in full; "gemma-2-2b-it" also allowed)
NUM_STEPS = None  # GRPO steps; None: the profile's
SFT_STEPS = None  # warm-start (SFT) steps before GRPO; None: the profile's
LEARNING_RATE = None  # GRPO's peak learning rate; None: the profile's
LORA_RANK = None  # GRPO's LoRA rank; None: the profile's
NUM_GENERATIONS = None  # episodes per question (G); None: the profile's
EVAL_QUESTIONS = None  # held-out questions for the evaluations; None: the profile's
GENERATION_STEPS = None  # tokens per episode: turns and tool results (eval, GRPO); None: profile's
DATA_SOURCE = "hf"  # full profile: "hf", "tfds" or "kaggle" (GSM8K)
GSM8K_PATH = None  # full: a local GSM8K (a file, or the openai/gsm8k folder); None: download
KAGGLE_MODEL = None  # to upload the export: "<user>/<model>/jax/<variation>"; None: no upload
RECIPE_OVERRIDES = {}  # any other recipe field by name, e.g. {"batch_size": 4, "eval.batch_size": 8}
JUDGED = None  # True: the tool model is also the judged model (ckpts/actor); None: False
TRACE_STEPS = 3  # first GRPO steps traced: where the time goes (grpo/trace/, step_time.png)

# %%
from IPython.display import Markdown, display

from tunixkit import (
    agentic,
    calculator,
    evaluation,
    models,
    pipeline,
    profiling,
    recipes,
    rl,
    runlog,
    runtime,
)
from tunixkit.tools import memplan

rt, recipe, out_dir, clock = recipes.start_notebook(recipes.Agentic, globals())
recipe

# %% [markdown]
# ## The tool
# Any text in, a short text out; no code is ever run.

# %%
for text in ("23 * 47", "(120 - 45) / 3", "2 ** 200", "__import__('os')", "1 / 0", "9 ** 9 ** 9"):
    print(f"{text!r:22} -> {calculator.calculate(text)!r}")
print(calculator.tool_call("23 * 47"))

# %% [markdown]
# ## Questions
# Training and held-out questions. The warm start uses the ones a single calculation solves: the
# recipe's `tool_share` of them written as a conversation (the call, the tool's result, the answer
# quoting it), the rest as a direct answer to the same prompt. Before the model loads, the memory
# plan compiles both stages' steps at their real shapes (on a TPU/GPU; skipped on CPU): a stage that
# does not fit the chip stops here, naming the recipe fields to turn down.

# %%
load = dict(
    data_dir=out_dir / "data",
    source=DATA_SOURCE,
    path=GSM8K_PATH,
    max_operand=recipe.max_operand or 30,
)
train_records = recipes.gsm8k(rt, "train", **load)
test_records = recipes.gsm8k(rt, "test", limit=recipe.eval_questions, **load)
test_records = test_records[: clock.sized(len(test_records))]  # a rehearsal takes a few
if recipe.single_call:  # the one-calculation problems only (smoke)
    train_records, test_records = (
        agentic.single_call_records(train_records),
        agentic.single_call_records(test_records),
    )
traces = agentic.single_call_records(train_records)[: recipe.trace_questions]
print(
    f"{len(train_records)} training questions, {len(test_records)} held out, {len(traces)} warm-start"
    f" traces ({recipe.tool_share:.0%} with the tool)"
)
mesh = runtime.make_mesh()
stages = pipeline.Stages(out_dir, recipe.shares, clock, mesh=mesh)  # what a rerun has done
# TPU/GPU: do the stages still to do fit the chip? (before the weights load)
memplan.check_stages(recipe, mesh, stages=stages.to_do())
start = models.load_model(recipe.model_id, mesh=mesh)
trace_pairs = agentic.trace_pairs(
    traces, start.tokenizer, tools_prompt=recipe.tools_prompt, tool_share=recipe.tool_share
)
call = next(i for i, (_, c) in enumerate(trace_pairs) if c.startswith("<tool_call>"))
print(trace_pairs[call + 1][0] + trace_pairs[call + 1][1])  # the call, its result, the answer

# %% [markdown]
# ## Stage 1: warm start on the traces
# Loss on the model's turns only (the call; the answer, which quotes the tool's result). The
# recipe's `tool_share` of the traces use the tool, the rest answer the same prompt directly:
# the model learns both ways, and GRPO finds out which one pays.

# %%
print(stages.summary())
warm = pipeline.sft_stage(stages, "sft", trace_pairs, recipe, judged=recipe.judged)
if warm:  # no judged evaluation here: every finished stage is adopted (pipeline.adopt says so)
    pipeline.adopt(stages, "sft", recipe)

# %% [markdown]
# ## Before GRPO
# Greedy episodes on the held-out questions, through the same agent, environment and chat template
# as training: with the tool, and without it (the plain prompt, one turn). Stored and reused on a rerun.


# %%
evals = {}
if warm:
    with clock.timed("evaluation", items=len(test_records)):
        evals |= agentic.evaluate_stage(
            warm, test_records, recipe, label="before", output_dir=out_dir, mesh=mesh
        )
display(Markdown(agentic.table(evals)))

# %% [markdown]
# ## Stage 2: agentic GRPO
# G episodes per question; each episode's reward is its answer's correctness. Per step: the share of
# episodes that call the tool, of calls that parse and run, of answers that use the tool's result,
# and accuracy (`OUTPUT_DIR/grpo/metrics.jsonl`, every episode in `grpo/episodes.jsonl`).

# %%
trace = profiling.StepTrace(out_dir / "grpo" / "trace", TRACE_STEPS)  # its first steps
grpo_export = agentic.stage(stages, "grpo", train_records, recipe, trace=trace)
if grpo_export:
    pipeline.adopt(stages, "grpo", recipe)
metrics = out_dir / "grpo" / "metrics.jsonl"  # every GRPO step so far, of every session
fig = rl.plot_curves(metrics, out_dir / "tool_curves.png", title=f"Agentic GRPO, {recipe.model_id}")

# %% [markdown]
# ## Where a step's time goes
# The first `TRACE_STEPS` steps of this session ran under tunix's perf tracer (the second one, the
# only one its agentic learner exports): seconds per phase of each step (the episodes' sampling, the
# tool's calls, the reference's log-probabilities, the rewards, the update) and `other`, the time no
# phase covers. The episodes sample on their own threads, ahead of the update, so the phases can add
# up to more than the step. The first step compiles. `grpo/trace/perfetto_trace_v2_*.pb` (written by
# tunix's own trace writer) holds every span, per thread and device: open it in ui.perfetto.dev.

# %%
step_time = trace.finish()  # written after the traced steps, or here if training ended first
fig = trace.plot(out_dir / "step_time.png", title=f"Agentic GRPO steps, {recipe.model_id}")
trace  # seconds by phase

# %% [markdown]
# A few training episodes from the last steps, as the model wrote them:

# %%
print(agentic.show_episodes(out_dir / "grpo" / "episodes.jsonl", k=3))

# %% [markdown]
# ## After GRPO
# The same evaluations; fewer questions if the session is short of time (it says so). GRPO trains on
# the tool prompt only: in smoke the trained model also writes a call where no tool is offered
# ("after, no tool"), and nothing answers it.

# %%
if grpo_export:
    n = clock.fit(len(test_records))
    with clock.timed("evaluation", items=n):
        evals |= agentic.evaluate_stage(
            grpo_export, test_records[:n], recipe, label="after", output_dir=out_dir, mesh=mesh
        )
display(Markdown(agentic.table(evals)))
fig = agentic.plot_eval(
    evals, out_dir / "tool_eval.png", title=f"Held-out questions, {recipe.model_id}"
)

# %% [markdown]
# ## Export
# The GRPO stage's export (`grpo/export/hf` merged, `grpo/export/orbax` for a Kaggle Model; notebook
# 02 shows the judges' load check). The competition's judges run no tool, so this tool model is not
# written as the judged model (`ckpts/actor/<step>/model_params`) unless `JUDGED = True` (then the
# last finished stage's, under `/kaggle/working` on Kaggle, else `OUTPUT_DIR`). With `KAGGLE_MODEL`
# set, the export is uploaded.

# %%
final = stages.final()
unrestricted_kaggle_model = stages.publish(KAGGLE_MODEL, notes="07 agentic calculator")
print(f"unrestricted_kaggle_model = {unrestricted_kaggle_model!r}")

# %%
series = runlog.read_metrics(out_dir / "grpo" / "metrics.jsonl").get("train", {})
window = max(1, min(10, len(series.get("reward", ([], []))[1]) // 4))
summary = {
    "profile": rt.profile,
    "model_id": recipe.model_id,
    "stages": stages.state,
    "final_stage": final,
    "seconds": clock.elapsed(),
    "eval": evals,
    "train": {
        k: {
            "first": rl.window_mean(v[1], window, last=False),
            "last": rl.window_mean(v[1], window, last=True),
        }
        for k, v in series.items()
        if k == "reward" or k.startswith("tool/")
    },
    "unrestricted_kaggle_model": unrestricted_kaggle_model,
}
runlog.write_summary(out_dir, summary)
summary["train"]

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
# A whole smoke run must show the tool being learned: on held-out questions, accuracy with the tool
# rises by 0.4 or more, the share of episodes that make a well-formed call by 0.5 or more, and the
# trained model is more accurate with the tool than without it by 0.4 or more (each near half of
# what training moved it; each fails with training switched off). The bars are `recipes.Agentic.BARS`; the figures and what
# each bar gave go to `OUTPUT_DIR/checks.json`.

# %%
# What must hold is asserted; what learning should show is asserted in a whole smoke run of the
# preset (the run its bars were measured on) and only warned about with other settings and in full
# (a noisy gain must not end a long run in an error).
checks = evaluation.Checks.for_run(rt, recipe, rehearsal=REHEARSAL)
if final == "grpo":
    before, after = evals["before, tool"], evals["after, tool"]
    formed = [e["tool_call_rate"] * e["well_formed_rate"] for e in (before, after)]
    figures = {
        "accuracy_before": before["accuracy"],
        "accuracy_after": after["accuracy"],
        "accuracy_gain": after["accuracy"] - before["accuracy"],
        "well_formed_call_gain": formed[1] - formed[0],
        "tool_advantage": after["accuracy"] - evals["after, no tool"]["accuracy"],
    }
    checks.bars(recipe.BARS, figures, out_dir / "checks.json")
else:
    checks.must(
        clock.hours or clock.stop_file.is_file(),
        f"stopped at {final} without a session limit or a STOP file",
    )
checks.must(  # the steps this session trained were traced first, each phase timed
    trace.complete, f"the first {TRACE_STEPS} agentic GRPO steps were not traced: {step_time}"
)
checks.done("agentic")
print(f"unrestricted_kaggle_model = {unrestricted_kaggle_model!r}")  # the id the track reads, last
