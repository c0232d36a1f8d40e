"""Memory plans of the full recipes of notebooks 01-04 on gemma-3-1b and gemma-2-2b (8 devices),
and of their one-chip presets (Colab).

Each plan runs ``python -m tunixkit.tools.memplan`` in its own process (8 emulated CPU devices and the
recipe's real mesh ``(fsdp=8, tp=1)``, or 1 for the one-chip presets; tunix's sharding constraints
applied) and appends a JSON line;
the summary goes to ``bench/results/memplan.json`` with how long each compile took.

    .venv/bin/python bench/memory_plan.py              # everything (about an hour on 2 cores)
    .venv/bin/python bench/memory_plan.py --only sft   # one recipe

Exits non-zero when a plan fails to compile. The verdicts are against a v5e chip (16 GiB); CPU
compiles over-state a TPU's bytes (bf16 upcast, less fusion): see ``tpu_reference`` below.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

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
    ("grpo", "gemma-3-1b-it", 1, "one_chip", "02 on one chip (Colab): 2 prompts x G=4, micro 1"),
    ("dpo", "gemma-3-1b-it", 1, "one_chip", "03 on one chip (Colab): 2 pairs"),
    ("distill", "gemma-3-270m-it", 1, "one_chip", "04 on one chip (Colab): 4 x 512"),
]
# The same SFT and DPO programs compiled ahead of time for a TPU v5e 2x4 (libtpu's compile-only
# client, no TPU attached) by the prototype of tunixkit.tools.memplan: the CPU figures are ~2.4x these.
TPU_REFERENCE = {
    "sft LoRA r64 16x512": {"cpu_gib": 13.01, "tpu_v5e_gib": 5.39},
    "dpo update 16x(256+512)": {"cpu_gib": 15.14, "tpu_v5e_gib": 6.38},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("sft", "grpo", "dpo", "distill"))
    args = ap.parse_args()
    rows, failed = [], []
    for kind, model, devices, preset, why in PLANS:
        if args.only and kind != args.only:
            continue
        env = dict(
            os.environ,
            JAX_PLATFORMS="cpu",
            XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
        )
        with tempfile.TemporaryDirectory() as tmp:
            out = pathlib.Path(tmp) / "plan.jsonl"
            cmd = [
                sys.executable,
                "-m",
                "tunixkit.tools.memplan",
                kind,
                "--model",
                model,
                "--devices",
                str(devices),
                "--preset",
                preset,
                "--json",
                str(out),
            ]
            res = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if not out.exists():
                failed.append(f"{kind} {model} x{devices} {preset}: {res.stderr[-2000:]}")
                print(f"FAILED {why}", flush=True)
                continue
            row = json.loads(out.read_text()) | {"recipe": why, "preset": preset}
        rows.append(row)
        print(
            f"{row['verdict']}  ({why}; {row['seconds']:.0f}s, host {row['host_peak_rss'] / 2**30:.1f} GiB)",
            flush=True,
        )
    RESULTS.mkdir(exist_ok=True)
    summary = {
        "device": "emulated CPU devices (upper bounds for TPU, see tpu_reference)",
        "chip": "v5e",
        "command": "python bench/memory_plan.py" + (f" --only {args.only}" if args.only else ""),
        "plans": rows,
        "tpu_reference": TPU_REFERENCE,
        "failed": failed,
    }
    (RESULTS / ("memplan.json" if not args.only else f"memplan_{args.only}.json")).write_text(
        json.dumps(summary, indent=1)
    )
    for f in failed:
        print(f"FAILED {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
