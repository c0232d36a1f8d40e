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
    """Every part of the device script (issue 50, item 5), in one run as a lent GPU runs it."""
    out = tmp_path / "speed.json"
    args = ["--model", "tiny", "--copy-mib", "8", "--matmul", "128", "--repeats", "1"]
    args += ["--batches", "2,4", "--grpo-prompt", "96", "--grpo-new", "8", "--grpo-steps", "2"]
    args += ["--sft-batch", "2", "--sft-seq", "64", "--sft-rank", "8", "--sft-steps", "4"]
    args += ["--parts", "bandwidth,matmul,decode,grpo,sft,plan,projection"]
    env = {**os.environ, **killing.cpu_env(1)}
    subprocess.run(
        [sys.executable, str(ROOT / "bench/speed.py"), *args, "--out", str(out)],
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
    # 02's GRPO step by phase, each step traced, the peak memory after each phase
    grpo = found["grpo"]
    assert grpo["preset"] == "full" and grpo["rollouts_per_step"] == 16
    assert [r["step"] for r in grpo["steps"]] == [1, 2]
    step = grpo["median_after_first"]
    assert step["seconds"] >= step["rollout"] > 0 and step["update"] > 0 and step["reference"] > 0
    assert {m["phase"] for m in grpo["memory_after"]} == {"rollout", "reference", "update"}
    assert all(m["peak_bytes"] > 0 for m in grpo["memory_after"])
    # SFT: tokens a second and MFU against the matmul part's bf16 figure, the FLOPs stated
    sft = found["sft"]
    assert sft["mode"] == "qlora" and sft["tokens_per_s"] > 0 and sft["mfu"] > 0
    assert sft["model_flops_per_token"] > 4 * (sft["params"] - sft["trainable"])
    assert "PaLM" in sft["flop_convention"]
    # the plans of the same two programs, and the projection with its assumptions
    plan = found["plan"]
    assert [s["name"] for s in plan["sft"]["steps"]] == ["sft_update"]
    assert "grpo_update" in [s["name"] for s in plan["grpo"]["steps"]]
    assert all(plan[k]["peak"] > 0 for k in ("sft", "grpo"))
    projection = found["projection"]
    assert projection["step_s"]["total"] > 0 and len(projection["assumptions"]) >= 4
    assert projection["preset_steps"] == 3000


def test_the_committed_cpu_run_decodes_the_real_270m():
    found = json.loads((ROOT / "bench/results/speed_cpu.json").read_text())
    decode = found["decode"]
    assert decode["model"] == "gemma-3-270m" and [r["batch"] for r in decode["rows"]] == [1, 8, 32]
    # more rows a step cost more per step, and give more tokens a second
    steps = [r["step_s"] for r in decode["rows"]]
    tokens = [r["tokens_per_s"] for r in decode["rows"]]
    assert steps == sorted(steps) and tokens == sorted(tokens), decode["rows"]
    assert all(0 < r["share_of_bound"] <= 1.0 for r in decode["rows"]), decode["rows"]
    # the device script's other parts, on the same machine in the same run
    grpo, sft = found["grpo"], found["sft"]
    assert grpo["model_id"] == "gemma-3-270m" and grpo["vocabulary"] == 262144
    assert grpo["median_after_first"]["rollout"] > 0 and grpo["median_after_first"]["update"] > 0
    assert sft["shape"] == "gemma-3-270m" and 0 < sft["mfu"] <= 1.0, sft
    assert set(found["plan"]) == {"sft", "grpo"} and found["projection"]["step_s"]["total"] > 0


def test_rollout_calls_runs_in_the_tiny_mode_and_the_committed_run_is_the_real_270m(tmp_path):
    """bench/rollout_calls.py: whole GRPO steps with the rollout in one sampler call or one per
    update micro-batch; tiny here, and its committed run (the real Gemma 3 270M) read back."""
    out = tmp_path / "rollout_calls.json"
    args = ["--model", "tiny-gemma3-sft", "--steps", "3", "--warm", "1", "--repeats", "1"]
    env = {**os.environ, **killing.cpu_env(1)}
    subprocess.run(
        [sys.executable, str(ROOT / "bench/rollout_calls.py"), *args, "--out", str(out)],
        check=True,
        env=env,
        capture_output=True,
    )
    committed = [
        json.loads((ROOT / f"bench/results/rollout_calls_{p}.json").read_text())
        for p in ("02", "06")
    ]
    for found in (json.loads(out.read_text()), *committed):
        assert found["calls_per_step"] == {"split": 2, "whole": 1}, found["calls_per_step"]
        assert found["rows_per_call"] == {"split": 8, "whole": 16}
        assert all(r["median_step_s"] > r["median_rollout_s"] > 0 for r in found["rows"])
    for preset, found in zip(("02", "06"), committed, strict=True):
        assert found["preset"] == preset and found["model"] == "gemma-3-270m"
        assert found["vocabulary"] == 262144
        assert len(found["step_ratio_whole_over_split"]["ratios"]) >= 3
