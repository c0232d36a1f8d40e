"""Notebook 06 across two Kaggle-like sessions: the first is SIGKILLed in its GRPO stage, right after
the stage's first checkpoint (``tests/killing.py``); its output, made read-only, is the second
session's ``RESUME_FROM``. The second must not train the finished stages again, must read their
evaluations back, must continue GRPO from its checkpoint, and must end with the notebook's
must-hold checks passed. Its session clock runs out part-way through GRPO (after GRPO's next
checkpoint: an event, ``killing.clock_ends_at``), the last stage, whose deadline is the session's
end: GRPO must still be finished with the steps it trained, evaluated, adopted and judged.

It runs the smoke preset cut small by the notebook's own knobs (``SMALL``): what it proves is the
resume, not learning (the whole preset's learning is asserted by the notebook's nbval run), so the
learning checks only warn here (``evaluation.Checks.for_run``).

The notebook's py:percent source runs as a plain script with its parameters injected
(``tunixkit.testing.notebook_script``), so the killed process is the one training.
"""

import json
import os
import pathlib
import re
import stat
import subprocess
import sys

import killing

from tunixkit import testing

NOTEBOOK = pathlib.Path(__file__).resolve().parents[1] / "notebooks" / "06_multidomain_pipeline.py"
# GRPO checkpoints every 2 steps here (the smoke recipe: every 20): the first session is killed
# after checkpoint 2, the second session's clock runs out after checkpoint 4, of 6 planned steps
GRPO_STEPS, KILL_AT, CLOCK_ENDS_AT = 6, 2, 4
# Fewer steps, prompts and answer tokens than the smoke preset: every stage still trains (asserted),
# evaluates and hands over.
SMALL = {
    "TRAIN_TASKS": 600,
    "SFT_STEPS": 60,
    "HELDOUT_PER_DOMAIN": 4,
    "IMPROVE_PROMPTS": 24,
    "PAIR_PROMPTS": 24,
    "GRPO_STEPS": GRPO_STEPS,
    "GRPO_CHECKPOINT_EVERY": KILL_AT,
    "GENERATION_STEPS": 32,  # the smoke preset's 64 halved: shorter answers, the same path
    # every stage is adopted, so that each trains: 60 SFT steps lowered the judged score here
    # (-0.04 ± 0.03 on 24 prompts), and the guard then skipped self-improvement (nothing kept)
    "GUARD": False,
}


def _env():
    return dict(
        os.environ,
        TUNIXKIT_PROFILE="smoke",
        **killing.cpu_env(2),
        MPLBACKEND="Agg",
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        WANDB_MODE="disabled",
    )


def _start(
    tmp: pathlib.Path, name: str, env: dict, **params
) -> tuple[subprocess.Popen, pathlib.Path]:
    script = testing.notebook_script(NOTEBOOK, SMALL | params, tmp / f"{name}.py")
    log = tmp / f"{name}.log"
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=tmp,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    return proc, log


def _rollout_steps(run: pathlib.Path) -> list[int]:
    path = run / "grpo" / "rollouts.jsonl"
    return [json.loads(line)["step"] for line in path.read_text().splitlines()]


def test_a_pipeline_killed_in_its_grpo_stage_continues_there_in_the_next_session(tmp_path):
    first = tmp_path / "input" / "run"
    proc, log = _start(
        tmp_path,
        "session1",
        killing.hang_at(_env(), KILL_AT, "/grpo/checkpoints"),
        OUTPUT_DIR=str(first),
    )
    killing.kill_when_hanging(proc, log, KILL_AT)  # SIGKILL: no export of the GRPO stage
    stages = json.loads((first / "stages.json").read_text())
    assert [
        n for n in ("sft", "improve", "preference", "grpo") if stages.get(n, {}).get("done")
    ] == ["sft", "improve", "preference"], stages
    # each trained (a stage with nothing to train on is skipped, and its resume not proven)
    assert all(stages[n]["steps"] > 0 and not stages[n].get("skipped") for n in stages), stages
    rolled_out = len(_rollout_steps(first))
    for p in [first, *first.rglob("*")]:  # /kaggle/input is read-only
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))

    second = tmp_path / "working" / "run"
    proc, log = _start(
        tmp_path,
        "session2",
        killing.clock_ends_at(_env(), CLOCK_ENDS_AT, "/grpo/checkpoints"),
        OUTPUT_DIR=str(second),
        RESUME_FROM=str(first),
        SESSION_HOURS=9,
    )
    assert killing.wait(proc, log) == 0, log.read_text()[-3000:]
    said = log.read_text()
    assert f"continuing from {first} (each stage continues from its own checkpoint)" in said
    assert f"the session clock ends at {CLOCK_ENDS_AT}" in said, said[-3000:]
    summary = json.loads((second / "summary.json").read_text())
    grpo = summary["stages"]["grpo"]
    trained = grpo["steps"]  # the clock stops it at the next step it asks about
    assert grpo["done"] and grpo["stopped"] == "session clock", grpo
    assert CLOCK_ENDS_AT <= trained < GRPO_STEPS, grpo
    assert f"grpo: {trained} of {GRPO_STEPS} steps ({trained - KILL_AT} in this run" in said, said[
        -3000:
    ]
    assert f"grpo: the session clock stopped training after {trained} steps" in said
    for stage in ("sft", "improve", "preference"):  # finished: not trained again
        assert not re.search(rf"^{stage}: \d+ of \d+ steps", said, re.M), stage
    assert (
        "self-improvement: kept" not in said and "judged pairs:" not in said
    )  # their data read back
    assert set(_rollout_steps(second)[rolled_out:]) == set(range(KILL_AT + 1, trained + 1))
    # GRPO's hours are kept: evaluated (below), adopted, and the judged model at its step
    assert summary["final_stage"] == "grpo", summary["adoption"]
    total = sum(summary["stages"][n]["steps"] for n in ("sft", "improve", "preference", "grpo"))
    assert summary["judged_model"].endswith(f"/ckpts/actor/{total}/model_params"), summary
    # each stage's adoption was decided against the model it started from, and said
    assert all("why" in summary["adoption"][n] for n in ("sft", "improve", "preference", "grpo"))
    # the self-improvement pass ran in the first session; its report is kept across the resume
    assert summary["self_improvement"]["kept"] > 0, summary["self_improvement"]
    assert summary["scores"].keys() == {"start", "sft", "improve", "preference", "grpo"}
    # the checks cell ran to its end: every must-hold check passed (learning checks only warn here)
    assert re.search(r"^pipeline( OK$|: must-hold checks passed)", said, re.M), said[-3000:]
