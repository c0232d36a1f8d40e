"""Kill a training process at a known step: the child hangs right after a given checkpoint is
committed (``tests/hang/sitecustomize.py``) and the test SIGKILLs it then. Nothing waits on the
clock, so a busy machine changes how long a test takes, never where the kill lands."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import time

HANG = pathlib.Path(__file__).resolve().with_name("hang")
# A child that has run this long is stuck (a deadlock, a hang step it never reaches): the test
# fails with its log instead of holding CI to its 90-minute limit. Not a pace: the slowest child
# takes a quarter of it on a loaded 2-core machine (tests/budget.py states the per-item budget).
DEADLINE_S = 2400


def xla_flags(devices: int) -> str:
    """``XLA_FLAGS`` for a CPU process of the tests with ``devices`` emulated devices.

    XLA's CPU client runs each device's part of a program on one thread pool, with as many threads
    as devices on a 2-core machine, and compiles on the same pool. A collective waits for every
    device's part; while a compile holds the pool (empty caches, 07's sampling threads) the last
    part can wait past XLA's limit (a warning at 20 s, the abort 40 s later: SIGABRT, "Termination
    timeout for all gather ... only 3 of them arrived", 07's full profile, a cold CI run of
    2026-11-27). The wait is raised to 10 minutes; a true deadlock still ends at
    :data:`DEADLINE_S`."""
    return (
        f"--xla_force_host_platform_device_count={devices} "
        "--xla_cpu_collective_call_terminate_timeout_seconds=600"
    )


# The emulated devices of a notebook kernel under nbval (notebooks/conftest.py) and of the
# no-learning control's runs (scripts/no_learning.py): a sharded mesh (fsdp 2), as on a TPU, at a
# fraction of 4 devices' cost. On a 2-core machine each emulated device's share of a tiny model's
# step is mostly overhead: 01's smoke run took 74 s on 4 devices, 57 on 2 and 43 on 1 (cold caches,
# the machine otherwise idle, 2026-11-28).
NOTEBOOK_DEVICES = 2

# XLA's CPU pool for a child of 2 devices gets the 4 threads a 4-device child has: 2 devices' parts
# and 2 compiles at once (the slack the all-gather abort above lacked).
POOL_THREADS = 4


def cpu_env(devices: int) -> dict:
    """The environment a CPU child of the tests adds to its parent's: CPU only, ``devices`` emulated
    devices, :func:`xla_flags`, and XLA's thread pool at :data:`POOL_THREADS` threads or one per
    device (``PJRT_NPROC``; by default the pool has as many threads as cores or devices)."""
    return {
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": xla_flags(devices),
        "PJRT_NPROC": str(max(POOL_THREADS, devices)),
    }


def notebook_env(devices: int) -> dict:
    """The environment of a notebook run headless on this CPU by a script (papermill): the smoke
    profile, offline, no wandb, :func:`cpu_env`, and the compilation cache the tests share
    (``TUNIXKIT_CACHE``'s ``jax/``, every compile kept)."""
    cache = os.environ.get("TUNIXKIT_CACHE", str(pathlib.Path.home() / ".cache" / "tunixkit"))
    return dict(
        os.environ,
        TUNIXKIT_PROFILE="smoke",
        **cpu_env(devices),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        WANDB_MODE="disabled",
        JAX_COMPILATION_CACHE_DIR=os.environ.get("JAX_COMPILATION_CACHE_DIR", f"{cache}/jax"),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
    )


def free_port() -> int:
    """A free port for a local JAX coordinator below Linux's ephemeral range (32768 up), where
    other processes' own ports (a notebook kernel's) are drawn: a port drawn there was once taken
    by a kernel before the coordinator bound it ("Failed to start RPC server")."""
    for port in range(20000 + os.getpid() % 5000, 32000):
        with socket.socket() as s:
            try:
                s.bind(("localhost", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-32000")


def process_envs(env: dict, processes: int) -> list[dict]:
    """``env`` for each of ``processes`` processes of one JAX run on this machine, joined by a
    coordinator on a :func:`free_port` (:mod:`tunixkit.hosts`' variables); one process: ``env``."""
    # here, not at the top: conftest.py imports this module to set JAX's environment, before
    # anything imports jax (tunixkit does)
    from tunixkit import hosts

    if processes == 1:
        return [env]
    where = f"localhost:{free_port()}"
    return [
        env | {hosts.COORDINATOR: where, hosts.PROCESSES: str(processes), hosts.PROCESS_ID: str(r)}
        for r in range(processes)
    ]


def hang_at(env: dict, step: int, where: str = "") -> dict:
    """``env`` for a child that hangs after saving checkpoint ``step`` (in a folder holding
    ``where``)."""
    return _hooked(env, "TUNIXKIT_TEST_HANG_AT", step, where)


def clock_ends_at(env: dict, step: int, where: str = "") -> dict:
    """``env`` for a child whose session clock runs out once it has saved checkpoint ``step`` (in
    a folder holding ``where``): the session's end as an event, not a time."""
    return _hooked(env, "TUNIXKIT_TEST_CLOCK_ENDS_AT", step, where)


def _hooked(env: dict, variable: str, step: int, where: str) -> dict:
    """``env`` with ``tests/hang/sitecustomize.py`` loaded and ``variable`` set to ``step``."""
    paths = [str(HANG), *filter(None, [env.get("PYTHONPATH")])]
    out = dict(env, PYTHONPATH=os.pathsep.join(paths), **{variable: str(step)})
    if where:
        out["TUNIXKIT_TEST_HANG_IN"] = where
    return out


def wait(proc: subprocess.Popen, log: pathlib.Path) -> int:
    """``proc``'s exit code; a child still running after :data:`DEADLINE_S` is killed and fails
    the test with the end of its log."""
    try:
        return proc.wait(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(
            f"stuck: still running after {DEADLINE_S} s, killed:\n{log.read_text()[-3000:]}"
        ) from None


def kill_when_hanging(proc: subprocess.Popen, log: pathlib.Path, step: int) -> str:
    """SIGKILL ``proc`` once its log (stdout and stderr) says it hangs at ``step``; fail if it
    ends first, or has not got there after :data:`DEADLINE_S`. Returns the log."""
    started = time.monotonic()
    while f"hanging at {step} " not in (text := log.read_text()):
        rc = proc.poll()
        assert rc is None, (
            f"the run ended (exit {rc}) before its checkpoint {step}:\n{text[-3000:]}"
        )
        if time.monotonic() - started > DEADLINE_S:
            proc.kill()
            proc.wait()
            raise AssertionError(
                f"stuck: no checkpoint {step} after {DEADLINE_S} s, killed:\n{text[-3000:]}"
            )
        time.sleep(0.2)
    proc.kill()  # SIGKILL: no cleanup, no final checkpoint
    proc.wait()
    return text
