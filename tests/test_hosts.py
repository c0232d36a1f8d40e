"""Several processes, one run (tunixkit.hosts): JAX's multi-controller runtime on this CPU.

Two processes of 2 emulated devices each, joined by a local coordinator, train ``resume_job``'s DPO
run into one shared folder (``tests/hosts_job.py``), against the same run in one process on 4
devices: the trained weights must match within float tolerance (the collectives' order of sums
differs), one metrics file is written (process 0's), and a session clock that has run out on
process 1 alone must not stop it (process 0 decides for both; stopping alone would leave process 0
waiting in the next step's collective). Process 1 then SIGKILLed after a checkpoint
(``tests/killing.py``): process 0 ends (JAX's heartbeat names the dead process), and a rerun of
both resumes both from that checkpoint to the same weights. A GRPO run samples its rollouts on
both processes. The one-process behaviour of every function is checked in the process of the test
itself.
"""

import json
import os
import pathlib
import subprocess
import sys

import jax
import killing
import numpy as np

from tunixkit import hosts

JOB = os.path.join(os.path.dirname(__file__), "hosts_job.py")


def test_one_process_needs_no_coordinator():
    assert not hosts.wanted({}) and not hosts.wanted({hosts.PROCESSES: "1"})
    assert hosts.wanted({hosts.PROCESSES: "2"})
    assert hosts.wanted({"TPU_WORKER_HOSTNAMES": "t1k-0,t1k-1"})  # a multi-host TPU slice
    assert not hosts.wanted({"TPU_WORKER_HOSTNAMES": "localhost"})  # one TPU VM
    assert hosts.start({}) is False
    assert hosts.count() == 1 and hosts.is_writer()
    assert hosts.agree(3) == 3 and hosts.agree(None) is None  # nothing to agree on
    assert hosts.once("add", lambda a, b: a + b, 2, b=3) == 5  # run here, its value returned
    x = jax.numpy.arange(4.0)
    np.testing.assert_array_equal(hosts.host_value(x), np.arange(4.0))


def _start(out, devices: int, processes: int, kind: str = "dpo", hang_at: dict | None = None):
    """``hosts_job`` (``kind``'s run) in ``processes`` processes of ``devices`` devices each, into
    ``out``; ``hang_at``: {process: checkpoint step it hangs after}. [(process, its log)]."""
    # a killed process ends the others' run after 30 s without its heartbeat (JAX's default: 100)
    env = os.environ | killing.cpu_env(devices) | {"WANDB_MODE": "disabled", hosts.HEARTBEAT: "30"}
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [os.path.dirname(__file__), env.get("PYTHONPATH")])
    )
    jobs = []
    for rank, mine in enumerate(killing.process_envs(env, processes)):
        if rank in (hang_at or {}):
            mine = killing.hang_at(mine, hang_at[rank])
        log = pathlib.Path(out) / f"process{rank}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("w") as f:
            job = subprocess.Popen(
                [sys.executable, JOB, str(out), kind], env=mine, stdout=f, stderr=subprocess.STDOUT
            )
        jobs.append((job, log))
    return jobs


def _finish(jobs) -> list[dict]:
    """The summaries of ``jobs``, each of which must end well."""
    summaries = []
    for rank, (job, log) in enumerate(jobs):
        rc = killing.wait(job, log)  # a guard against a hang, not a pace
        assert rc == 0, f"process {rank} failed:\n{log.read_text()[-4000:]}"
        summaries.append(json.loads(log.read_text().strip().splitlines()[-1]))
    return summaries


def _run(out, devices: int, processes: int, kind: str = "dpo") -> list[dict]:
    return _finish(_start(out, devices, processes, kind))


def test_two_processes_train_what_one_process_trains(tmp_path):
    (one,) = _run(tmp_path / "one", devices=4, processes=1)
    two = _run(tmp_path / "two", devices=2, processes=2)
    assert one["devices"] == 4 and one["processes"] == 1
    assert [s["process"] for s in two] == [0, 1]
    assert all(s["processes"] == 2 and s["devices"] == 4 for s in two)
    # the collectives: process 0's values on both; a sharded array whole on both
    assert [s["agreed"] for s in two] == [[False, 10], [False, 10]]
    assert all(s["whole"] == list(range(8)) for s in two)
    # each process feeds its own rows of a batch; the global batch made of them is the whole one
    assert [s["rows"] for s in two] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert all(s["made"] == list(range(8)) for s in two)
    # the rollouts every process holds whole are the global batch GRPO's reference pass scores,
    # not one batch per process (tunix's shard_input made 16 rows of these 8)
    assert all(s["scored"] == list(range(8)) for s in two) and one["scored"] == list(range(8))
    # hosts.once: process 0 wrote the note, process 1 read it whole; a failure ends both
    assert [s["note"] for s in two] == ["written by process 0"] * 2
    assert two[0]["failed"] == "ZeroDivisionError: division by zero"
    assert two[1]["failed"] == "RuntimeError: process 0 failed to fail on purpose: its log says why"
    # process 1's clock had run out: it trained on to the end with process 0, as one process does
    assert [(s["steps"], s["stopped"]) for s in two] == [(6, "done"), (6, "done")]
    assert (one["steps"], one["stopped"]) == (6, "done")
    assert two[0]["digest"] == two[1]["digest"]  # both hold the same weights
    a = np.load(tmp_path / "one" / "weights.npz")
    b = np.load(tmp_path / "two" / "weights.npz")
    assert list(a) == list(b) and len(a) > 0
    for key in a:
        np.testing.assert_allclose(b[key], a[key], rtol=1e-4, atol=1e-5, err_msg=key)
    # one writer: one metrics row a step, and one checkpoint folder for both processes
    rows = [json.loads(line) for line in (tmp_path / "two" / "metrics.jsonl").open()]
    assert [r["step"] for r in rows if r["mode"] == "train"] == list(range(1, 7))
    assert sorted(p.name for p in (tmp_path / "two" / "checkpoints").iterdir()) == ["4", "6"]
    assert not (tmp_path / "two" / "clock1" / "timings.json").exists()

    # process 1 killed after checkpoint 2: process 0 does not wait for it for ever, and a rerun
    # of both resumes both from step 2, to the weights of the run that was not killed
    killed = _start(tmp_path / "killed", devices=2, processes=2, hang_at={1: 2})
    killing.kill_when_hanging(*killed[1], 2)
    (survivor, log) = killed[0]
    assert killing.wait(survivor, log) != 0
    assert "Task 1 heartbeat timeout" in log.read_text()  # JAX's word: the other process died
    again = _run(tmp_path / "killed", devices=2, processes=2)
    assert [(s["resumed_from"], s["steps"], s["stopped"]) for s in again] == [(2, 6, "done")] * 2
    assert [s["digest"] for s in again] == [two[0]["digest"]] * 2


def test_two_processes_sample_grpo_rollouts(tmp_path):
    """Every process samples the same rollouts (tunix's sampler fetches them whole:
    ``_compat.sampler_fetches_whole``) and trains the same GRPO steps to the same weights, those
    of one process on 4 devices: the same rewards each step, and the same LoRA weights within
    float tolerance."""
    (one,) = _run(tmp_path / "one", devices=4, processes=1, kind="grpo")
    two = _run(tmp_path / "two", devices=2, processes=2, kind="grpo")
    assert [(s["steps"], s["stopped"]) for s in two] == [(6, "done"), (6, "done")]
    assert (one["steps"], one["stopped"]) == (6, "done")
    assert two[0]["digest"] == two[1]["digest"]

    def rewards(run: str) -> list[tuple[int, float]]:
        rows = [json.loads(line) for line in (tmp_path / run / "metrics.jsonl").open()]
        return [(r["step"], r["reward"]) for r in rows if "reward" in r]

    # each step's rollouts scored, written once; the same samples as one process's (their rewards)
    assert [step for step, _ in rewards("two")] == list(range(1, 7)), rewards("two")
    np.testing.assert_allclose(
        [r for _, r in rewards("two")], [r for _, r in rewards("one")], atol=1e-6
    )
    a = np.load(tmp_path / "one" / "weights.npz")
    b = np.load(tmp_path / "two" / "weights.npz")
    assert list(a) == list(b) and len(a) > 0
    for key in a:
        np.testing.assert_allclose(b[key], a[key], rtol=1e-4, atol=1e-5, err_msg=key)
