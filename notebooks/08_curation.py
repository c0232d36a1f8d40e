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
# # 08 · Curation across sessions: answer many prompts, keep the good answers, train on them next
#
# Training on clean data beats training on noisy data, and a 9-hour session cannot both answer
# tens of thousands of prompts and train on them. So session 1 (this notebook) answers a large
# prompt set, keeps each prompt's best answer that passes every filter, and writes
# `OUTPUT_DIR/curated/curated.jsonl`; session 2 (notebook 06) trains on it with
# `TRACES = ".../curated/curated.jsonl"`, read as it is.
#
# For each prompt the model samples `curate_samples` answers, and the prompt's own response in the
# data is one more candidate (`with_data`). Every candidate is judged (06's judge: a judge model in
# full, the synthetic tasks' rubric in smoke) and filtered, in this order (`tunixkit.curation`):
# finished (not cut by the generation limit), in the `<reasoning>`/`<answer>` format, an answer of
# `min_words` words at least, `max_tokens` tokens at most (the judges read answers under 1K tokens),
# repeating itself less than `max_repeat` (the share of repeated word 3-grams), and judged at least
# `min_score`. The best candidate that passes is the prompt's curated answer; a prompt with none is
# left out, counted by domain and by the filter its best candidate failed.
#
# The pass goes chunk by chunk: every finished prompt, with all its candidates, their scores and
# verdicts, is appended to `curated/candidates.jsonl`, and `curated.jsonl` is rewritten after each
# chunk. A session killed mid-pass keeps every chunk it finished; a rerun, or a new session with
# `RESUME_FROM` set to the last one's `OUTPUT_DIR` (on Kaggle its output attached as an input:
# `/kaggle/input/<notebook>/runs/08_curation`; a folder without `curated/candidates.jsonl` is an
# error, not a fresh start), goes on from the next prompt with the same settings. The session clock
# (and an `OUTPUT_DIR/STOP` file) stops the pass before a chunk that would not end in time. The
# candidates read back are filtered again with this run's thresholds, so a session with other
# thresholds (into a new `OUTPUT_DIR`, with `RESUME_FROM`) re-filters without sampling again.
# At full size expect several sessions: 10,000 prompts of 4 samples and the data's answer are
# 40,000 answers of up to 768 tokens and 50,000 judge calls; the progress bar gives the pace.
# The last session's `curated.jsonl` holds every session's kept answers: that is the file 06 reads
# (06 adds GSM8K's math on its own, as with any `TRACES`). Data answers without reasoning (the
# mix's dolly and MBPP rows: the answer alone) fail the format filter; there only the model's own
# answers can be kept.
#
# **What the filter buys** (`compare_steps` > 0, on in smoke): the start model is fine-tuned twice
# for the same number of steps, once on the curated rows and once on the same prompts' rows as the
# data has them, and both are judged on held-out prompts, paired prompt by prompt. In smoke half of
# the data's answers are well formed but empty (06's `good_share`), as real instruction data is
# uneven; the last cell asserts that SFT on the curated rows beats SFT on the uncurated ones.
#
# | | smoke (CPU, CI) | full (TPU) |
# |---|---|---|
# | model | `tiny-gemma3-sft` | `gemma-3-1b-it` (or `gemma-2-2b-it`, or `MODEL_PATH`) |
# | prompts | 480 synthetic tasks of six domains, 2 samples + the data's answer | 10,000 of your traces or the public mix, 4 samples + the data's answer |
# | judge | the synthetic tasks' rubric | `gemma-3-1b-it` with 06's rubric |
# | comparison | SFT 150 steps on each side | off (`COMPARE_STEPS` to turn it on) |
#
# Results: `OUTPUT_DIR/curated/curated.jsonl` (06's `TRACES`), `curated/candidates.jsonl` (every
# candidate), `curation.png`, `summary.json`, and with the comparison `compare/domains_*.jsonl`.

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
OUTPUT_DIR = "runs/08_curation"  # everything this notebook writes goes here
SESSION_HOURS = None  # the session's hard limit; None: 9 on Kaggle, 12 on Colab, none elsewhere
RESUME_FROM = None  # a previous session's OUTPUT_DIR (read-only is fine): its pass goes on here
START_FRESH = False  # True: move an OUTPUT_DIR made with other settings aside and start again
COMPILE_CACHE = None  # where compiled programs are kept; None: OUTPUT_DIR/jax_cache; False: off
MODEL_ID = None  # the model that answers; None: the profile's ("gemma-3-1b-it" in full)
MODEL_PATH = None  # a local HF-layout folder to answer with (e.g. 06's sft/export/hf)
JUDGE_ID = None  # the judge model; None: the profile's (the rubric grader in smoke)
TRACES = None  # full: the prompts (.jsonl/.json/.csv/.parquet file or HF id); None: the public mix
DOMAIN_FIELD = "domain"  # the traces' domain column; a row without one is classified by keywords
TRACE_FIELDS = ("prompt", "response")  # the prompt/response columns, if not chat messages
MIX_PATHS = None  # local copies of the mix's data sets, {"allenai/qasc": ".../train.parquet"}
MIX_NONCOMMERCIAL = False  # True: the mix may also use non-commercial data sets (SciQ, CC BY-NC)
GSM8K_PATH = None  # full: a local copy of GSM8K (a file, or the openai/gsm8k folder)
CURATE_PROMPTS = None  # prompts answered, balanced by domain; None: the profile's
SAMPLES = None  # answers sampled per prompt; None: the profile's
MIN_SCORE = None  # judged score (0..1) a kept answer reaches; None: the profile's
MAX_TOKENS = None  # tokens a kept answer has at most; None: the profile's (1,000)
MAX_REPEAT = None  # share of repeated word 3-grams a kept answer has at most; None: 0.3
COMPARE_STEPS = None  # SFT steps of each side of the comparison (0: none); None: the profile's
RECIPE_OVERRIDES = {}  # any other recipe field by name, e.g. {"eval.batch_size": 8}

# %%
import json

from IPython.display import Markdown, display

from tunixkit import (
    curation,
    domains,
    evaluation,
    models,
    pipeline,
    prompting,
    recipes,
    runlog,
    runtime,
)

rt, recipe, out_dir, clock = recipes.start_notebook(recipes.Curation, globals())
recipe

# %% [markdown]
# ## Prompts
# 06's tasks (in smoke made offline; in full your traces, or the public mix, plus GSM8K): the last
# `heldout_per_domain` distinct prompts of each domain are held out for the comparison's
# evaluations and never curated; `curate_prompts` of the rest, balanced by domain, are answered.

# %%
# full: TRACES (TRACE_FIELDS, DOMAIN_FIELD), else the mix (MIX_PATHS, MIX_NONCOMMERCIAL); GSM8K_PATH
tasks = recipes.pipeline_tasks(rt, recipe, out_dir / "data", globals())  # smoke: made offline
heldout, train = domains.split_heldout(tasks.records, recipe.heldout_per_domain)
train = tasks.uneven(train, recipe.good_share)  # smoke: uneven answers, as real data (06's)
to_curate = domains.balanced(train, min(len(train), recipe.curate_prompts))
print(f"{len(to_curate)} prompts to curate by domain: {domains.by_domain(to_curate)}")
print(f"{len(heldout)} held-out prompts")

# %% [markdown]
# ## The judge
# 06's judge: a judge model's expected score against a rubric with each domain's criteria (in
# smoke, the synthetic tasks' rubric), calibrated on the held-out prompts first: a domain where the
# reference answers do not score clearly above another prompt's reference, or above themselves
# without tags, is named, and handled as `judge_check` says.

# %%
mesh = runtime.make_mesh()
# the judge model, grading each question by its domain's criteria; smoke: the tasks' rubric
judge = pipeline.make_judge(recipe.judge_id, tasks.records, tasks.grader, mesh=mesh)
calibration = domains.calibrate(judge, heldout)
display(Markdown(domains.calibration_table(calibration)))
domains.act_on_calibration(calibration, judge, tasks.records, recipe.judge_check)

# %% [markdown]
# ## The pass
# Sampled at GRPO's temperature with the evaluations' system prompt and generation limit. A
# progress bar counts prompts; the table gives per domain the prompts kept and the mean judged
# score of the kept answers and of the dropped candidates, then why the prompts left out were,
# where the kept answers came from, and on math (checked against its reference, which the judge
# never sees) the accuracy of kept and of dropped answers.

# %%
sampling = recipe.grpo.sampled(recipe.eval)
policy = models.load_model(recipe.model_id, path=MODEL_PATH, mesh=mesh)
with clock.timed("curation", items=len(to_curate)):
    done = curation.curate(
        policy,
        to_curate,
        judge,
        sampling,
        out_dir / "curated",
        samples=recipe.curate_samples,
        filters=recipe.filters,
        model=str(MODEL_PATH or recipe.model_id),
        judged_by=recipe.judge_id or "the smoke rubric",
        with_data=recipe.with_data,
        # the pass may take the session, less the comparison's share when there is one
        clock=clock.part(0.6 if recipe.compare_steps else 1.0),
        earlier=RESUME_FROM and f"{RESUME_FROM}/curated",
    )
del policy
kept = curation.report(done)
display(Markdown(curation.table(kept)))
fig = curation.plot(done, out_dir / "curation.png", title=f"Curation, {recipe.model_id}")

# %% [markdown]
# `curated.jsonl` is 06's `TRACES` as it is: read here through the same loader 06 uses.

# %%
curated_file = out_dir / "curated" / "curated.jsonl"
curated = domains.load_traces(str(curated_file)) if kept["domains"]["all"]["kept"] else []
print(f"{len(curated)} curated traces: TRACES = {str(curated_file)!r} in notebook 06")
if curated:
    print(json.dumps(json.loads(curated_file.read_text().splitlines()[0]), indent=1)[:800])

# %% [markdown]
# ## What the filter buys
# The start model fine-tuned for `compare_steps` steps on the curated rows, and as long on the same
# prompts' rows as the data has them (06's stage-1 settings: `sft_learning_rate`, `batch_size`,
# `max_len`, LoRA of `sft_lora_rank` or every weight), each judged on the held-out prompts; the
# change from uncurated to curated is paired prompt by prompt (95% interval).

# %%
names = ["start", "uncurated", "curated"]
evals, changes = {}, {}
family = models.get_spec(recipe.model_id).family
# the same prompts' rows as the data has them (the i-th prompt curated is the i-th row: a prompt
# can stand in several rows, with other answers)
uncurated = [
    {"domain": r["domain"], "prompt": r["prompt"], "response": r["response"]}
    for r in to_curate[: len(done)]
]
compare = pipeline.Stages(out_dir / "compare", {}, clock, mesh=mesh)  # evaluations side by side
compare.out_dir.mkdir(parents=True, exist_ok=True)
evaluate = compare.evaluator(recipe, heldout, judge)

if recipe.compare_steps and curated:
    evals["start"] = evaluate("start", MODEL_PATH)
    for name, rows in (("uncurated", uncurated), ("curated", curated)):  # compare/<name>/sft
        side = pipeline.Stages(
            compare.out_dir / name, {"sft": 1.0}, clock, base_path=MODEL_PATH, mesh=mesh
        )
        pairs = prompting.sft_pairs(rows, recipe.eval.system_prompt, family=family)
        export = pipeline.sft_stage(
            side, "sft", pairs, recipe, steps=recipe.compare_steps, judged=False
        )
        if export:
            evals[name] = evaluate(name, export)
    display(Markdown(domains.table(list(evals.values()))))
    if {"uncurated", "curated"} <= set(evals):
        changes = domains.stage_changes(out_dir / "compare", ["uncurated", "curated"])
        display(Markdown(domains.changes_table(changes)))
        fig = domains.plot(list(evals.values()), out_dir / "compare.png")
elif not curated:
    print("no prompt was kept: nothing to compare (see the table above)")
else:
    print("COMPARE_STEPS = 0: no comparison (the session went to the pass)")

# %% [markdown]
# ## Checks
# What must hold is asserted: every prompt was curated (or the session clock or a STOP file stopped
# the pass), and the curated file loads as 06's traces. What curation should show is asserted in a
# whole smoke run: SFT on curated rows beats SFT on the uncurated ones (the paired interval's low end
# above 0; it fails with training switched off) and the pass kept prompts. Elsewhere it is warned
# about. The figures go to `OUTPUT_DIR/checks.json`, the rest to `summary.json`.

# %%
checks = evaluation.Checks.for_run(rt, recipe)
figures = {"kept_share": kept["domains"]["all"]["kept_share"]}
if changes:
    gain, ci, _ = changes["uncurated->curated"]["judged"]["all"]
    figures |= {"curated_vs_uncurated": gain, "curated_vs_uncurated_low": gain - ci}
if len(done) == len(to_curate) and (changes or not recipe.compare_steps):  # the whole run ran
    checks.bars([b for b in recipe.BARS if b.figure in figures], figures, out_dir / "checks.json")
checks.must(
    len(done) == len(to_curate) or clock.hours or clock.stop_file.is_file(),
    f"the pass stopped after {len(done)} of {len(to_curate)} prompts without a session limit "
    "or a STOP file",
)
checks.must(
    len(curated) == kept["domains"]["all"]["kept"],
    f"{curated_file} holds {len(curated)} traces for 06, the pass kept {kept['domains']['all']['kept']}",
)
summary = {
    "profile": rt.profile,
    "model": str(MODEL_PATH or recipe.model_id),
    "judge": recipe.judge_id,
    "prompts": len(to_curate),
    "done": len(done),
    "curated_file": str(curated_file),
    "curation": kept,
    "evaluations": {k: v.summary() for k, v in evals.items()},
    "changes": changes,
    "checks": figures,
    "seconds": clock.elapsed(),
}
runlog.write_summary(out_dir, summary)
checks.done("curation")
