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
# # 02 · GRPO on GSM8K
#
# Group Relative Policy Optimization with tunix's `RLCluster` + `GRPOLearner`: for every question the
# policy samples G answers, the reward functions score them, and answers better than their group's
# mean are made more likely, with a KL penalty to the starting model (the k3 estimator of
# DeepSeekMath's GRPO; tunix's default estimator has no pull to the reference, see `rl.GRPOSettings`).
#
# | | smoke (CPU, CI) | full (TPU/GPU) |
# |---|---|---|
# | model | `tiny-gemma3-sft` (a cached short SFT warm start) + LoRA rank 16 on the MLP of the shared reference, KL beta 0.04 | `gemma-3-1b-it` + LoRA rank 64 on attention and MLP, KL beta 0.08 (or your 01_qlora_sft output via `MODEL_PATH`) |
# | data | synthetic GSM8K-style problems, small numbers | GSM8K train; test set (1,319) for evaluation |
# | steps | 120 x 8 prompts x G=8 | up to 3,000 x 4 prompts x G=4, as many as the session allows |
#
# **MATH instead of GSM8K**: `DATASET = "math"` trains on MATH's train split (7,500 problems,
# `EleutherAI/hendrycks_math`, or your copy in `MATH_PATH`) with LaTeX answers (fractions,
# radicals, intervals, sets), rewarded by `rewards.LATEX_REWARDS` (the format, and the answer as
# math-verify decides: `rewards.latex_answer_match`, a hedge or range earns what a wrong answer
# does), and evaluates on MATH-500 (`MATH500_PATH`). The learning bars below were measured on GSM8K:
# with MATH they are reported, not enforced.
#
# **Kaggle TPU v5e-8**: the mesh is `(8, 1)` over `("fsdp", "tp")`: Gemma 3 1B has one KV head, so
# tensor parallelism cannot split attention; FSDP shards the parameters and the batch over the 8 cores.
#
# **Sessions.** One clock (`SESSION_HOURS`, 9 on Kaggle) runs from the first cell: training stops in
# time to write a checkpoint, export the model and evaluate it before the session ends. Checkpoints
# every 100 steps go to `OUTPUT_DIR/checkpoints`; run again with the same `OUTPUT_DIR` and it resumes.
# In a **new** Kaggle session, add the last session's output as an input and set `RESUME_FROM` to it
# (e.g. `"/kaggle/input/<notebook>/runs/02_grpo_gsm8k"`): training continues where it stopped.
#
# Results: `OUTPUT_DIR/summary.json`, `curves.png`, `eval.png`, `metrics.jsonl` and `rollouts.jsonl`
# (every step, across sessions), predictions as JSONL, TensorBoard logs, exports in
# `OUTPUT_DIR/export/{hf,orbax}`.

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
OUTPUT_DIR = "runs/02_grpo_gsm8k"  # everything this notebook writes goes here
SESSION_HOURS = None  # the session's hard limit; None: 9 on Kaggle, 12 on Colab, none elsewhere
RESUME_FROM = None  # a previous session's OUTPUT_DIR (read-only is fine) to continue from
START_FRESH = False  # True: move an OUTPUT_DIR made with other settings aside and start again
COMPILE_CACHE = None  # where compiled programs are kept; None: OUTPUT_DIR/jax_cache; False: off
REHEARSAL = False  # True: time a few steps at the real shapes, project the session, no long run
REHEARSAL_FROM = None  # a rehearsal's OUTPUT_DIR or rehearsal.json: sizes the LR schedule
MODEL_ID = None  # None: the profile's model ("gemma-3-1b-it" or "gemma-2-2b-it" in full)
MODEL_PATH = None  # a local HF-layout folder to start from (e.g. 01_qlora_sft's export/hf)
SOURCE = "auto"  # full profile: "auto" (Kaggle on Kaggle, else Hugging Face), "hf", "kaggle"
NUM_STEPS = None  # GRPO steps; None: the profile's
LEARNING_RATE = None  # peak learning rate; None: the profile's
LORA_RANK = None  # LoRA rank; None: the profile's
NUM_GENERATIONS = None  # completions per prompt (G); None: the profile's
EVAL_QUESTIONS = None  # test questions for the greedy evaluation; None: all (1,319 in full)
DATA_SOURCE = "hf"  # full profile: "hf", "tfds" or "kaggle" (GSM8K)
GSM8K_PATH = None  # full: a local GSM8K (a file, or the openai/gsm8k folder); None: download
DATASET = None  # None: "gsm8k"; "math": MATH's train split, LaTeX answers, MATH-500 to evaluate
MATH_PATH = None  # DATASET "math": a local copy of EleutherAI/hendrycks_math; None: download
MATH500_PATH = None  # DATASET "math": a local copy of HuggingFaceH4/MATH-500; None: download
USE_RUBRIC = False  # add the example rubric reward defined below
KAGGLE_MODEL = None  # to upload the export: "<user>/<model>/jax/<variation>"; None: no upload
RECIPE_OVERRIDES = {}  # any other recipe field by name, e.g. {"batch_size": 4, "eval.batch_size": 8}
ROLLOUT_ENGINE = None  # None: tunix's sampler ("vanilla"); "vllm" / "sglang_jax": see Train
TRACE_STEPS = 3  # first GRPO steps traced: where the time goes (trace/, step_time.png)

# %%
import dataclasses

from IPython.display import Markdown, display

from tunixkit import (
    data,
    evaluation,
    families,
    models,
    pipeline,
    profiling,
    prompting,
    recipes,
    rl,
    runlog,
    runtime,
    training,
)
from tunixkit.tools import memplan

rt, recipe, out_dir, clock = recipes.start_notebook(recipes.GRPO, globals())
# before any loading
rl.check_rollout_engine(recipe.grpo.rollout_engine, models.get_spec(recipe.model_id).family)
recipe

# %% [markdown]
# ## Data
# Training prompts and held-out questions, with the Gemma chat template and the
# `<reasoning>`/`<answer>` system prompt (for MATH, one that asks for the answer in LaTeX). Rows
# without a parseable answer are counted, not dropped silently.

# %%
train_records, test_records = recipes.grpo_records(
    rt,
    recipe.dataset,
    data_dir=out_dir / "data",
    source=DATA_SOURCE,
    gsm8k_path=GSM8K_PATH,
    math_path=MATH_PATH,
    math500_path=MATH500_PATH,
    limit=recipe.eval_questions,
)
test_name = "MATH-500" if recipe.latex else "GSM8K"
test_records = test_records[: clock.sized(len(test_records))]  # a rehearsal takes a few
heldout_records = test_records[: recipe.heldout_questions]
eval_config = recipe.eval_config()  # the data set's system prompt
print(f"{len(train_records)} training problems, {len(test_records)} {test_name} test problems")
print(prompting.format_prompt(train_records[0]["question"], eval_config.system_prompt))

# %% [markdown]
# ## Policy and reference
# The reference model is loaded first; with LoRA (both profiles), the adapters are added *to that
# same object*, so the policy and the reference share one frozen backbone in memory. A recipe with
# `lora_rank=None` fine-tunes every weight and loads a second copy as the policy.

# %%
mesh = runtime.make_mesh()
# TPU/GPU: does the recipe fit the chip? (before any weights load)
memplan.check("grpo", recipe, mesh)
reference = models.load_model(recipe.model_id, source=SOURCE, path=MODEL_PATH, mesh=mesh)
clock.record("load", reference.load_seconds)  # sizes the export the session clock keeps time for
actor = models.trainable(  # LoRA on the reference's weights; without a rank, a second copy
    reference,
    lora_rank=recipe.lora_rank,
    lora_alpha=recipe.lora_alpha,
    lora_modules=recipe.lora_modules,
    qlora=recipe.qlora,
    mesh=mesh,
)
policy = dataclasses.replace(reference, model=actor)  # the policy with the reference's tokenizer
print(f"mesh {dict(mesh.shape)}; rollouts stop at {policy.eos_ids}")

# %% [markdown]
# ## Rewards
# Each reward function takes `(prompts, completions, **kwargs)` and returns one float per
# completion; the dataset's other columns (here `answer` and `question`) arrive as keyword
# arguments. GRPO sums them. The defaults for GSM8K (`rewards.DEFAULT_REWARDS`): exact format,
# approximate format (per tag), the answer (partial credit near it), and the number anywhere; for
# MATH (`rewards.LATEX_REWARDS`): the format and the LaTeX answer. `recipe.reward_fns()` picks them.
#
# **Add your own**: a rubric reward, for example, that gives credit for showing the arithmetic and
# penalises reasoning that is too short or too long. Set `USE_RUBRIC = True` to train with it.


# %%
def reasoning_rubric(prompts, completions, **kwargs):
    """+0.5 if the reasoning shows a calculation, -0.5 if it is under 5 or over 200 words."""
    scores = []
    for text in completions:
        reasoning = text.split("</reasoning>")[0]
        words = len(reasoning.split())
        shows_work = any(op in reasoning for op in ("+", "-", "*", "/", "="))
        scores.append((0.5 if shows_work else 0.0) - (0.5 if words < 5 or words > 200 else 0.0))
    return scores


reward_fns = [*recipe.reward_fns()] + ([reasoning_rubric] if USE_RUBRIC else [])
example = ["<reasoning>3 + 4 = 7 apples.</reasoning>\n<answer>7</answer>", "7"]
{fn.__name__: fn(["q", "q"], example, answer=["7", "7"]) for fn in reward_fns + [reasoning_rubric]}

# %% [markdown]
# ## Before training
# Greedy evaluation on the test questions (accuracy with a 95% confidence interval), and the held-out
# reward: completions sampled at the rollout temperature on unseen questions, scored by the same
# reward functions that GRPO optimises. A resumed run reads both back from `OUTPUT_DIR`.

# %%
sampled = recipe.grpo.sampled(eval_config)
with clock.timed("evaluation", items=len(test_records)):
    before = evaluation.evaluate(
        policy,
        test_records,
        name="before",
        config=eval_config,
        output_dir=out_dir,
        reuse=True,
        latex=recipe.latex,
    )
    heldout_before = rl.heldout_reward(
        policy,
        heldout_records,
        reward_fns,
        sampled,
        name="heldout_before",
        samples=recipe.heldout_samples,
        output_dir=out_dir,
        reuse=True,
        latex=recipe.latex,
    )
display(Markdown(evaluation.comparison_table([before])))
heldout_before

# %% [markdown]
# ## Train
# Checkpoints every `checkpoint_every` steps; a rerun with the same `OUTPUT_DIR` (or a new session
# with `RESUME_FROM`) restores the last one and continues with the batches it had not seen. Training
# ends at `num_steps`, or earlier when the session clock needs the rest of the time for the
# checkpoint, export and evaluation. TensorBoard: `tensorboard --logdir OUTPUT_DIR/tensorboard`;
# W&B only if a `WANDB_API_KEY` secret is set.
#
# **Rollout engine.** Rollouts use tunix's own sampler (`ROLLOUT_ENGINE = None`, i.e. "vanilla").
# tunix 0.1.7 can also hand them to vLLM (TPU) or SGLang-JAX, but ships the weight mappings those
# need only for Llama 3 and Qwen 2/3, not for Gemma; choosing one with a Gemma model stops in the
# setup cell with that message, and a missing engine package is named there too (nothing is
# imported unless chosen).

# %%
trace = profiling.StepTrace(out_dir / "trace", TRACE_STEPS)  # the first steps, then it stops
learner, cluster = rl.build_grpo(
    actor,
    reference.model,
    reference.tokenizer,
    mesh=mesh,
    settings=recipe.grpo,
    reward_fns=reward_fns,
    output_dir=out_dir,
    eos_ids=reference.eos_ids,
    vocab_size=families.vocab_size(reference.config),
    family=reference.family,
    schedule_steps=clock.schedule_steps(recipe.grpo.num_steps, label="GRPO"),
    trace=trace,
)
batches = data.grpo_dataset(
    train_records,
    batch_size=recipe.grpo.batch_size,
    num_batches=recipe.grpo.num_steps,
    seed=0,
    family=reference.family,
    fit=evaluation.prompt_fitter(reference.tokenizer, recipe.grpo.max_prompt_length),
    system_prompt=eval_config.system_prompt,
)
trained = training.run(
    learner, batches, mesh=mesh, metrics_file=out_dir / "metrics.jsonl", session=clock, label="GRPO"
)

# %%
series = rl.curves(out_dir / "metrics.jsonl")
rewards_seen = series.get("reward", ([], []))[1]
window = max(1, min(10, len(rewards_seen) // 4))
fig = rl.plot_curves(
    series, out_dir / "curves.png", smooth=window, title=f"GRPO, {recipe.model_id}"
)

# %% [markdown]
# ## Where a step's time goes
# The first `TRACE_STEPS` steps of this session ran under tunix's perf tracer: seconds per phase of
# each step (rollout, the reference's log-probabilities for the KL term, the rewards and advantages,
# the update), `other` for the rest of the step on the host (checkpoints, metrics), as the host
# waited for them: a part dispatched without waiting (the reference's pass) is charged to the part
# that waits for its result, so the device's own time of each is given below the table. The
# first step compiles. `trace/trace.json` holds every span, per thread and device: open it in
# ui.perfetto.dev or chrome://tracing. A step bound by its rollout gains most from a shorter answer
# limit (`max_generation_steps`) or fewer answers per prompt (`NUM_GENERATIONS`).

# %%
# written after the traced steps, or here if training ended first
step_time = trace.finish(trained.trained)
fig = trace.plot(out_dir / "step_time.png", title=f"GRPO steps, {recipe.model_id}")
trace  # seconds by phase

# %% [markdown]
# ## Export
# Written before the final evaluation, so a session that runs out of time still leaves a model.
# `export/hf`: the Hugging Face layout (LoRA merged), loadable by tunix and `transformers`.
# `export/orbax`: params, their tunix config and the tokenizer, for a Kaggle Model (the
# multi-session track wants Orbax, not safetensors). `ckpts/actor/<step>/model_params`: the same
# merged model where the competition's template writes its last checkpoint: **the judged model**.

# %%
# timed as the export; prints the judged model's path
export = pipeline.export_judged(actor, reference, clock, trained.steps, recipe, mesh=mesh)
judged_root = clock.judged_dir()  # its ckpts/actor: /kaggle/working on Kaggle, else OUTPUT_DIR

# %% [markdown]
# ## After training
# The same evaluation as before training. If the session is short of time it covers fewer
# questions (it says how many), and the comparison uses the same questions on both sides. The
# export stays the judged model unless it got fewer right than the start model and a paired test
# (McNemar's) says that is not chance: then the start model is the judged model again.
# With `KAGGLE_MODEL` set, the judged model's Orbax export is uploaded then.

# %%
n = clock.fit(len(test_records))  # fewer questions only if the session is short of time
share = n / len(test_records)
with clock.timed("evaluation", items=n):
    # greedy answers: of the export itself (the adapters merged, what 03 or 06 start from), not the
    # adapters in memory
    exported = models.load_model(recipe.model_id, path=export.hf, mesh=mesh, verbose=False)
    after = evaluation.evaluate(
        exported,
        test_records[:n],
        name="after",
        config=eval_config,
        output_dir=out_dir,
        latex=recipe.latex,
    )
    heldout_after = rl.heldout_reward(
        policy,
        heldout_records[: max(1, int(share * len(heldout_records)))],
        reward_fns,
        sampled,
        name="heldout_after",
        samples=recipe.heldout_samples,
        output_dir=out_dir,
        latex=recipe.latex,
    )
display(Markdown(evaluation.comparison_table([before.first(n), after])))
fig = evaluation.plot_comparison(
    [before.first(n), after], out_dir / "eval.png", title=f"{test_name} before/after GRPO"
)
# the judged model is the better one: the export, unless it got fewer questions right than the
# start model and a paired test says that is not chance (then the start model is judged again)
adoption = pipeline.finish(  # then uploads the judged model (the trained or the start's)
    export,
    before.first(n),
    after,
    start=reference,
    kaggle_model=KAGGLE_MODEL,
    notes=f"GRPO, {trained.steps} steps",
    mesh=mesh,
)
judged_path, unrestricted_kaggle_model = adoption.judged, adoption.kaggle_model
heldout_after

# %% [markdown]
# A few of the remaining errors, one per error category:

# %%
for p in evaluation.worst_errors(after, k=3):
    print(f"[{p['category']}] gold {p['gold']}\nQ: {p['question']}\nA: {p['completion']}\n")

# %% [markdown]
# ## The judges' check: the judged model, with tunix alone
# After the decision above, so it is the model that stays judged (the trained one, or the start
# model's when training lost).
# The judged model is `ckpts/actor/<step>/model_params` (the highest step; the path where the
# competition's template writes its last checkpoint: under `/kaggle/working` on Kaggle, else under
# `OUTPUT_DIR`): the whole merged model, not LoRA adapters, with its `tunix_config.json` and
# tokenizer beside it. The check uses no tunixkit, as the judges would: tunix's own Gemma class and
# config, Orbax, and tunix's sampler with the judges' decoding (temperature 1e-4, top-k 1, top-p 1,
# 768 steps, seed 42) answer two prompts of every judged domain, with the notebook's system prompt
# and again without one (the judges' own prompt may not carry it). It prints each answer's length
# and whether it is in the `<reasoning>`/`<answer>` format, then the format rate both ways, and
# writes them to `judges_check.jsonl` beside `ckpts/`. Its code is one file that imports nothing of
# tunixkit, `tunixkit/tools/judges_check.py` (its path is printed below): copy it into a
# submission as it is, or run it from a shell (`python judges_check.py /kaggle/working`).

# %%
from tunixkit.tools import judges_check

print(f"the check's code: {judges_check.__file__}")
judged_answers, judged_folder = judges_check.check(judged_root, eval_config.system_prompt)

# %%
summary = {
    "profile": rt.profile,
    "model_id": recipe.model_id,
    "steps": trained.steps,
    "resumed_from": trained.resumed_from,
    "stopped": trained.stopped,
    "seconds": clock.elapsed(),
    "train_seconds": trained.seconds,
    "reward_first": rl.window_mean(rewards_seen, window, last=False),
    "reward_last": rl.window_mean(rewards_seen, window, last=True),
    "kl_last": rl.window_mean(series.get("kl", ([], []))[1], window, last=True),
    "accuracy_before": before.first(n).accuracy,
    "accuracy_after": after.accuracy,
    "format_rate_before": before.first(n).format_rate,
    "format_rate_after": after.format_rate,
    "heldout_reward_before": heldout_before.reward,
    "heldout_reward_after": heldout_after.reward,
    "heldout_accuracy_before": heldout_before.accuracy,
    "heldout_accuracy_after": heldout_after.accuracy,
    "eval": {"before": before.first(n).summary(), "after": after.summary()},
    "weights_digest": runlog.digest(actor),
    "exports": {"hf": export.hf, "orbax": export.orbax},
    "step_time": step_time,  # the traced steps' seconds by phase (trace/steps.json)
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
# The smoke run must show GRPO learning: the held-out reward and the held-out accuracy of sampled
# answers (the quantities GRPO optimises) rise and the policy moves off its reference (learning
# bars: each fails with training switched off); greedy accuracy does not fall beyond noise and the
# format holds (guards). The bars are `recipes.GRPO.BARS`; the figures and what each bar gave go to
# `OUTPUT_DIR/checks.json`.

# %%
# What must hold is asserted; what learning should show is asserted in a whole smoke run of the
# preset (the run its bars were measured on) and only warned about with other settings and in full
# (a noisy gain must not end a 9-hour run in an error).
checks = evaluation.Checks.for_run(rt, recipe, rehearsal=REHEARSAL)
checks.must(trained.ended_well(clock.hours), trained)  # all steps, STOP, the session's clock
checks.must(trained.steps == recipe.grpo.num_steps or trained.stopped != "done", trained)
# a run that trained traced its first steps, each phase timed
checks.must(trace.complete, f"the first {TRACE_STEPS} GRPO steps were not traced: {step_time}")
checks.must(
    judges_check.answered(judged_answers),
    "the judged model, loaded by tunix alone, left a judged domain's prompt without an answer",
)
figures = {
    "heldout_reward_gain": heldout_after.reward - heldout_before.reward,
    "heldout_accuracy_gain": heldout_after.accuracy - heldout_before.accuracy,
    "greedy_accuracy_change": after.accuracy - before.first(n).accuracy,  # the same questions
    "format_after": after.format_rate,
    # plotted, not a bar: untrained, the last window beats the first about half the time
    "train_reward_change": summary["reward_last"] - summary["reward_first"],
}
bars = recipe.BARS
if recipe.grpo.beta > 0:  # the KL term is computed (and shown in curves.png)
    figures["kl_last"] = summary["kl_last"]
else:
    bars = tuple(b for b in bars if b.figure != "kl_last")
# The bars are those of the smoke recipe run whole: a session stopped early is judged at its end,
# and a run with other settings (fewer steps, say) is warned about, not held to them.
if trained.stopped == "done":
    checks.bars(bars, figures, out_dir / "checks.json")
checks.done("GRPO")
print(f"unrestricted_kaggle_model = {unrestricted_kaggle_model!r}")  # the id the track reads, last
