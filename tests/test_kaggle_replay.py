"""Two Kaggle sessions of notebooks 01 and 02, replayed on the smoke profile.

As on Kaggle: each session's Python lacks tunixkit (a fresh interpreter over the pinned stack, as
Kaggle's image has jax, tunix and friends), so the notebook's install cell installs it into the
running process; the working folder starts empty; ``KAGGLE_KERNEL_RUN_TYPE`` is set.

- An uninterrupted run gives the reference.
- 01, session 1: SIGKILLed right after its checkpoint at step 25 (the session's hard end, or a
  crash: ``tests/killing.py``), then run again in the same session with ``OUTPUT_DIR/STOP`` asking
  it to stop at step 28: it continues from 25 and ends as the session clock ends a run, with a
  checkpoint and an export that loads. 02, session 1: ``STOP`` at step 3 (of 6).
- Its output, made read-only, is session 2's ``RESUME_FROM``: session 2 trains exactly the remaining
  steps on the batches the uninterrupted run used, reuses the stored "before" evaluation, and ends
  with the uninterrupted run's weights.

Every interruption is an event (a checkpoint committed, a step reached), never a number of seconds,
so a busy machine changes how long this takes and nothing else.

The notebook's py:percent source runs as a plain script with its parameters injected after the
``parameters`` cell (``tunixkit.testing.notebook_script``), so the killed process is the one training.
"""

import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys

import killing
import pytest

from tunixkit import models, session, testing

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Few steps and questions: what is proven is where each session starts and ends and the weights it
# ends with, not learning (a run with other settings than the preset's only warns on its learning
# checks: ``evaluation.Checks.for_run``).
CASES = {  # notebook: (reduced parameters, model id, steps, killed after checkpoint, stopped at)
    "01_qlora_sft": ({"NUM_STEPS": 30, "EVAL_QUESTIONS": 8}, "tiny-gemma3", 30, 25, 28),
    "02_grpo_gsm8k": ({"NUM_STEPS": 6, "EVAL_QUESTIONS": 8}, "tiny-gemma3-sft", 6, None, 3),
}


def _env(kaggle: bool) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TUNIXKIT_SESSION", "KAGGLE_", "PYTHONPATH"))
    }
    env.update(
        TUNIXKIT_PROFILE="smoke",
        **killing.cpu_env(2),
        WANDB_MODE="disabled",
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        MPLBACKEND="Agg",
        PYTHONUNBUFFERED="1",
        TUNIXKIT_SOURCE=str(ROOT),
    )
    if kaggle:
        env["KAGGLE_KERNEL_RUN_TYPE"] = "Batch"
    return env


def _run(
    python: str,
    name: str,
    params: dict,
    cwd: pathlib.Path,
    *,
    kaggle: bool,
    kill_after: int | None = None,
    log_name: str = "log.txt",
):
    """Run the notebook to its end, or SIGKILL it right after its checkpoint ``kill_after``."""
    cwd.mkdir(parents=True, exist_ok=True)
    script = testing.notebook_script(
        ROOT / "notebooks" / f"{name}.py", params | {"OUTPUT_DIR": "run"}, cwd / "nb.py"
    )
    log = cwd / log_name
    env = _env(kaggle) | {"TMPDIR": str(cwd)}  # the machine's temp folder: one per session
    env = env if kill_after is None else killing.hang_at(env, kill_after)
    proc = subprocess.Popen(
        [python, str(script)], cwd=cwd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT
    )
    if kill_after is not None:
        return cwd / "run", killing.kill_when_hanging(proc, log, kill_after)
    rc = killing.wait(proc, log)
    text = log.read_text()
    assert rc == 0, text[-4000:]
    return cwd / "run", text


def _read_only(folder: pathlib.Path) -> None:
    for p in [folder, *folder.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _rollouts(folder: pathlib.Path, steps, skip: int = 0) -> dict[int, list]:
    """Each step's questions, from the rows of ``rollouts.jsonl`` after the first ``skip``."""
    out: dict[int, list] = {}
    for line in (folder / "rollouts.jsonl").read_text().splitlines()[skip:]:
        row = json.loads(line)
        if row["step"] in steps:
            out.setdefault(row["step"], []).extend(row["questions"])
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_two_kaggle_sessions(tmp_path, name):
    params, model_id, steps, kill_after, stop_at = CASES[name]
    straight_dir, _ = _run(sys.executable, name, params, tmp_path / "straight", kaggle=False)
    straight = json.loads((straight_dir / "summary.json").read_text())
    assert (straight["steps"], straight["stopped"]) == (steps, "done")

    kernel = testing.kernel_python(tmp_path / "kernel1")
    folder = tmp_path / "session1"
    logs = ""
    if kill_after:  # the session's hard end (or a crash) right after a checkpoint
        first, said = _run(
            kernel, name, params, folder, kaggle=True, kill_after=kill_after, log_name="killed.txt"
        )
        logs += said
        assert session.latest_checkpoint_step(first) == kill_after
        assert not (first / "summary.json").exists()
    # the same session, run again, stopped by OUTPUT_DIR/STOP at step ``stop_at``
    (folder / "run").mkdir(parents=True, exist_ok=True)
    (folder / "run" / "STOP").write_text(f"{stop_at}\n")
    first, log1 = _run(kernel, name, params, folder, kaggle=True)
    logs += log1
    assert "installing tunixkit into" in logs, "the install cell did not install tunixkit"
    done = session.latest_checkpoint_step(first)
    stopped = json.loads((first / "summary.json").read_text())
    assert (done, stopped["steps"], stopped["stopped"]) == (stop_at, stop_at, "stop requested")
    assert stopped["resumed_from"] == (kill_after or 0), stopped
    assert f"stopping after {stop_at} of the run's batches: " in log1 and "asks to stop" in log1
    exported = models.load_model(model_id, path=first / "export" / "hf", verbose=False)
    judged = testing.load_orbax_export(first / "export" / "orbax")
    assert testing.logits(judged).tolist() == testing.logits(exported.model).tolist()

    # Session 2: a new machine; the last session's output is a read-only input.
    shutil.copytree(first, tmp_path / "input" / "run")
    _read_only(tmp_path / "input")
    second, log2 = _run(
        testing.kernel_python(tmp_path / "kernel2"),
        name,
        params | {"RESUME_FROM": str(tmp_path / "input" / "run")},
        tmp_path / "session2",
        kaggle=True,
    )
    summary = json.loads((second / "summary.json").read_text())
    assert (summary["resumed_from"], summary["steps"], summary["stopped"]) == (done, steps, "done")
    assert "before: reusing the" in log2, (
        "session 2 recomputed the stored evaluation before training"
    )
    assert summary["weights_digest"] == straight["weights_digest"], (
        "session 2 ended with other weights"
    )
    if name.startswith(
        "02"
    ):  # GRPO logs each step's questions: the remaining steps, the same batches
        remaining = range(done + 1, steps + 1)
        carried = len((tmp_path / "input" / "run" / "rollouts.jsonl").read_text().splitlines())
        trained = _rollouts(
            second, range(1, steps + 1), skip=carried
        )  # what session 2 itself rolled out
        assert sorted(trained) == list(remaining), sorted(trained)
        assert trained == _rollouts(straight_dir, remaining)
    else:  # the eval loss is known from step 0 (session 1) to the last step (session 2)
        evals = ("eval_loss_steps", "eval_loss_first", "eval_loss_last")
        assert summary["eval_loss_steps"] == [0, steps], summary["eval_loss_steps"]
        assert [summary[k] for k in evals] == [straight[k] for k in evals], (summary, straight)
