"""Memory plans of the full recipes of notebooks 01-04 on gemma-3-1b and gemma-2-2b (8 devices),
and of their one-chip presets (Colab).

Each plan runs ``python -m tunixkit.tools.memplan`` in its own process (8 emulated CPU devices and the
recipe's real mesh ``(fsdp=8, tp=1)``, or 1 for the one-chip presets; tunix's sharding constraints
applied) and appends a JSON line;
the summary goes to ``bench/results/memplan.json`` with how long each compile took.

    .venv/bin/python bench/memory_plan.py              # everything (about an hour on 2 cores)
    .venv/bin/python bench/memory_plan.py --only sft   # one recipe
    python bench/memory_plan.py --accelerator --jobs 4 # on a GPU/TPU host: the one-device plans

``--accelerator`` compiles the one-device plans (the one-chip presets, 06's and 07's stages, the
Gemma2 variants) for the host's own chip instead of emulated CPU devices, several at once
(compiles only: nothing is allocated), and writes ``bench/results/memplan_<platform>.json``. The
verdicts stay against a v5e chip: an accelerator's compiler keeps bf16 and fuses like a TPU's, so its
bytes are the closer stand-in (a GPU is not a TPU: the layouts and fusions still differ).

``--families`` plans 01's and 02's recipes with the Llama 3 and Qwen ids as ``MODEL_ID``
(``llama-3.2-1b-instruct``, ``qwen2.5-0.5b-instruct``, ``qwen3-0.6b``) instead, on a v5e-8 and on one
chip (``..._families.json``).

``--tpu-aot`` compiles for a TPU v5e slice *here*, with the TPU's own compiler and no TPU attached
(libtpu's compile-only client; memplan's ``--topology``): the full presets on a v5e-8 (``v5e:2x4``,
Kaggle), 06's and 07's included, and the one-chip ones (``v5e:1x1``, Colab). It needs libtpu in the
environment, apart from the project's (~200 MB; the version jax 0.10.2's ``tpu`` extra names):

    python -m venv /tmp/tpuaot && /tmp/tpuaot/bin/pip install -r requirements.txt 'libtpu==0.0.42.*'
    PYTHONPATH=$PWD /tmp/tpuaot/bin/python bench/memory_plan.py --tpu-aot --devices 8 --only pipeline

A TPU compile of one 26-layer step takes 1-7 minutes on 2 cores; results go to
``bench/results/memplan_tpu_aot.json``.

Exits non-zero when a plan fails to compile. The verdicts are against a v5e chip (16 GiB); CPU
compiles over-state a TPU's bytes (bf16 upcast, less fusion): see ``tpu_reference`` below.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
PLANS = [  # (recipe kind, model id, devices, preset, why)
    ("sft", "gemma-3-1b-it", 8, "full", "01 full: QLoRA r64, 16 x 512"),
    (
        "grpo",
        "gemma-3-1b-it",
        8,
        "full",
        "02 full: LoRA r64, 4 prompts x G=4, micro 2, 256 + 768 tokens",
    ),
    ("dpo", "gemma-3-1b-it", 8, "full", "03 full: LoRA r64, 8 pairs, 256 + 512 tokens"),
    (
        "distill",
        "gemma-3-270m-it",
        8,
        "full",
        "04 full: gemma-3-1b teacher, gemma-3-270m student, 16 x 512",
    ),
    ("sft", "gemma-2-2b-it", 8, "full", "01 with MODEL_ID=gemma-2-2b-it"),
    ("grpo", "gemma-2-2b-it", 8, "full", "02 with MODEL_ID=gemma-2-2b-it"),
    ("dpo", "gemma-2-2b-it", 8, "full", "03 with MODEL_ID=gemma-2-2b-it"),
    ("sft", "gemma-3-1b-it", 1, "one_chip", "01 on one chip (Colab): 4 x 512"),
    (
        "grpo",
        "gemma-3-1b-it",
        1,
        "one_chip",
        "02 on one chip (Colab): 2 prompts x G=4, micro 1, 256 + 320 tokens",
    ),
    ("dpo", "gemma-3-1b-it", 1, "one_chip", "03 on one chip (Colab): 1 pair"),
    ("distill", "gemma-3-270m-it", 1, "one_chip", "04 on one chip (Colab): 4 x 512"),
]
ACCELERATOR_PLANS = [  # one device each: compiled for the host's chip by --accelerator
    *[p for p in PLANS if p[2] == 1],
    (
        "pipeline",
        "gemma-3-1b-it",
        1,
        "one_chip",
        "06 on one chip (Colab): every stage, judge resident",
    ),
    (
        "agentic",
        "gemma-3-1b-it",
        1,
        "one_chip",
        "07 on one chip (Colab): warm start, agentic GRPO",
    ),
    ("sft", "gemma-2-2b-it", 1, "one_chip", "01 on one chip with MODEL_ID=gemma-2-2b-it"),
    ("grpo", "gemma-2-2b-it", 1, "one_chip", "02 on one chip with MODEL_ID=gemma-2-2b-it"),
    ("dpo", "gemma-2-2b-it", 1, "one_chip", "03 on one chip with MODEL_ID=gemma-2-2b-it"),
]
TPU_PLANS = [  # --tpu-aot: the Kaggle v5e-8 runs first (06 and 07 included), then one chip
    *[p for p in PLANS if p[2] == 8],
    ("pipeline", "gemma-3-1b-it", 8, "full", "06 full: every stage, judge resident"),
    ("agentic", "gemma-3-1b-it", 8, "full", "07 full: warm start, agentic GRPO"),
    *[p for p in ACCELERATOR_PLANS if p[2] == 1],
]
FAMILY_PLANS = [  # --families: 01 and 02's recipes with the Llama 3 and Qwen ids as MODEL_ID
    (kind, model, devices, preset, f"{nb} {'full' if devices == 8 else 'on one chip'} with {model}")
    for model in ("llama-3.2-1b-instruct", "qwen2.5-0.5b-instruct", "qwen3-0.6b")
    for kind, nb in (("sft", "01"), ("grpo", "02"))
    for devices, preset in ((8, "full"), (1, "one_chip"))
]
# The same SFT and DPO programs compiled ahead of time for a TPU v5e 2x4 (libtpu's compile-only
# client, no TPU attached) by the prototype of tunixkit.tools.memplan: the CPU figures are ~2.4x these.
TPU_REFERENCE = {
    "sft LoRA r64 16x512": {"cpu_gib": 13.01, "tpu_v5e_gib": 5.39},
    "dpo update 16x(256+512)": {"cpu_gib": 15.14, "tpu_v5e_gib": 6.38},
}


def _run(plan, accelerator: bool, tpu_aot: bool = False) -> tuple[list[dict], str | None]:
    """Run one plan in its own process: its rows (06's pipeline gives one a stage) or a failure."""
    kind, model, devices, preset, why = plan
    env = dict(os.environ)
    topology = []
    if tpu_aot:  # a v5e slice's own compiler, no TPU attached (libtpu's compile-only client)
        env["JAX_PLATFORMS"] = "cpu"
        topology = ["--topology", {8: "v5e:2x4", 1: "v5e:1x1"}[devices]]
    elif accelerator:
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"  # compiles only: processes share the chip
    else:
        env |= {
            "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
        }
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "plan.jsonl"
        cmd = [sys.executable, "-m", "tunixkit.tools.memplan", kind, "--model", model]
        cmd += ["--devices", str(devices), "--preset", preset, "--json", str(out), *topology]
        t0 = time.perf_counter()
        res = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if not out.exists() or not out.read_text().strip():
            return [], f"{kind} {model} x{devices} {preset}: {res.stderr[-2000:]}"
        rows = [
            json.loads(line) | {"recipe": why, "preset": preset}
            for line in out.read_text().splitlines()
        ]
        for row in rows:
            row.setdefault("seconds", time.perf_counter() - t0)
        return rows, None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("sft", "grpo", "dpo", "distill", "pipeline", "agentic"))
    ap.add_argument(
        "--accelerator",
        action="store_true",
        help="compile the one-device plans for this host's GPU/TPU",
    )
    ap.add_argument(
        "--tpu-aot",
        action="store_true",
        help="compile for a TPU v5e slice here, no TPU needed (needs libtpu: see the docstring)",
    )
    ap.add_argument(
        "--families", action="store_true", help="01 and 02 with the Llama 3 and Qwen model ids"
    )
    ap.add_argument("--jobs", type=int, default=1, help="plans compiled at once")
    ap.add_argument("--devices", type=int, choices=(1, 8), help="only the plans on this many")
    args = ap.parse_args()
    plans = TPU_PLANS if args.tpu_aot else ACCELERATOR_PLANS if args.accelerator else PLANS
    plans = FAMILY_PLANS if args.families else plans
    todo = [
        p
        for p in plans
        if (not args.only or p[0] == args.only) and (not args.devices or p[2] == args.devices)
    ]
    rows, failed = [], []
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = {pool.submit(_run, p, args.accelerator, args.tpu_aot): p for p in todo}
        for fut in concurrent.futures.as_completed(futures):
            why = futures[fut][4]
            got, error = fut.result()
            if error:
                failed.append(error)
                print(f"FAILED {why}", flush=True)
            for row in got:
                rows.append(row)
                print(f"{row['verdict']}  ({why}; {row['seconds']:.0f}s)", flush=True)
    order = {p[4]: i for i, p in enumerate(todo)}
    rows.sort(key=lambda r: order[r["recipe"]])
    platform = rows[0]["platform"] if rows else ("accelerator" if args.accelerator else "cpu")
    platform = "tpu_aot" if args.tpu_aot else platform
    kinds = sorted({r.get("device_kind", "") for r in rows} - {""})
    RESULTS.mkdir(exist_ok=True)
    command = "python bench/memory_plan.py" + (f" --only {args.only}" if args.only else "")
    command += f" --devices {args.devices}" if args.devices else ""
    command += " --families" if args.families else ""
    if args.accelerator or args.tpu_aot:
        command += f" --{'tpu-aot' if args.tpu_aot else 'accelerator'} --jobs {args.jobs}"
    summary = {
        "device": (
            f"{', '.join(kinds) or 'TPU v5 lite'}, compiled ahead of time here "
            "(libtpu's compile-only client, no TPU attached)"
            if args.tpu_aot
            else f"{platform}: {', '.join(kinds) or 'one device'} (compiled for the chip itself)"
            if args.accelerator
            else "emulated CPU devices (upper bounds for TPU, see tpu_reference)"
        ),
        "chip": "v5e",
        "command": command,
        "plans": rows,
        "tpu_reference": TPU_REFERENCE,
        "failed": failed,
    }
    name = f"memplan_{platform}" if args.accelerator or args.tpu_aot else "memplan"
    name += f"_{args.only}" if args.only else ""
    name += "_families" if args.families else ""
    (RESULTS / f"{name}.json").write_text(json.dumps(summary, indent=1))
    print(f"wrote {RESULTS / name}.json", flush=True)
    for f in failed:
        print(f"FAILED {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
