"""bench/speed.py in its tiny mode: every part runs on this CPU and writes its figures (the same
script a lent accelerator runs at the real shapes), and the committed run on the real 270M."""

import json
import os
import pathlib
import subprocess
import sys

import killing

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_part_runs_in_the_tiny_mode_and_writes_its_figures(tmp_path):
    out = tmp_path / "speed.json"
    args = ["--model", "tiny", "--copy-mib", "8", "--matmul", "128", "--repeats", "1"]
    env = {**os.environ, **killing.cpu_env(2)}
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench/speed.py"),
            *args,
            "--batches",
            "2,4",
            "--out",
            str(out),
        ],
        check=True,
        env=env,
        capture_output=True,
    )
    found = json.loads(out.read_text())
    assert found["bandwidth"]["gb_per_s"] > 0
    assert found["matmul"]["bfloat16"]["tflop_per_s"] > 0
    rows = found["decode"]["rows"]
    assert [r["batch"] for r in rows] == [2, 4]
    assert all(r["step_s"] > 0 and r["share_of_bound"] > 0 for r in rows)
    assert set(found["decode"]["fit"]) == {"a_s", "b_s_per_row"}


def test_the_committed_cpu_run_decodes_the_real_270m():
    found = json.loads((ROOT / "bench/results/speed_cpu.json").read_text())
    decode = found["decode"]
    assert decode["model"] == "gemma-3-270m" and [r["batch"] for r in decode["rows"]] == [1, 8, 32]
    # more rows a step cost more per step, and give more tokens a second
    steps = [r["step_s"] for r in decode["rows"]]
    tokens = [r["tokens_per_s"] for r in decode["rows"]]
    assert steps == sorted(steps) and tokens == sorted(tokens), decode["rows"]
    assert all(0 < r["share_of_bound"] <= 1.0 for r in decode["rows"]), decode["rows"]
