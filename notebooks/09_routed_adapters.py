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
# # 09 · Adapters routed by domain, against one adapter and against the adapters merged
#
# One small model struggles to master math and poetry at once, so competitors train specialised
# LoRA adapters from one base (a math adapter, a writing adapter) and pick one per prompt by its
# domain. This notebook measures whether that is worth it, on held-out prompts of every domain:
#
# 1. **The router**: keyword rules by domain (`domains.classify`), and a small classifier learned
#    from the training prompts (`routing.Router`); each one's accuracy on the held-out prompts of
#    every domain, where its mistakes go, and its time. The learned one routes.
# 2. **The adapters**: one LoRA adapter per group of domains (`routes`), `adapter_steps` SFT steps
#    each on its own domains' rows, all from the same base and the same starting adapter weights, on
#    one LoRA module: the base is loaded once, and an adapter is swapped in by writing its weights
#    into the module (`routing.Swapper`, each swap timed). Against them, **one adapter** trained on
#    every row for as many steps as the routed ones together.
# 3. **The merged alternative**: the competition judges **a single checkpoint**, which cannot route.
#    `routing.merge` writes the weighted sum of the adapters' updates (`merge_weights`; by default
#    their mean) into one LoRA of their summed rank, exported like any model (`merged/export`).
#
# Each is judged (06's judge) on the same held-out prompts, greedy and sampled, and compared prompt
# by prompt (paired 95% intervals): routed against the base (the learning check), routed and merged
# against the one adapter (the decision, reported).
#
# | | smoke (CPU, CI) | full (TPU) |
# |---|---|---|
# | base | `tiny-gemma3-sft` after a warm start of `warm_steps` SFT steps on every domain (it has only seen arithmetic) | `gemma-3-1b-it` (or `MODEL_PATH`, e.g. 06's `sft/export/hf`) |
# | adapters | math; writing (the five other domains); LoRA rank 16, 100 steps each | the same, rank 64, 400 steps each |
#
# Results: `OUTPUT_DIR/summary.json`, `compare/domains_*.jsonl`, `routed.png`, `merged/export`.

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
OUTPUT_DIR = "runs/09_routed_adapters"  # everything this notebook writes goes here
SESSION_HOURS = None  # the session's hard limit; None: 9 on Kaggle, 12 on Colab, none elsewhere
START_FRESH = False  # True: move an OUTPUT_DIR made with other settings aside and start again
COMPILE_CACHE = None  # where compiled programs are kept; None: OUTPUT_DIR/jax_cache; False: off
MODEL_ID = None  # the base; None: the profile's ("gemma-3-1b-it" in full)
MODEL_PATH = None  # a local HF-layout folder to start from (e.g. 06's sft/export/hf)
JUDGE_ID = None  # the judge model; None: the profile's (the rubric grader in smoke)
TRACES = None  # full: the training rows (a .jsonl/.json/.csv/.parquet file or HF id); None: the mix
DOMAIN_FIELD = "domain"  # the traces' domain column; a row without one is classified by keywords
TRACE_FIELDS = ("prompt", "response")  # the prompt/response columns, if not chat messages
MIX_PATHS = None  # local copies of the mix's data sets, {"allenai/qasc": ".../train.parquet"}
GSM8K_PATH = None  # full: a local copy of GSM8K (a file, or the openai/gsm8k folder)
ROUTES = None  # {"adapter": ["domain", ...]}; None: the profile's (math; writing: the rest)
ADAPTER_STEPS = None  # SFT steps of each routed adapter; None: the profile's
WARM_STEPS = None  # SFT steps on every row before the adapters (0: none); None: the profile's
MERGE_WEIGHTS = None  # {"adapter": weight} in the merged checkpoint; None: the mean
EXPORT_MERGED = True  # write the merged checkpoint (merged/export/hf and orbax)
RECIPE_OVERRIDES = {}  # any other recipe field by name, e.g. {"eval.batch_size": 8}

# %%
import dataclasses

from IPython.display import Markdown, display

from tunixkit import (
    domains,
    evaluation,
    models,
    pipeline,
    prompting,
    recipes,
    routing,
    runlog,
    runtime,
)

rt, recipe, out_dir, clock = recipes.start_notebook(recipes.Routed, globals())
recipe

# %% [markdown]
# ## Prompts, and the router
# 06's tasks; the last `heldout_per_domain` distinct prompts of each domain are held out and never
# trained on. A router reads only the prompt: its accuracy per domain on the held-out prompts is the
# share sent to the adapter of the prompt's true domain. Two are measured: keyword rules
# (`routing.route`), and a small learned router (`routing.Router`: naive Bayes over the words and
# word pairs of the training prompts, whose domains are known); the learned one routes below.

# %%
# full: TRACES (TRACE_FIELDS, DOMAIN_FIELD), else the mix (MIX_PATHS); GSM8K_PATH: a local copy
tasks = recipes.pipeline_tasks(rt, recipe, out_dir / "data", globals())  # smoke: made offline
heldout, train = domains.split_heldout(tasks.records, recipe.heldout_per_domain)
routes = {name: list(ds) for name, ds in recipe.routes.items()}
unrouted = sorted({r["domain"] for r in tasks.records} - {d for ds in routes.values() for d in ds})
if unrouted:  # e.g. "general", the traces' rows no keyword classified
    last = list(routes)[-1]
    routes[last] += unrouted
    print(f"domains in no route go to the last adapter, {last}: {unrouted}")
learned = routing.Router.fit(train, routes)  # naive Bayes over the training prompts' words
routers = {
    "keywords": routing.router_accuracy(heldout, routes, lambda p: routing.route(p, routes)),
    "learned": routing.router_accuracy(heldout, routes, learned),
}
router = routers["learned"]  # the one used below
display(
    Markdown(
        "| domain | prompts | keywords: routed right | sent elsewhere | learned: routed right "
        "| sent elsewhere |\n|---|---|---|---|---|---|\n"
        + "\n".join(
            f"| {d} | {r['n']} | {r['accuracy']:.0%} | {r['sent_to'] or '-'} | "
            f"{routers['learned'][d]['accuracy']:.0%} | {routers['learned'][d]['sent_to'] or '-'} |"
            for d, r in routers["keywords"].items()
            if d != "seconds_per_prompt"
        )
    )
)
print(
    f"routing takes {routers['keywords']['seconds_per_prompt'] * 1e6:.0f} µs a prompt by keywords, "
    f"{router['seconds_per_prompt'] * 1e6:.0f} µs learned"
)

# %% [markdown]
# ## The base
# In smoke the tiny model has only seen arithmetic, and adapters cannot teach it the other domains'
# words (their embeddings are untrained), so the base first gets `warm_steps` SFT steps of every
# weight on every domain's rows (06's stage-1 settings); in full the adapters start from the model.

# %%
mesh = runtime.make_mesh()
judge = pipeline.make_judge(recipe.judge_id, tasks.records, tasks.grader, mesh=mesh)
family = models.get_spec(recipe.model_id).family


def pairs(rows):
    return prompting.sft_pairs(rows, recipe.eval.system_prompt, family=family)


base_path = MODEL_PATH
if recipe.warm_steps:
    warm = pipeline.Stages(out_dir / "warm", {"sft": 1.0}, clock, base_path=MODEL_PATH, mesh=mesh)
    base_path = pipeline.sft_stage(
        warm, "sft", pairs(train), recipe, steps=recipe.warm_steps, judged=False
    )
base = models.load_model(recipe.model_id, path=base_path, mesh=mesh)

# %% [markdown]
# ## The adapters
# Each routed adapter trains on its own domains' rows; the one adapter on every row, for as many
# steps as the routed ones together. The same LoRA rank (`lora_rank`), alpha and learning rate
# (`adapter_learning_rate`) for all.

# %%
sets = {name: pairs([r for r in train if r["domain"] in ds]) for name, ds in routes.items()}
empty = [name for name, rows in sets.items() if not rows]
if empty:
    raise ValueError(f"no training row in the domains of {empty}: ROUTES {routes}")
sets["one adapter"] = pairs(train)
steps = {name: recipe.adapter_steps for name in routes}
steps["one adapter"] = recipe.adapter_steps * len(routes)
print({name: f"{len(rows)} rows, {steps[name]} steps" for name, rows in sets.items()})
lora, adapters, runs = routing.train_adapters(
    base,
    sets,
    out_dir / "adapters",
    rank=recipe.lora_rank,
    alpha=recipe.lora_alpha,
    steps=steps,
    learning_rate=recipe.adapter_learning_rate,
    batch_size=recipe.batch_size,
    max_len=recipe.max_len,
    mesh=mesh,
    clock=clock,
)

# %% [markdown]
# ## Judged on the held-out prompts
# The base, the one adapter, the routed adapters (each prompt answered by its routed adapter: the
# prompts are grouped by adapter, one swap a group) and the merged checkpoint; greedy and
# `eval_samples` sampled answers per prompt. Then the paired changes: the one adapter and the routed
# adapters against the base, routed and merged against the one adapter.

# %%
sampling = recipe.grpo.sampled(recipe.eval)
compare = out_dir / "compare"
compare.mkdir(parents=True, exist_ok=True)
swap = routing.Swapper(lora, adapters)
weights = recipe.merge_weights or {name: 1 / len(routes) for name in routes}  # the mean update
merged = routing.merge(
    base,
    {name: adapters[name] for name in routes},
    weights,
    rank=recipe.lora_rank,
    alpha=recipe.lora_alpha,
    mesh=mesh,
)


def evaluate(name, model, **routed):
    return domains.evaluate(
        dataclasses.replace(base, model=model),
        heldout,
        judge,
        name=name,
        config=recipe.eval,
        output_dir=compare,
        samples=recipe.eval_samples,
        sampling=sampling,
        **routed,
    )


evals = {"base": evaluate("base", base.model)}
swap("one adapter")
evals["one adapter"] = evaluate("one adapter", lora)
evals["routed"] = evaluate("routed", lora, route=lambda t: learned(t["prompt"]), use=swap)
evals["merged"] = evaluate("merged", merged)
display(Markdown(domains.table(list(evals.values()))))
changes = domains.stage_changes(
    compare,
    list(evals),
    against={"one adapter": "base", "routed": "one adapter", "merged": "one adapter"},
)
changes |= domains.stage_changes(compare, ["base", "routed"])
display(Markdown(domains.changes_table(changes)))
fig = domains.plot(list(evals.values()), out_dir / "routed.png", title="Judged score by domain")
swaps = swap.seconds[1:]  # the routed evaluation's swaps (the first put the one adapter in)
print(
    f"a swap took {1e3 * sum(swaps) / len(swaps):.1f} ms ({len(swaps)} swaps, one per adapter a "
    f"pass); routing {router['seconds_per_prompt'] * 1e6:.0f} µs a prompt"
)

# %% [markdown]
# ## The merged checkpoint
# What the competition can take: one checkpoint, exported in the HF layout and as Orbax like any
# other model (`merged/export`).

# %%
if EXPORT_MERGED:
    exports = models.export(
        merged,
        base,
        out_dir / "merged" / "export",
        lora_rank=len(routes) * recipe.lora_rank,
        lora_alpha=len(routes) * recipe.lora_alpha,
        mesh=mesh,
    )
    print(f"merged checkpoint: {exports['hf']}")

# %% [markdown]
# ## Checks
# What must hold is asserted: every adapter trained its steps (or the session clock stopped it),
# and every held-out prompt was answered in each evaluation. What routing should show is asserted
# in a whole smoke run: the routed adapters beat the base (the paired interval's low end above 0;
# it fails with training switched off) and the router sends held-out prompts right. Whether routing
# beats one adapter, and whether merging keeps it, is reported (`summary.json`), not asserted.

# %%
checks = evaluation.Checks.for_run(rt, recipe)
gain, ci, _ = changes["base->routed"]["judged"]["all"]
figures = {
    "routed_vs_base": gain,
    "routed_vs_base_low": gain - ci,
    "router_accuracy": router["all"]["accuracy"],
}
for name in ("routed", "merged"):
    gain, ci, _ = changes[f"one adapter->{name}"]["judged"]["all"]
    figures[f"{name}_vs_one_adapter"] = gain
    figures[f"{name}_vs_one_adapter_ci"] = ci
checks.bars(recipe.BARS, figures, out_dir / "checks.json")
for name, run in runs.items():
    checks.must(
        run.steps == steps[name] or run.stopped in ("session clock", "stop requested"),
        f"adapter {name}: {run.steps} of {steps[name]} steps ({run.stopped})",
    )
checks.must(
    all(e.rows["all"]["n"] == len(heldout) for e in evals.values()),
    f"an evaluation left held-out prompts out: {[e.rows['all']['n'] for e in evals.values()]}",
)
summary = {
    "profile": rt.profile,
    "model": str(base_path or recipe.model_id),
    "routes": routes,
    "router": router,
    "steps": {name: run.steps for name, run in runs.items()},
    "evaluations": {k: v.summary() for k, v in evals.items()},
    "changes": changes,
    "swap_seconds": swaps,
    "checks": figures,
    "seconds": clock.elapsed(),
}
runlog.write_summary(out_dir, summary)
checks.done("routed adapters")
