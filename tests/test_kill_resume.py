"""Resume, proven for every trainer: a GRPO, a DPO, a SimPO (06's preference stage), an agentic
GRPO (07's learner) and a distillation run are SIGKILLed right after their checkpoint at step 2 (``tests/killing.py``), run again, and must train exactly the
remaining steps, on the batches an uninterrupted run trained on, and end with the same weights. And the session clock: a run it stops in time ends
with a checkpoint that holds its last step.

Each run is ``tests/resume_job.py`` in its own process (the notebooks' building blocks and
``training.run``); SFT is proven the same way on the notebook itself by ``test_kaggle_replay.py``.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import killing
import pytest

from tunixkit import _compat, session

JOB = pathlib.Path(__file__).with_name("resume_job.py")
STEPS = 6


def _env():
    return dict(
        os.environ,
        **killing.cpu_env(2),
        WANDB_MODE="disabled",
    )


def _run(kind: str, out: pathlib.Path, *extra: str) -> dict:
    res = subprocess.run(
        [sys.executable, str(JOB), kind, str(out), *extra],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def _rows(path: pathlib.Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def _trained(out: pathlib.Path, kind: str, skip: int = 0) -> dict[int, list]:
    """What each step trained on, from the rows written after the first ``skip`` ones."""
    if (
        kind == "grpo"
    ):  # GRPO's rollout log names the questions of every (micro-)batch it rolled out
        steps: dict[int, list] = {}
        for row in _rows(out / "rollouts.jsonl")[skip:]:
            steps.setdefault(row["step"], []).extend(row["questions"])
        return steps
    if kind == "agentic":  # tunix's agentic learner logs no batch: the weights' digest decides
        return {}
    return {row["step"]: [row["batch"]] for row in _rows(out / "trained.jsonl")[skip:]}


@pytest.mark.parametrize("kind", ["grpo", "dpo", "simpo", "agentic", "distill"])
def test_killed_run_resumes_the_remaining_steps_on_the_same_batches(tmp_path, kind):
    straight = _run(kind, tmp_path / "straight")
    assert (straight["resumed_from"], straight["steps"], straight["stopped"]) == (0, STEPS, "done")
    expected = _trained(tmp_path / "straight", kind)
    assert sorted(expected) == ([] if kind == "agentic" else list(range(1, STEPS + 1)))

    out = tmp_path / "killed"
    out.mkdir()
    log = out / "first.log"
    proc = subprocess.Popen(
        [sys.executable, str(JOB), kind, str(out)],
        env=killing.hang_at(_env(), 2),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    killing.kill_when_hanging(proc, log, 2)
    last = session.latest_checkpoint_step(out)
    assert last == 2, last
    before = len(_rows(out / ("rollouts.jsonl" if kind == "grpo" else "trained.jsonl")))
    logged = len(_rows(out / "metrics.jsonl"))

    resumed = _run(kind, out)
    assert (resumed["resumed_from"], resumed["steps"], resumed["stopped"]) == (
        last,
        STEPS,
        "done",
    ), resumed
    again = _trained(out, kind, skip=before)
    assert sorted(again) == ([] if kind == "agentic" else list(range(last + 1, STEPS + 1))), (
        "the rerun trained other steps than the remaining ones"
    )
    assert again == {s: expected[s] for s in again}, (
        "the rerun trained on other batches than an uninterrupted run"
    )
    assert resumed["digest"] == straight["digest"], "the resumed run ended with other weights"
    if kind in ("grpo", "agentic"):  # the rerun's rewards under the steps it trained
        rewarded = {r["step"] for r in _rows(out / "metrics.jsonl")[logged:] if "reward" in r}
        assert rewarded == set(range(last + 1, STEPS + 1)), sorted(rewarded)
    if kind in ("grpo", "agentic"):
        # tunix's LoRA-only RL checkpoints rest out of the judged model's pattern once trained
        for run in (tmp_path / "straight", out):
            assert not list(run.glob("**/actor/*/model_params")), "a look-alike of the judged model"
            assert (run / "checkpoints" / "policy" / str(STEPS) / "model_params").is_dir()
    if kind == "grpo":  # and are woken where tunix restores from: a rerun trains nothing more
        rerun = _run(kind, tmp_path / "straight")
        assert (rerun["resumed_from"], rerun["steps"]) == (STEPS, STEPS), rerun
        assert rerun["digest"] == straight["digest"]


def _tiny_sft(out, steps):
    """A LoRA SFT trainer of the tiny model, its LoRA model and ``steps`` batches (3e-3, the
    warmup-cosine schedule over ``steps``), checkpointing in ``out`` only at the end."""
    from tunix.sft import peft_trainer

    from tunixkit import data, models, testing, training

    lm = models.load_model("tiny-gemma3", verbose=False)
    lora = models.apply_lora(lm.model, rank=4, alpha=8.0, verbose=False)
    records = data.to_records(testing.synthetic_gsm8k(64, seed=3), "s", verbose=False)[0]
    batches = training.sft_dataset(
        [data.sft_pair(r) for r in records],
        lm.tokenizer,
        max_len=144,
        batch_size=4,
        num_batches=steps,
        verbose=False,
    )
    config = training.trainer_config(
        out, max_steps=steps, eval_every=10**6, checkpoint_every=100, description=None
    )
    trainer = peft_trainer.PeftTrainer(
        lora, training.optimizer(3e-3, steps), config
    ).with_gen_model_input_fn(training.model_inputs_fn(lm.tokenizer.pad_id()))
    return trainer, lora, batches


def test_session_clock_stop_leaves_a_checkpoint_of_the_last_step(tmp_path):
    from flax import nnx

    from tunixkit import checkpoints, models, runlog, testing, training

    trainer, lora, batches = _tiny_sft(tmp_path, 10)
    clock = testing.ScriptedClock(stop_at=4)  # stops before the 4th step
    result = training.run(
        trainer, batches, batches[:1], metrics_file=tmp_path / "metrics.jsonl", session=clock
    )
    assert (result.steps, result.stopped) == (3, "session clock"), result
    # the eval loss is measured at the start and at the last step, whatever eval_every says
    assert runlog.read_metrics(tmp_path / "metrics.jsonl")["eval"]["loss"][0].tolist() == [0, 3]
    # the last checkpoint's time is measured for the next reserve
    assert 0 < clock.timings["checkpoint"] < result.seconds, clock.timings
    assert session.latest_checkpoint_step(tmp_path) == 3
    trained = runlog.digest(lora)
    fresh = models.apply_lora(
        models.load_model("tiny-gemma3", verbose=False).model,
        rank=4,
        alpha=8.0,
        seed=7,
        verbose=False,
    )
    checkpoints.restore_state(
        fresh, tmp_path / "checkpoints" / "3" / "model_params", lora_only=True
    )
    assert runlog.digest(fresh) == trained, (
        "the last checkpoint does not hold the last step's weights"
    )
    assert nnx.state(fresh, nnx.LoRAParam)


def test_the_first_steps_pace_ends_the_schedule_where_the_clock_will_stop(tmp_path, capsys):
    """Without a rehearsal, the pace of the first steps sizes the learning-rate schedule: when it
    says fewer steps fit than planned, the schedule ends there (the compiled step reads the new
    horizon: the weights differ from a run whose steps all fit), and the rate has decayed to its
    end by then."""
    from flax import nnx

    from tunixkit import runlog, testing, training

    digests, horizons = [], []
    for more in (100, 2):
        out = tmp_path / str(more)
        trainer, lora, batches = _tiny_sft(out, 12)
        clock = testing.ScriptedClock(more_steps=more)
        result = training.run(
            trainer, batches, metrics_file=out / "metrics.jsonl", session=clock, label="SFT"
        )
        assert (result.steps, result.stopped) == (12, "done"), result
        assert len(clock.paces) == 1 and clock.paces[0] > 0, clock.paces  # asked once
        horizons.append(training.schedule_horizon(trainer))
        digests.append(runlog.digest(lora))
        # each step's row has the rate its update used: the schedule's end once it has passed
        steps, rates = runlog.read_metrics(out / "metrics.jsonl")["train"]["learning_rate"]
        assert steps.tolist() == list(range(1, 13)), steps
        assert rates.max() == pytest.approx(3e-3, rel=0.02), rates
        ended = [r == pytest.approx(3e-4, rel=1e-5) for r in rates]
        assert ended == [s > horizons[-1] for s in steps], (horizons[-1], rates)
        said = capsys.readouterr().out
        if more == 2:  # asked before the 6th step (5 done): steps 1-2 compile, 3-5 give the pace
            assert horizons[-1] == 5 + 2, said
            assert "about 7 of the 12 planned steps fit the session" in said, said
            assert "schedule now ends at step 7 (was 12)" in said, said
            assert training.learning_rate(trainer) == pytest.approx(3e-4, rel=1e-5)
        else:
            assert "the learning-rate schedule's 12 steps fit the session" in said, said
        assert nnx.state(lora, nnx.LoRAParam)
    assert horizons[0] == 12, horizons
    assert digests[0] != digests[1], "the new horizon did not reach the compiled step"


def test_a_grpo_learners_schedule_is_ended_by_the_pace_through_its_actor(tmp_path, capsys):
    """GRPO: the pace of the first steps reaches the actor's optimizer, between its updates."""
    import resume_job

    from tunixkit import runlog, runtime, testing, training

    mesh = runtime.make_mesh()
    learner, batches, _, _ = resume_job.grpo(tmp_path, mesh)
    clock = testing.ScriptedClock(more_steps=1)
    result = training.run(
        learner, batches, mesh=mesh, metrics_file=tmp_path / "m.jsonl", session=clock, label="GRPO"
    )
    said = capsys.readouterr().out
    assert (result.steps, result.stopped) == (resume_job.STEPS, "done"), result
    fit = int(re.search(rf"about (\d+) of the {resume_job.STEPS} planned steps fit", said)[1])
    assert training.schedule_horizon(learner) == fit < resume_job.STEPS, said
    assert training.learning_rate(learner) == pytest.approx(3e-4, rel=1e-5)  # decayed to its end
    # the actor's rate of each update is logged (with its loss), ending where the schedule does
    steps, rates = runlog.read_metrics(tmp_path / "m.jsonl")["train"]["learning_rate"]
    assert len(steps) == resume_job.STEPS * _compat.updates_per_step(learner), steps
    assert rates.max() > rates[-1] == pytest.approx(3e-4, rel=1e-5), rates


@pytest.mark.parametrize("horizon", [1, 2, 7, 12, 100, 3000])
def test_the_schedule_is_optax_warmup_cosine_on_the_device_and_on_the_host(horizon):
    """training.schedule_rate (traced in the step, and in numpy for the logged learning rate) gives
    optax's warmup-cosine values at every update, its horizon a number in the state."""
    import jax.numpy as jnp
    import numpy as np
    import optax

    from tunixkit import training

    peak, ratio = 3e-3, 0.1
    warmup = max(1, int(ratio * horizon))
    reference = optax.warmup_cosine_decay_schedule(
        0.0, peak, warmup, max(horizon, warmup + 1), end_value=0.1 * peak
    )
    counts = np.arange(horizon + 5)
    want = np.array([float(reference(c)) for c in counts])
    for xp in (jnp, np):
        got = np.asarray(training.schedule_rate(peak, ratio, counts, horizon, xp=xp))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9)
