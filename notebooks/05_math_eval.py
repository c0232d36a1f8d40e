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
# # 05 · Math evaluation: GSM8K, MATH-500 and MATH accuracy with confidence intervals, several models side by side
#
# Greedy generation that stops at `<end_of_turn>`, prompts sorted by length into fixed-shape batches,
# and answer checking that reads `<answer>` tags, `\boxed{}`, "The answer is", `####` and the last
# number (commas, currency, percent, fractions; see `docs/answer_checking.md` for how it compares
# with math-verify and lm-eval).
#
# - **accuracy**: exact `<reasoning>`/`<answer>` format *and* the right number (95% Wilson interval);
# - **partial**: the right number found anywhere; **format**: share with the exact format;
# - error categories: wrong number, broken format, no answer, truncated (hit the token limit).
#
# The full profile scores the whole GSM8K test set (1,319 questions): about +/-2.7 points at 60%,
# where the 64-100 questions of the upstream notebooks give +/-10.
#
# **MATH-500 and MATH** (`BENCHMARKS`; the full profile adds MATH-500, the 500 problems of MATH's
# test set that OpenAI's PRM800K kept): answers in LaTeX (fractions, radicals, intervals, sets,
# text), read from `<answer>` or `\boxed{}` and checked by math-verify, with accuracy per subject
# and per difficulty level. `MATH500_PATH` / `MATH_PATH`: a local copy in the hub's layout.
#
# Models: `MODELS` maps a display name to a model id from `tunixkit.models.MODELS`, or to a local
# Hugging Face-layout folder (a merged export such as `runs/02_grpo_gsm8k/export/hf`).

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
OUTPUT_DIR = "runs/05_math_eval"  # everything this notebook writes goes here
SOURCE = "auto"  # where model ids are downloaded from: "auto", "hf", "kaggle"
DATA_SOURCE = "hf"  # full profile: "hf", "tfds" or "kaggle" (GSM8K test split)
GSM8K_PATH = None  # full: a local GSM8K (a file, or the openai/gsm8k folder); None: download
MODELS = None  # {"name": model id or folder}; None: the profile's default pair
LIMIT = None  # evaluate only the first LIMIT questions of each benchmark (None: all)
BENCHMARKS = None  # beside GSM8K: ["math500", "math"] (LaTeX answers); None: the profile's
MATH500_PATH = None  # full: a local copy of HuggingFaceH4/MATH-500 (folder or file); None: download
MATH_PATH = None  # full: a local copy of EleutherAI/hendrycks_math (folder or file); None: download

# %%
import dataclasses
import pathlib

from IPython.display import Markdown, display

from tunixkit import evaluation, models, prompting, recipes, runlog, runtime

rt, recipe, out_dir, clock = recipes.start_notebook(recipes.MathEval, globals())
# A folder that does not exist here (another notebook's output, not attached to this session) is
# skipped and named; model ids are downloaded.
to_evaluate = {
    n: ref
    for n, ref in (MODELS or recipe.models).items()
    if ref in models.MODELS or pathlib.Path(ref).is_dir()
}
for name in (MODELS or recipe.models).keys() - to_evaluate.keys():
    print(
        f"skipped {name}: {(MODELS or recipe.models)[name]} is neither a model id nor a folder here "
        "(attach that notebook's output and point MODELS at its export/hf)"
    )
recipe

# %%
questions = recipes.gsm8k(
    rt, "test", data_dir=out_dir / "data", source=DATA_SOURCE, path=GSM8K_PATH, limit=LIMIT
)
paths = {"math500": MATH500_PATH, "math": MATH_PATH}
problems = {  # MATH-style: problem, LaTeX answer, subject, level
    b: recipes.math_benchmark(rt, b, data_dir=out_dir / "data", path=paths.get(b), limit=LIMIT)
    for b in recipe.benchmarks
}
print(f"GSM8K: {len(questions)} questions", *(f"{b}: {len(p)}" for b, p in problems.items()))

# %% [markdown]
# ## Evaluate each model
# One model in memory at a time, on GSM8K and then each MATH-style benchmark (asked for its answer
# in LaTeX, `prompting.LATEX_MATH_SYSTEM_PROMPT`, and checked by math-verify: `\frac{1}{2}` is
# 0.5, `2\sqrt{3}` is `\sqrt{12}`, a set in any order; an answer that hedges between candidates
# is wrong). Predictions go to `OUTPUT_DIR/predictions_<name>.jsonl` (GSM8K) and
# `predictions_<benchmark>_<name>.jsonl`.

# %%
mesh = runtime.make_mesh()
results = []  # GSM8K
math_results = {bench: [] for bench in problems}
latex_eval = dataclasses.replace(recipe.eval, system_prompt=prompting.LATEX_MATH_SYSTEM_PROMPT)
for name, ref in to_evaluate.items():
    loaded = models.load_model(
        **models.load_args(ref, base_id=recipe.base_id, source=SOURCE), mesh=mesh
    )
    result = evaluation.evaluate(
        loaded, questions, name=name, config=recipe.eval, output_dir=out_dir
    )
    print(f"{name}: accuracy {result.accuracy:.3f} ({result.ci_low:.3f}-{result.ci_high:.3f})")
    results.append(result)
    for bench, rows in problems.items():
        found = evaluation.evaluate(
            loaded, rows, name=f"{bench}_{name}", config=latex_eval, output_dir=out_dir, latex=True
        )
        found.name = name  # the model's name in the tables
        math_results[bench].append(found)
        print(f"{name} on {bench}: accuracy {found.accuracy:.3f}")
    del loaded

# %% [markdown]
# ## Comparison

# %%
display(Markdown(evaluation.comparison_table(results)))
fig = evaluation.plot_comparison(results, out_dir / "comparison.png", title="GSM8K test")

# %% [markdown]
# Is a difference real or chance? Each model against the first one, question by question: how many
# questions only one of the two got right, and McNemar's exact test on those (p < 0.05: unlikely
# to be chance).

# %%
pairs = [evaluation.paired(results[0], r) for r in results[1:]]
display(
    Markdown(
        "| vs "
        + results[0].name
        + " | accuracy difference | only the first right | only this one right | p |\n"
        "|---|---|---|---|---|\n"
        + "\n".join(
            f"| {c.b} | {c.difference:+.3f} | {c.only_a} | {c.only_b} | {c.p_value:.3g} |"
            for c in pairs
        )
    )
)

# %% [markdown]
# ## Worst errors of the last model, one per category

# %%
for p in evaluation.worst_errors(results[-1], k=4):
    print(f"[{p['category']}] gold {p['gold']}, extracted {p['extracted']}")
    print(f"Q: {p['question']}\nA: {p['completion']}\n")

# %% [markdown]
# ## MATH-500 and MATH
# Per benchmark: each model's accuracy (95% interval), format and error categories, the paired
# test against the first model, then accuracy by subject and by difficulty level (1-5).

# %%
for bench, found in math_results.items():
    display(Markdown(f"### {bench}\n\n" + evaluation.comparison_table(found)))
    for c in [evaluation.paired(found[0], r) for r in found[1:]]:
        print(f"{bench}: {c.b} vs {c.a}: {c.difference:+.3f}, McNemar p = {c.p_value:.3g}")
    display(Markdown(evaluation.group_table(found, "subject")))
    display(Markdown(evaluation.group_table(found, "level")))
    fig = evaluation.plot_comparison(found, out_dir / f"comparison_{bench}.png", title=bench)

# %%
summary = {
    "profile": rt.profile,
    "questions": len(questions),
    "models": {r.name: r.summary() for r in results},
    "paired": {c.b: dataclasses.asdict(c) for c in pairs},
    "benchmarks": {  # MATH-style, beside GSM8K
        bench: {
            "problems": len(problems[bench]),
            "models": {r.name: r.summary() for r in found},
            "paired": {
                r.name: dataclasses.asdict(evaluation.paired(found[0], r)) for r in found[1:]
            },
        }
        for bench, found in math_results.items()
    },
}
runlog.write_summary(out_dir, summary)
(out_dir / "comparison.md").write_text(evaluation.comparison_table(results) + "\n")
{name: round(m["accuracy"], 3) for name, m in summary["models"].items()}

# %% [markdown]
# ## Checks
# What the comparison must show in smoke: the warm-started model beats the random one on these
# questions beyond chance (McNemar p < 0.01), answers in the format the random one never produces,
# and the random one's errors are format errors while the tuned one's are wrong numbers.

# %%
checks = evaluation.Checks.for_run(rt, recipe)
checks.must(results, "no model was evaluated (see the skipped ones above)")
if rt.smoke:  # the random tiny model knows nothing; its SFT warm start has partial skill
    base, tuned = results[0], results[-1]
    gap = evaluation.paired(base, tuned)
    checks.should(gap.difference > 0 and gap.p_value < 0.01, gap)
    checks.should(
        tuned.format_rate >= 0.9 > base.format_rate, (base.format_rate, tuned.format_rate)
    )
    checks.should(
        max(base.categories, key=base.categories.get)
        in ("broken_format", "no_answer", "truncated"),
        base.categories,
    )
    checks.should(
        tuned.categories["wrong_number"] > tuned.categories["broken_format"], tuned.categories
    )
checks.done("math eval")
