"""A notebook's smoke preset run by two processes, as on a two-host TPU slice, against one process.

The notebook itself (papermill, the smoke profile, offline, CPU) runs twice into two output
folders: once in one process of 4 emulated devices, once in two processes of 2 devices each,
joined by a local coordinator (the usual ``JAX_COORDINATOR_ADDRESS`` / ``JAX_NUM_PROCESSES`` /
``JAX_PROCESS_ID`` variables, :func:`tunixkit.hosts.start`) and writing into one shared folder, as
every host of a slice runs the same notebook into the same mounted folder. Then:

- both runs must end, and each passes the notebook's own learning checks (its last cell raises
  otherwise; both write ``checks.json``);
- the two-process run leaves the files the one-process run leaves, each written once (no file half
  written or left over by a second writer);
- the exported weights (``export/hf``, what the next notebook and the judges load) and the
  figures of ``summary.json`` match the one-process run's within float tolerance (the collectives
  sum in another order).

    python scripts/hosts_run.py          # 02 (~19 min on 2 cores: 299 s one, 838 s two)
    python scripts/hosts_run.py 01 03    # other notebooks (01: ~5 min)

Results: ``bench/results/hosts_<notebook>.json``, read by ``tests/test_hosts_run.py``. Runs go to
``notebooks/runs/hosts/<notebook>/{one,two}/`` (not committed).
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

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import killing  # noqa: E402  (the tests' CPU flags)

RUNS = ROOT / "notebooks" / "runs" / "hosts"
RESULTS = ROOT / "bench" / "results"
NOTEBOOKS = {
    "01": "01_qlora_sft",
    "02": "02_grpo_gsm8k",
    "03": "03_dpo",
}
DEVICES = 4  # in all: one process of 4, or two of 2
# the float tolerance of the exported weights: one process's sums and two processes' differ in
# order (the same bound as tests/test_hosts.py's GRPO weights)
RTOL, ATOL = 1e-4, 1e-5
# files each process writes for itself: its executed notebook, the compilation cache, traces
OWN = ("jax_cache", "trace", "tensorboard")
# the file Orbax writes last into a checkpoint it finished (a step's folder, or a portable export)
ORBAX_MARK = "_CHECKPOINT_METADATA"


def _papermill(notebook: str, out: pathlib.Path, executed: pathlib.Path, env: dict) -> list:
    params = {"PROFILE": "smoke", "OUTPUT_DIR": str(out)}
    cmd = [sys.executable, "-m", "papermill", str(ROOT / "notebooks" / f"{notebook}.ipynb")]
    cmd += [str(executed), "-k", "python3", "-y", json.dumps(params), "--log-output"]
    log = executed.with_suffix(".log").open("w")
    return [subprocess.Popen(cmd, cwd=ROOT / "notebooks", env=env, stdout=log, stderr=log), log]


def run(notebook: str, processes: int) -> dict:
    """``notebook`` in ``processes`` processes of ``DEVICES // processes`` devices, into one
    folder; each process's exit code and wall time."""
    where = RUNS / notebook / ("one" if processes == 1 else "two")
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    envs = killing.process_envs(killing.notebook_env(DEVICES // processes), processes)
    t0 = time.perf_counter()
    jobs = [
        _papermill(notebook, where / "run", where / f"executed{rank}.ipynb", env)
        for rank, env in enumerate(envs)
    ]
    exits = []
    for job, log in jobs:
        exits.append(job.wait())
        log.close()
    return {
        "processes": processes,
        "devices_each": DEVICES // processes,
        "exits": exits,
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "folder": str(where.relative_to(ROOT)),
    }


def _files(folder: pathlib.Path) -> list[str]:
    """The run's files, by path (what each process keeps for itself left out). An Orbax checkpoint
    counts as one entry, its folder: inside it, Orbax writes files per process
    (``ocdbt.process_1/``, ``array_metadatas/process_1``) under hashed names (``d/<hash>``), so two
    processes' checkpoint of the same step holds other file names than one process's."""
    orbax = [p.parent for p in folder.rglob(ORBAX_MARK)]
    outermost = [d for d in orbax if not any(o != d and o in d.parents for o in orbax)]
    out = {f"{d.relative_to(folder)}/" for d in outermost}
    for p in folder.rglob("*"):
        rel = p.relative_to(folder)
        if p.is_file() and rel.parts[0] not in OWN and not any(d in p.parents for d in outermost):
            out.add(str(rel))
    return sorted(out)


def _weights(folder: pathlib.Path) -> dict[str, np.ndarray]:
    import safetensors.numpy as stn

    out: dict[str, np.ndarray] = {}
    for f in sorted((folder / "export" / "hf").glob("*.safetensors")):
        out |= {k: v.astype(np.float64) for k, v in stn.load_file(str(f)).items()}
    return out


def _numbers(tree, prefix: str = "") -> dict[str, float]:
    """Every number in a JSON tree, by its dotted path."""
    if isinstance(tree, dict):
        return {
            k: v for key, sub in tree.items() for k, v in _numbers(sub, f"{prefix}{key}.").items()
        }
    if isinstance(tree, list):
        return {
            k: v for i, sub in enumerate(tree) for k, v in _numbers(sub, f"{prefix}{i}.").items()
        }
    if isinstance(tree, bool) or not isinstance(tree, int | float):
        return {}
    return {prefix.rstrip("."): float(tree)}


def compare(notebook: str, one: dict, two: dict) -> dict:
    a, b = RUNS / notebook / "one" / "run", RUNS / notebook / "two" / "run"
    wa, wb = _weights(a), _weights(b)
    same_names = sorted(wa) == sorted(wb) and len(wa) > 0
    worst = {"max_abs": 0.0, "max_rel": 0.0, "within": same_names}
    for k in wa if same_names else ():
        d = np.abs(wa[k] - wb[k])
        worst["max_abs"] = max(worst["max_abs"], float(d.max()))
        worst["max_rel"] = max(worst["max_rel"], float((d / (np.abs(wa[k]) + 1e-12)).max()))
        worst["within"] &= bool(np.allclose(wb[k], wa[k], rtol=RTOL, atol=ATOL))
    checks = {}
    for name, folder in (("one", a), ("two", b)):
        f = folder / "checks.json"
        checks[name] = json.loads(f.read_text()) if f.is_file() else None
    sa = json.loads((a / "summary.json").read_text()) if (a / "summary.json").is_file() else {}
    sb = json.loads((b / "summary.json").read_text()) if (b / "summary.json").is_file() else {}
    na, nb = _numbers(sa), _numbers(sb)
    timing = ("seconds", "_s", "time", "elapsed", "wall", "per_s", "rate", "peak", "bytes", "mib")
    figures = {
        k: [na[k], nb.get(k)]
        for k in sorted(na)
        if not any(t in k.lower() for t in timing) and k.split(".")[0] != "timings"
    }
    differ = {
        k: v
        for k, v in figures.items()
        if v[1] is None or not np.isclose(v[1], v[0], rtol=1e-3, atol=1e-4)
    }
    fa, fb = _files(a), _files(b)
    return {
        "notebook": notebook,
        "command": f"python scripts/hosts_run.py {notebook[:2]}",
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "runs": {"one": one, "two": two},
        "export_weights": worst | {"rtol": RTOL, "atol": ATOL, "tensors": len(wa)},
        "checks": checks,
        "summary_figures": len(figures),
        "summary_figures_that_differ": differ,
        "files_only_one_process_run": sorted(set(fa) - set(fb)),
        "files_only_two_process_run": sorted(set(fb) - set(fa)),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("notebooks", nargs="*", default=["02"], choices=sorted(NOTEBOOKS))
    ap.add_argument(
        "--reuse-one", action="store_true", help="keep the one-process run of the last results"
    )
    ap.add_argument(
        "--compare-only",
        action="store_true",
        help="run nothing: compare the two runs the last results name again",
    )
    args = ap.parse_args()
    bad = 0
    for key in args.notebooks:
        notebook = NOTEBOOKS[key]
        out = RESULTS / f"hosts_{key}.json"
        last = json.loads(out.read_text())["runs"] if out.is_file() else {}
        here = {n: (RUNS / notebook / n / "run").is_dir() for n in ("one", "two")}
        if args.compare_only and not (last and all(here.values())):
            print(f"[{notebook}] nothing to compare: run it first ({out}, {RUNS / notebook})")
            return 1
        print(f"[{notebook}] one process of {DEVICES} devices", flush=True)
        kept = (args.reuse_one or args.compare_only) and last and here["one"]
        one = last["one"] if kept else run(notebook, 1)
        print(f"[{notebook}] two processes of {DEVICES // 2} devices: {one}", flush=True)
        two = last["two"] if args.compare_only else run(notebook, 2)
        result = compare(notebook, one, two)
        out.write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps({k: result[k] for k in ("runs", "export_weights")}, indent=1))
        print(f"[{notebook}] -> {out}")
        bad += any(one["exits"] + two["exits"]) or not result["export_weights"]["within"]
    return int(bad > 0)


if __name__ == "__main__":
    sys.exit(main())
