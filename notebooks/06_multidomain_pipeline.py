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
# # 06 · Multi-domain pipeline: SFT, self-improvement, preference tuning, then GRPO with judge rewards
#
# What winning entries of the Tunix hackathon did inside one 9-hour session, on every domain the
# judges score (creative writing, ideation, summarization, science, math, code), answering as
# `<reasoning>...</reasoning><answer>...</answer>`:
#
# 1. **SFT** on reasoning traces of every domain (`TRACES`: a local file or a Hugging Face dataset,
#    in chat-messages or prompt/response form);
# 2. **self-improvement**: the model answers new prompts several times, a judge grades the answers,
#    the best ones above a threshold become more SFT data;
# 3. **preference tuning** (`ALGORITHM`: "simpo", "dpo" or "orpo") on pairs the judge ranked;
# 4. **GRPO** with weighted rewards: a judge model scoring each answer against a rubric, rubric checks
#    (structure, length, repetition, "As an AI language model" phrases), prompt relevance, and the
#    answer for math.
#
# Each stage trains LoRA adapters on the previous stage's merged export and exports its own; the
# held-out prompts of every domain are judged after each stage (format, answers under 1K tokens,
# judged score with a 95% CI, math accuracy).
#
# | | smoke (CPU, CI) | full (TPU/GPU) |
# |---|---|---|
# | model | `tiny-gemma3-sft` | `gemma-3-1b-it` (or `gemma-2-2b-it`) |
# | data | synthetic tasks of all six domains, with reference answers | `TRACES` (default `HuggingFaceH4/no_robots`) and GSM8K for math |
# | judge | a deterministic rubric grader, standing in for a judge model | `JUDGE_ID` (a model id) or `JUDGE_PATH` (a larger model's folder), on the same mesh |
#
# **Sessions.** One clock (`SESSION_HOURS`) spans the stages, each with a share of the time
# (`recipe.shares`); every stage checkpoints, and `OUTPUT_DIR/stages.json` says which are done: a rerun,
# or a new session with `RESUME_FROM`, continues at the stage and step where it stopped. The final
# model is `OUTPUT_DIR/grpo/export` (HF layout and Orbax; `KAGGLE_MODEL` uploads it).

# %%
# Install: makes `import tunixkit` work in this kernel (Kaggle, Colab) without a restart and without
# touching the preinstalled jax/libtpu; does nothing where tunixkit is already importable.
import importlib.util  # noqa: E401
import os
import site
import subprocess
import sys
import sysconfig
import time

os.environ.setdefault("TUNIXKIT_SESSION_START", str(time.time()))  # the session clock starts here
if importlib.util.find_spec("tunixkit") is None:
    src = os.environ.get("TUNIXKIT_SOURCE", "https://github.com/tunixkit/tunixkit")
    if not os.path.isdir(src):
        subprocess.run(["git", "clone", "-q", "--depth=1", src, "/tmp/tunixkit"], check=True)
        src = "/tmp/tunixkit"
    subprocess.run(
        ["bash", f"{src}/setup_notebook_tpu_single_host.sh", "--kernel", sys.executable], check=True
    )
    for folder in (sysconfig.get_paths()["purelib"], site.getusersitepackages()):
        if os.path.isdir(folder) and folder not in sys.path:
            site.addsitedir(folder)
    importlib.invalidate_caches()

# %% tags=["parameters"]
PROFILE = None  # "smoke", "full", or None for automatic ($TUNIXKIT_PROFILE, else by device)
OUTPUT_DIR = "runs/06_multidomain_pipeline"  # everything this notebook writes goes here
SESSION_HOURS = None  # the session's hard limit; None: 9 on Kaggle, 12 on Colab, none elsewhere
RESUME_FROM = None  # a previous session's OUTPUT_DIR (read-only is fine) to continue from
START_FRESH = False  # True: move an OUTPUT_DIR made with other settings aside and start again
MODEL_ID = None  # None: the profile's model ("gemma-3-1b-it" or "gemma-2-2b-it" in full)
MODEL_PATH = None  # a local HF-layout folder to start from (e.g. 01_qlora_sft's export/hf)
SOURCE = "auto"  # full profile: "auto" (Kaggle on Kaggle, else Hugging Face), "hf", "kaggle"
TRACES = "HuggingFaceH4/no_robots"  # full profile: SFT traces (HF id or local file)
JUDGE_ID = None  # full profile: the judge's model id; None: the profile's
JUDGE_PATH = None  # a local HF-layout folder of a larger judge (same family as JUDGE_ID)
ALGORITHM = None  # preference stage: "simpo", "dpo" or "orpo"; None: the profile's (SimPO)
NUM_STEPS = None  # GRPO steps; None: the profile's
LORA_RANK = None  # LoRA rank of every stage; None: the profile's
KAGGLE_MODEL = None  # to upload the final export: "<user>/<model>/jax/<variation>"

# %%
import dataclasses
import json

from IPython.display import Markdown, display

from tunixkit import (
    data,
    domains,
    judging,
    models,
    pipeline,
    recipes,
    rewards,
    runlog,
    runtime,
    session,
)

rt, recipe, out_dir, clock = recipes.start(
    recipes.Pipeline, PROFILE, OUTPUT_DIR, session_hours=SESSION_HOURS, resume_from=RESUME_FROM,
    start_fresh=START_FRESH, inputs={"model_path": MODEL_PATH, "traces": TRACES, "judge_path": JUDGE_PATH},
    model_id=MODEL_ID, judge_id=JUDGE_ID, algorithm=ALGORITHM, num_steps=NUM_STEPS, lora_rank=LORA_RANK,
)  # fmt: skip
stages = pipeline.Stages(out_dir, recipe.shares, clock)
print(stages.summary())
recipe

# %% [markdown]
# ## Tasks of every domain
# Training tasks and held-out prompts (`heldout_per_domain` of each domain). In smoke, the tasks are
# generated offline with reference answers; the creative, science and code templates have only a
# handful of distinct prompts, so their held-out prompts also occur in training (summarization,
# ideation and math ones are new).

# %%
if rt.smoke:
    train = [t.record() for t in domains.synthetic_tasks(recipe.train_tasks, seed=0)]
    heldout = [
        t.record()
        for t in domains.synthetic_tasks(recipe.heldout_per_domain * len(domains.DOMAINS), seed=1)
    ]
else:
    traces = domains.load_traces(TRACES)
    math_rows = recipes.gsm8k(rt, "train", data_dir=out_dir / "data", limit=len(traces) // 5)
    train = traces + [{"domain": "math", "prompt": r["question"], "answer": r["answer"],
                       "response": data.format_completion(r["solution"], r["answer"])} for r in math_rows]  # fmt: skip
    heldout, train = domains.split_heldout(train, recipe.heldout_per_domain)
    train = train[: recipe.train_tasks]
print(f"{len(train)} training tasks, {len(heldout)} held-out prompts")
display(Markdown(domains.examples(heldout, k=1)))

# %% [markdown]
# ## The judge
# It grades an answer against a rubric prompt (`judging.JudgeRubric`) with a score from 0 to 10;
# any reply, garbage included, is parsed to a number (`judging.parse_score`), and an answer it has
# already graded is not graded again. In smoke, a deterministic rubric grader plays the judge.

# %%
mesh = runtime.make_mesh()
if recipe.judge_id is None:
    grade = domains.rubric_grader([*domains.synthetic_tasks(recipe.train_tasks, seed=0),
                                   *domains.synthetic_tasks(recipe.heldout_per_domain * len(domains.DOMAINS), seed=1)])  # fmt: skip
else:
    grade = judging.llm_grader(
        models.load_model(recipe.judge_id, source=SOURCE, path=JUDGE_PATH, mesh=mesh)
    )
judge = judging.Judge(grade)
example = heldout[0]
{"reference answer": judge.scores([example["prompt"]], [example["response"]])[0],
 "no answer": judge.scores([example["prompt"]], ["I do not know."])[0]}  # fmt: skip

# %% [markdown]
# ## Before training

# %%
with clock.timed("evaluation", items=len(heldout)):
    start = models.load_model(recipe.model_id, source=SOURCE, path=MODEL_PATH, mesh=mesh)
    clock.record("load", start.load_seconds)
    base_path = MODEL_PATH or str(start.path)
    scores = {
        "start": stages.evaluate(
            "start", recipe.model_id, base_path, heldout, judge, recipe.eval, mesh=mesh
        )
    }
display(Markdown(domains.table(list(scores.values()))))

# %% [markdown]
# ## Stage 1: SFT on reasoning traces
# LoRA adapters trained on the traces of every domain, then merged into an export that stage 2
# starts from.

# %%
sft_pairs = [
    (data.format_prompt(t["prompt"], recipe.eval.system_prompt), t["response"] + data.END_OF_TURN)
    for t in train
]
path = pipeline.sft_stage(
    stages, "sft", sft_pairs, recipe, steps=recipe.sft_steps, base_path=base_path, mesh=mesh
)
if path:
    scores["sft"] = stages.evaluate(
        "sft", recipe.model_id, path, heldout, judge, recipe.eval, mesh=mesh
    )
display(Markdown(domains.table(list(scores.values()))))

# %% [markdown]
# ## Stage 2: self-improvement
# The SFT model answers `improve_prompts` new prompts `samples` times at temperature 1; the best
# answer of each, if the judge scores it at least `improve_threshold`, becomes SFT data for a short
# second round. The report says how many were kept; the next evaluation says what it scored.

# %%
sampled = dataclasses.replace(recipe.eval, temperature=1.0)
if path and not stages.done("improve"):
    fresh = domains.synthetic_tasks(recipe.improve_prompts, seed=2) if rt.smoke else None
    improve_tasks = [t.record() for t in fresh] if fresh else train[-recipe.improve_prompts :]
    sft_model = models.load_model(recipe.model_id, path=path, mesh=mesh, verbose=False)
    kept, improve_report = pipeline.self_improve(sft_model, improve_tasks, judge, sampled, samples=recipe.samples,
                                                 threshold=recipe.improve_threshold)  # fmt: skip
    path = pipeline.sft_stage(
        stages, "improve", kept, recipe, steps=recipe.improve_steps, base_path=base_path, mesh=mesh
    )
    if path:
        stages.finish("improve", path, **improve_report)
elif path:
    path = stages.state["improve"]["export"]
if path:
    scores["improve"] = stages.evaluate(
        "improve", recipe.model_id, path, heldout, judge, recipe.eval, mesh=mesh
    )
display(Markdown(domains.table(list(scores.values()))))

# %% [markdown]
# ## Stage 3: preference tuning
# The model answers `pair_prompts` prompts `samples` times; the judge's best and worst answers of a
# prompt become a pair when their scores differ enough. SimPO (the default) needs no reference model:
# its margin is between length-normalised log-probabilities (`pipeline.simpo_loss_fn`, a tunix loss).

# %%
if path and not stages.done("preference"):
    pair_tasks = (
        [t.record() for t in domains.synthetic_tasks(recipe.pair_prompts, seed=3)]
        if rt.smoke
        else train[: recipe.pair_prompts]
    )
    current = models.load_model(recipe.model_id, path=path, mesh=mesh, verbose=False)
    pairs = pipeline.judged_pairs(current, pair_tasks, judge, sampled, samples=recipe.samples)
    del current
    path = pipeline.preference_stage(
        stages, "preference", pairs, recipe, base_path=base_path, mesh=mesh
    )
elif path:
    path = stages.state["preference"]["export"]
if path:
    scores["preference"] = stages.evaluate(
        "preference", recipe.model_id, path, heldout, judge, recipe.eval, mesh=mesh
    )
display(Markdown(domains.table(list(scores.values()))))

# %% [markdown]
# ## Stage 4: GRPO with weighted rewards
# Each reward is scaled by its weight (`recipe.reward_weights`) under its own name, so each gets its
# own curve; the judge's time per step is reported below.

# %%
available = {"judge": judge, **{n: rewards.REWARDS[n] for n in ("structure", "length_limit", "repetition",
             "no_boilerplate", "relevance", "answer_match")}}  # fmt: skip
reward_fns = [judging.weighted(available[n], w, name=n) for n, w in recipe.reward_weights.items()]
records = [{"question": t["prompt"], "answer": t.get("answer", "")} for t in train]
if path:
    path = pipeline.grpo_stage(stages, "grpo", records, reward_fns, recipe, system_prompt=recipe.eval.system_prompt,
                               base_path=base_path, mesh=mesh)  # fmt: skip
if path:
    scores["grpo"] = stages.evaluate(
        "grpo", recipe.model_id, path, heldout, judge, recipe.eval, mesh=mesh
    )
print(f"judge: {judge.calls} answers graded, {sum(judge.seconds):.1f}s in all, "
      f"{sum(judge.seconds) / max(1, len(judge.seconds)):.3f}s per call")  # fmt: skip
series = {
    k: v
    for k, v in runlog.read_metrics(stages.dir("grpo") / "metrics.jsonl").get("train", {}).items()
}
fig = runlog.plot_metrics(runlog.read_metrics(stages.dir("grpo") / "metrics.jsonl"), out_dir / "grpo_rewards.png",
                          names=[f"reward/{n}" for n in recipe.reward_weights] + ["kl"], title="GRPO rewards")  # fmt: skip

# %% [markdown]
# ## Every stage, every domain

# %%
display(Markdown(domains.table(list(scores.values()))))
fig = domains.plot(
    list(scores.values()), out_dir / "domains.png", title="Judged score by domain and stage"
)

# %% [markdown]
# ## Export and upload
# The final model is the GRPO stage's export: `grpo/export/hf` (HF layout) and `grpo/export/orbax`
# (params, tunix config, tokenizer: what a Kaggle Model holds).

# %%
final = stages.dir("grpo") / "export" / "orbax"
unrestricted_kaggle_model = str(final)
if KAGGLE_MODEL and path:
    unrestricted_kaggle_model = session.upload_to_kaggle(
        final, KAGGLE_MODEL, notes="SFT, SimPO, GRPO pipeline"
    )
print(f"unrestricted_kaggle_model = {unrestricted_kaggle_model!r}")

# %%
summary = {
    "profile": rt.profile,
    "model_id": recipe.model_id,
    "stages": stages.state,
    "seconds": clock.elapsed(),
    "scores": {name: s.rows for name, s in scores.items()},
    "judge": {"graded": judge.calls, "seconds": sum(judge.seconds)},
    "unrestricted_kaggle_model": unrestricted_kaggle_model,
}
(out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
{name: round(s.rows["all"]["judged"], 3) for name, s in scores.items()}

# %% [markdown]
# ## Checks
# The smoke run must show each stage doing its job on held-out prompts: the format holds (at least
# 0.9), the judged score rises after SFT and again after GRPO, and math accuracy does not fall by
# more than noise (the 95% interval of the held-out math questions).

# %%
assert all(stages.done(n) for n in recipe.shares) or clock.hours, stages.summary()
if rt.smoke and all(stages.done(n) for n in recipe.shares):
    start, sft, pref, grpo = (scores[n].rows for n in ("start", "sft", "preference", "grpo"))
    assert grpo["all"]["format"] >= 0.9, grpo["all"]
    assert sft["all"]["judged"] > start["all"]["judged"] + start["all"]["judged_ci"], (
        start["all"],
        sft["all"],
    )
    assert grpo["all"]["judged"] > pref["all"]["judged"], (pref["all"], grpo["all"])
    noise = 1.96 * (0.25 / start["math"]["n"]) ** 0.5
    assert grpo["math"]["accuracy"] >= start["math"]["accuracy"] - noise, (
        start["math"],
        grpo["math"],
    )
print("pipeline OK")
