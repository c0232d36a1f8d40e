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
# # 00 · Quickstart: load a Gemma model with Tunix and let it answer
#
# This notebook checks that your runtime works end to end: it picks a **profile**, loads the
# profile's model and tokenizer onto a device mesh, and answers a few GSM8K questions with the
# Gemma chat template, stopping at `<end_of_turn>`.
#
# - `smoke` (automatic on CPU): a tiny Gemma3 that tunixkit trains and caches once (about a
#   minute), offline.
# - `full` (automatic on TPU/GPU): `gemma-3-1b-it` from Kaggle or Hugging Face. Add the secret
#   `HF_TOKEN` (Hugging Face) or run on Kaggle with the Gemma licence accepted.
#
# Results go to `OUTPUT_DIR/summary.json`.

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
OUTPUT_DIR = "runs/00_quickstart"  # everything this notebook writes goes here
SOURCE = "auto"  # full: "auto" (Kaggle on Kaggle, else Hugging Face), "hf", "kaggle", "local"
MODEL_PATH = None  # SOURCE "local": a folder with config.json, *.safetensors, tokenizer.model
MODEL_ID = None  # None: the profile's model; or any tunixkit.models.MODELS id, e.g. "qwen3-0.6b",
# "smollm2-135m-instruct" (a real Llama-architecture model on any machine, no hub)
GSM8K_PATH = None  # full: a local GSM8K (a file, or the openai/gsm8k folder); None: download

# %%
import time

from tunixkit import evaluation, models, recipes, runlog, runtime

rt, recipe, out_dir, clock = recipes.start_notebook(recipes.Quickstart, globals())
recipe

# %% [markdown]
# ## Model and tokenizer
# One call for every profile and source. The mesh spans all devices over `("fsdp", "tp")`.

# %%
mesh = runtime.make_mesh()
t0 = time.perf_counter()
loaded = models.load_model(recipe.model_id, source=SOURCE, path=MODEL_PATH, mesh=mesh)
load_seconds = time.perf_counter() - t0
print(f"mesh {dict(mesh.shape)}; stop tokens {loaded.eos_ids}; loaded in {load_seconds:.1f}s")

# %% [markdown]
# ## A few questions

# %%
questions = recipes.gsm8k(
    rt, "test", data_dir=out_dir / "data", path=GSM8K_PATH, limit=recipe.num_questions
)
sampler = evaluation.make_sampler(
    loaded, recipe.eval.max_prompt_length + recipe.eval.max_generation_steps
)
timings = []
for _ in range(2):  # the first call compiles; the second shows the steady speed
    t0 = time.perf_counter()
    result = evaluation.evaluate(
        loaded,
        questions,
        name=recipe.model_id,
        config=recipe.eval,
        output_dir=out_dir,
        sampler=sampler,
        progress=False,
    )
    timings.append(time.perf_counter() - t0)
for p in result.predictions:
    print(
        f"Q: {p['question']}\nA: {p['completion']!r}\n   gold {p['gold']} -> {p['category']}, "
        f"{p['num_tokens']} tokens\n"
    )
print(f"first call {timings[0]:.1f}s (compiles), second call {timings[1]:.2f}s")

# %%
stopped = sum(p["category"] != "truncated" for p in result.predictions)
summary = {
    "profile": rt.profile,
    "model_id": recipe.model_id,
    "backend": rt.backend,
    "devices": rt.device_count,
    "load_seconds": load_seconds,
    "generate_seconds_first": timings[0],
    "generate_seconds_second": timings[1],
    "questions": len(result.predictions),
    "stopped_at_end_of_turn": stopped,
    "accuracy": result.accuracy,
    "format_rate": result.format_rate,
    "mean_tokens": result.mean_tokens,
}
runlog.write_summary(out_dir, summary)
summary

# %% [markdown]
# ## Checks
# The model answered every question, most answers stopped at the end of its turn (Gemma's
# `<end_of_turn>`, not at the token limit), and the smoke model, trained on this format, answers in it.

# %%
assert len(result.predictions) == recipe.num_questions
assert all(p["completion"].strip() for p in result.predictions), "an empty answer"
end = loaded.chat.end_of_turn
assert stopped >= len(result.predictions) / 2, f"only {stopped} answers stopped at {end}"
stops = {loaded.tokenizer.eos_id(), loaded.tokenizer.token_id(end)}  # one id where EOS ends a turn
assert stops <= set(loaded.eos_ids), f"expected EOS and {end} as stop tokens, got {loaded.eos_ids}"
checks = evaluation.Checks.for_run(rt, recipe)  # the smoke model was trained on the format
checks.should(result.format_rate >= 0.75, f"format followed in {result.format_rate:.2f} of answers")
checks.done("quickstart")
