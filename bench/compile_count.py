"""Every program a whole smoke run of a notebook asks XLA for, and what each request cost: a real
compile, or a read from the persistent compilation cache (``runtime.compilation_cache``, on by
default in every notebook) of a program compiled before in the same run.

The question it answers: the notebook's passes (evaluations, self-improvement, judged pairs, held-out
rewards) each build their own sampler, so each compiles its prefill and decode again. How much of a
run does that cost, now that a repeated program is read from the cache instead of compiled? What is
left for "one sampler per model and shape for the whole notebook" to save is the repeated requests:
their tracing, lowering and cache reads.

The notebook runs as a script (``testing.notebook_script``) in a child process on the smoke profile,
CPU with 2 emulated devices (the CI's notebook settings), with an empty compilation cache of its
own. JAX's monitoring events are recorded in the child (``HOOK``): each compile request's function
name, its trace, lowering and compile-or-read seconds, and whether the cache had it.
tunix's ``MetricsLogger.close`` clears every monitoring listener of the process
(``jax.monitoring.clear_event_listeners``, ``sft/metrics_logger.py``); the hook registers itself
again after each clear.

    .venv/bin/python bench/compile_count.py 06      # about 3 minutes here

Writes ``bench/results/compile_count_<notebook>.json``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
sys.path.insert(0, str(ROOT / "tests"))
import killing  # noqa: E402  (the tests' CPU flags)

NOTEBOOKS = {p.name.split("_")[0]: p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))}
# The child's sitecustomize: records (event, function, seconds, cache hit) as they happen.
HOOK = """
import atexit, json, os, threading
import jax.monitoring
from jax._src import monitoring

_rows, _last = [], threading.local()


def _event(event, **kwargs):
    if event.endswith(("/cache_hits", "/cache_misses")):
        _last.hit = event.endswith("/cache_hits")


def _duration(event, seconds, **kwargs):
    if event.startswith("/jax/core/compile/"):
        phase = event.rsplit("/", 1)[1]
        hit = getattr(_last, "hit", None) if phase == "backend_compile_duration" else None
        _rows.append([phase, str(kwargs.get("fun_name", "?")), seconds, hit])
        _last.hit = None


def _register():
    monitoring.register_event_listener(_event)
    monitoring.register_event_duration_secs_listener(_duration)


_clear = monitoring.clear_event_listeners


def _clear_then_register():
    _clear()
    _register()


monitoring.clear_event_listeners = jax.monitoring.clear_event_listeners = _clear_then_register
_register()
atexit.register(lambda: json.dump(_rows, open(os.environ["COMPILE_EVENTS"], "w")))
"""
PHASES = {
    "jaxpr_trace_duration": "trace_s",
    "jaxpr_to_mlir_module_duration": "lower_s",
}


def _program(name: str) -> str:
    """``jit(_decode_fn)`` and ``_decode_fn`` (the trace event's name) as one program name."""
    return name[4:-1] if name.startswith("jit(") else name


def summarize(rows: list) -> dict:
    """Per program: requests, real compiles, cache reads and the seconds of each phase; then the
    same summed over all programs, and over the requests that were cache reads."""
    per: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for phase, name, seconds, hit in rows:
        p = per[_program(name)]
        if phase == "backend_compile_duration":
            p["requests"] += 1
            p["cache_reads" if hit else "compiles"] += 1
            p["read_s" if hit else "compile_s"] += seconds
        elif phase in PHASES:
            p[PHASES[phase]] += seconds
    programs = {
        k: {f: round(v, 3) for f, v in sorted(c.items())}
        for k, c in sorted(per.items(), key=lambda kv: -sum(kv[1].values()))
    }
    total: collections.Counter = collections.Counter()
    for c in per.values():
        total.update(c)
    return {"programs": programs, "total": {f: round(v, 3) for f, v in sorted(total.items())}}


def repeated_cost(programs: dict) -> dict:
    """What building each program once would save at most: for each program requested more than
    once, its cache reads and the share of its tracing and lowering its repeats took."""
    saved = collections.Counter()
    for p in programs.values():
        repeats = p.get("requests", 0) - p.get("compiles", 0)
        if repeats <= 0:
            continue
        share = repeats / p["requests"]
        saved["requests"] += repeats
        saved["seconds"] += p.get("read_s", 0) + share * (p.get("trace_s", 0) + p.get("lower_s", 0))
    return {k: round(v, 3) for k, v in saved.items()}


def main() -> int:
    from tunixkit import testing

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebook", choices=sorted(NOTEBOOKS))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "hook").mkdir()
        (tmp / "hook" / "sitecustomize.py").write_text(HOOK)
        script = testing.notebook_script(
            NOTEBOOKS[args.notebook], {"OUTPUT_DIR": str(tmp / "run")}, tmp / "nb.py"
        )
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("TUNIXKIT_PROFILE")},
            **killing.cpu_env(killing.NOTEBOOK_DEVICES),
            "TUNIXKIT_PROFILE": "smoke",
            "JAX_COMPILATION_CACHE_DIR": str(tmp / "jax_cache"),  # empty: first requests compile
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
            "COMPILE_EVENTS": str(tmp / "events.json"),
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(tmp / "hook"), os.environ.get("PYTHONPATH")])
            ),
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "WANDB_MODE": "disabled",
            "MPLBACKEND": "Agg",
        }
        t0 = time.time()
        log = tmp / "log.txt"
        with log.open("w") as out:
            rc = subprocess.run(
                [sys.executable, str(script)],
                cwd=tmp,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            ).returncode
        seconds = time.time() - t0
        if rc:
            print(log.read_text()[-4000:])
            return rc
        rows = json.loads((tmp / "events.json").read_text())
    found = summarize(rows)
    found["repeated"] = repeated_cost(found["programs"])
    result = {
        "notebook": NOTEBOOKS[args.notebook].stem,
        "profile": "smoke",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"{killing.NOTEBOOK_DEVICES} emulated CPU devices",
        "date": time.strftime("%Y-%m-%d"),
        "run_seconds": round(seconds, 1),
        **found,
    }
    t, r = found["total"], found["repeated"]
    print(
        f"{result['notebook']}: {t.get('requests', 0):.0f} compile requests in a {seconds:.0f} s "
        f"run: {t.get('compiles', 0):.0f} compiled ({t.get('compile_s', 0):.1f} s), "
        f"{t.get('cache_reads', 0):.0f} read from the cache ({t.get('read_s', 0):.1f} s); tracing "
        f"{t.get('trace_s', 0):.1f} s, lowering {t.get('lower_s', 0):.1f} s"
    )
    print(
        f"requests of a program already built: {r.get('requests', 0):.0f}, "
        f"{r.get('seconds', 0):.1f} s ({r.get('seconds', 0) / seconds:.1%} of the run)"
    )
    for name, p in list(found["programs"].items())[:8]:
        print(f"  {name}: {p}")
    out = RESULTS / f"compile_count_{args.notebook}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
