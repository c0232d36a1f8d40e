"""The no-learning control: every training notebook's smoke preset run twice, as it is and with
training switched off (every learning rate of its recipe 0, through ``RECIPE_OVERRIDES``: the same
steps, data, evaluations and checks, no weight moves), through the notebooks themselves (papermill,
the smoke profile, CPU with 2 emulated devices, offline: what CI's nbval runs).

Each run's last cell writes ``checks.json`` (the figures it measured and what each of the recipe's
bars gave). They are merged into ``bench/results/no_learning.json``; ``tests/test_no_learning.py``
feeds the recorded figures to the recipes' bars as they are now: every learning bar must fail on the
untrained figures and every bar hold on the trained ones.

    python scripts/no_learning.py               # every notebook, both ways (~40 min on 2 cores)
    python scripts/no_learning.py 02 03         # some notebooks
    python scripts/no_learning.py 02-math       # a variant: 02 with DATASET = "math" (VARIANTS)
    python scripts/no_learning.py --write       # the table in docs/tuning.md#no-learning
    python scripts/no_learning.py --again       # the trained runs repeated on another kind of
                                                # machine (kept beside the first, by CPU)

Runs go to ``notebooks/runs/no_learning/<notebook>-<trained|untrained>/`` (not committed).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import killing  # noqa: E402  (the tests' CPU flags)

from tunixkit import recipes  # noqa: E402

RUNS = ROOT / "notebooks" / "runs" / "no_learning"
RESULTS = ROOT / "bench" / "results" / "no_learning.json"
DOCS = ROOT / "docs" / "tuning.md"
NOTEBOOKS = {
    "01": ("01_qlora_sft", recipes.SFT),
    "02": ("02_grpo_gsm8k", recipes.GRPO),
    "03": ("03_dpo", recipes.DPO),
    "04": ("04_logit_distillation", recipes.Distill),
    "06": ("06_multidomain_pipeline", recipes.Pipeline),
    "07": ("07_agentic_calculator", recipes.Agentic),
    "08": ("08_curation", recipes.Curation),
    "09": ("09_routed_adapters", recipes.Routed),
}
# A notebook run with other parameters: key: (notebook, recipe, parameters). Its bars are the
# recipe's, measured on the default data; the notebook reports them without enforcing them.
VARIANTS = {
    "02-math": ("02_grpo_gsm8k", recipes.GRPO, {"DATASET": "math"}),
}
MODES = ("trained", "untrained")
# The trained runs repeated on other kinds of machine (``--again``): record["trained_on"][cpu], so
# each bar's margin is held on every kind of CI machine seen (tests/test_no_learning.py).
AGAIN = "trained_on"
# Notebooks whose trained run has not been repeated on a second kind of machine yet, and why: each
# is named here until its --again run is recorded (tests/test_no_learning.py fails on a stale entry)
AWAITING_AGAIN = {
    "08": "first recorded 2026-12-02 on an AMD EPYC; no other kind of machine has run it yet",
    "09": "first recorded 2026-12-02 on an AMD EPYC; no other kind of machine has run it yet",
}
# Further runs of a notebook: (mode, RECIPE_OVERRIDES, what it is)
BASELINES = {
    "04": [("hard_loss_only", {"alpha": 0.0}, "the same student on the hard (task) loss alone")],
}
# the figures compared with the baseline (lower is closer to the teacher)
BASELINE_FIGURES = {"04": ("student_kl_after", "student_eval_loss_after")}


def untrained_overrides(recipe_cls) -> dict[str, float]:
    """``RECIPE_OVERRIDES`` that switch training off: every learning rate of the smoke preset 0."""
    return {k: 0.0 for k in recipe_cls.smoke().learning_rates()}


def overrides_for(key: str, mode: str) -> dict:
    if mode == "untrained":
        return untrained_overrides(spec(key)[1])
    return {m: o for m, o, _ in BASELINES.get(key, [])}.get(mode, {})


def spec(key: str) -> tuple[str, type, dict]:
    """(notebook, recipe, parameters) of a notebook's or a variant's key."""
    if key in VARIANTS:
        return VARIANTS[key]
    notebook, recipe_cls = NOTEBOOKS[key]
    return notebook, recipe_cls, {}


def name(key: str) -> str:
    """The key's name in the results: the notebook, then a variant's parameters."""
    notebook, _, params = spec(key)
    return " ".join([notebook, *(f"{k}={v}" for k, v in params.items())])


def run(key: str, mode: str) -> dict:
    notebook, recipe_cls, extra = spec(key)
    out = RUNS / f"{name(key).replace(' ', '-').replace('=', '_')}-{mode}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    overrides = overrides_for(key, mode)
    params = {"PROFILE": "smoke", "OUTPUT_DIR": str(out), "RECIPE_OVERRIDES": overrides, **extra}
    env = killing.notebook_env(killing.NOTEBOOK_DEVICES)  # nbval's (notebooks/conftest.py)
    cmd = [sys.executable, "-m", "papermill", str(ROOT / "notebooks" / f"{notebook}.ipynb")]
    cmd += [str(out / "executed.ipynb"), "-k", "python3", "-y", json.dumps(params)]
    print(f"[{name(key)} {mode}] overrides {overrides} -> {out}", flush=True)
    t0 = time.perf_counter()
    # The untrained run's checks warn (its recipe is not the smoke preset), so the notebook ends;
    # the trained run's fail the notebook if a bar is not met, after writing checks.json.
    done = subprocess.run(cmd, cwd=ROOT / "notebooks", env=env)
    if not (out / "checks.json").is_file():
        raise SystemExit(f"{notebook} ({mode}) wrote no checks.json (exit {done.returncode})")
    record = json.loads((out / "checks.json").read_text())
    return {
        "recipe_overrides": overrides,
        "notebook_exit": done.returncode,
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "machine": machine(),
        "date": datetime.date.today().isoformat(),
        "figures": record["figures"],
        "bars": record["bars"],
    }


BEGIN, END = "<!-- no-learning:begin -->", "<!-- no-learning:end -->"


def _fmt(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.3f}"


def table(results: dict | None = None) -> str:
    """docs/tuning.md's table: each bar's figure trained and untrained, from the recorded figures
    checked against the recipes' bars as they are now."""
    results = results or json.loads(RESULTS.read_text())
    others = sorted({c for r in results["notebooks"].values() for c in r.get(AGAIN, {})})
    out = [
        "| notebook | check | kind | bar | trained | "
        + "".join(f"trained ({c}) | " for c in others)
        + "untrained | fails untrained |",
        "|---|---|---|---|---|" + "---|" * len(others) + "---|---|",
    ]
    for key in [*NOTEBOOKS, *VARIANTS]:
        _, recipe_cls, _ = spec(key)
        record = results["notebooks"].get(name(key), {})
        if not all(mode in record for mode in MODES):
            continue
        for bar in recipe_cls.BARS:
            trained = record["trained"]["figures"].get(bar.figure)
            again = [record.get(AGAIN, {}).get(c, {}).get("figures", {}) for c in others]
            untrained = record["untrained"]["figures"].get(bar.figure)
            fails = not bar.met(record["untrained"]["figures"])
            out.append(
                f"| {key} | {bar.says} (`{bar.figure}`) | {'guard' if bar.guard else 'learning'} "
                f"| {bar.op} {bar.bar:g} | {_fmt(trained)} | "
                + "".join(f"{_fmt(f.get(bar.figure))} | " for f in again)
                + f"{_fmt(untrained)} | {'yes' if fails else 'no'} |"
            )
    for key, baselines in BASELINES.items():
        notebook, _ = NOTEBOOKS[key]
        record = results["notebooks"].get(notebook, {})
        for mode, overrides, what in baselines:
            if mode not in record or "trained" not in record:
                continue
            out.append("")
            out.append(
                f"{key} against {what} (`RECIPE_OVERRIDES = {overrides}`), on held-out answers:"
            )
            out.append("")
            out.append(f"| figure | {notebook} | {mode} |")
            out.append("|---|---|---|")
            for fig in BASELINE_FIGURES[key]:
                a, b = record["trained"]["figures"][fig], record[mode]["figures"][fig]
                out.append(f"| `{fig}` | {a:.3f} | {b:.3f} |")
    return "\n".join(out)


def write_docs() -> None:
    text = DOCS.read_text()
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    DOCS.write_text(f"{head}{BEGIN}\n{table()}\n{END}{tail}")


def cpu() -> str:
    """This machine's CPU model, as /proc/cpuinfo names it."""
    info = pathlib.Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.is_file() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor() or "?"


def machine() -> str:
    """This machine as the record names it: architecture, CPU model, cores, and the emulated
    devices the notebooks ran on."""
    devices = killing.NOTEBOOK_DEVICES
    return (
        f"{platform.machine()} ({cpu()}), {os.cpu_count()} cores, {devices} emulated devices"
        " (smoke)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    keys = [*NOTEBOOKS, *VARIANTS]
    ap.add_argument("keys", nargs="*", help=f"notebooks: {', '.join(keys)} (default: all)")
    every = sorted({*MODES, *(m for b in BASELINES.values() for m, _, _ in b)})
    ap.add_argument("--mode", choices=every, help="only one way (default: all of the notebook's)")
    ap.add_argument("--write", action="store_true", help="render docs/tuning.md's table")
    ap.add_argument(
        "--again",
        action="store_true",
        help="the trained run only, kept beside the first under this machine's CPU",
    )
    args = ap.parse_args()
    if args.write:
        write_docs()
        return
    results = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {"notebooks": {}}

    def save() -> None:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=1) + "\n")

    for key in args.keys or keys:
        record = results["notebooks"].setdefault(name(key), {})
        if args.again:
            record.setdefault(AGAIN, {})[cpu()] = run(key, "trained")
            save()
            continue
        modes = [*MODES, *(m for m, _, _ in BASELINES.get(key, []))]
        for mode in [args.mode] if args.mode else modes:
            record[mode] = run(key, mode)
            save()
    write_docs()
    print(table())


if __name__ == "__main__":
    main()
