"""One run over several hosts (a multi-host TPU slice): JAX's multi-controller runtime, one Python
process per host, each running the same notebook or script.

:func:`start` joins the processes (``jax.distributed.initialize``) when the environment says there
are several; every other function works the same in a one-process run, where it costs nothing.
Every process calls the same functions in the same order: :func:`agree` and :func:`host_value`
are collectives, and a process that skips one leaves the others waiting in it.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from tunixkit import _compat

__all__ = ["agree", "count", "host_value", "is_writer", "start"]

# The usual coordinator variables (as ``jax.distributed.initialize`` reads them on a cluster it
# does not detect itself): where process 0 listens, how many processes, and this one's index.
COORDINATOR, PROCESSES, PROCESS_ID = (
    "JAX_COORDINATOR_ADDRESS",
    "JAX_NUM_PROCESSES",
    "JAX_PROCESS_ID",
)
# Seconds without a process's heartbeat after which the others end the run (a process killed or
# preempted: JAX's coordinator says "Task N heartbeat timeout"); unset: JAX's default.
HEARTBEAT = "TUNIXKIT_HEARTBEAT_SECONDS"


def wanted(environ: dict[str, str] | None = None) -> bool:
    """Whether the environment asks for several processes: the coordinator variables with more
    than one process, or a TPU slice of several hosts (``TPU_WORKER_HOSTNAMES`` naming more than
    one, as a TPU VM of a multi-host slice has it)."""
    env = os.environ if environ is None else environ
    if int(env.get(PROCESSES, "1") or 1) > 1:
        return True
    workers = [w for w in env.get("TPU_WORKER_HOSTNAMES", "").split(",") if w.strip()]
    return len(workers) > 1


def start(environ: dict[str, str] | None = None) -> bool:
    """Join the run's processes when the environment asks for several (:func:`wanted`); before any
    other JAX call. On a TPU slice JAX finds the coordinator itself; elsewhere the coordinator
    variables say it (CPU processes talk through gloo). A process that dies ends the others'
    run once its heartbeat has been missing ``$TUNIXKIT_HEARTBEAT_SECONDS`` (JAX's default: 100);
    a rerun of every process resumes from the last checkpoint. Returns whether it joined; a second
    call does nothing."""
    import jax

    env = os.environ if environ is None else environ
    if not wanted(env):
        return False
    if jax.distributed.is_initialized():
        return True
    # how long the others wait for a silent process before the run ends (JAX's default: 100 s)
    heartbeat = {"heartbeat_timeout_seconds": int(env[HEARTBEAT])} if env.get(HEARTBEAT) else {}
    if env.get(COORDINATOR):
        if env.get("JAX_PLATFORMS", "") == "cpu":
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(
            coordinator_address=env[COORDINATOR],
            num_processes=int(env[PROCESSES]),
            process_id=int(env[PROCESS_ID]),
            **heartbeat,
        )
    else:
        jax.distributed.initialize(**heartbeat)  # a TPU slice: its metadata names the hosts
    _compat.sampler_fetches_whole()  # tunix's sampler fetches its tokens with jax.device_get
    return True


def count() -> int:
    """How many processes the run has (1 when it is one process)."""
    import jax

    return jax.process_count()


def is_writer() -> bool:
    """Whether this process writes the run's files that are written once (summaries, plots,
    exports, the judged copy, uploads): process 0."""
    import jax

    return jax.process_index() == 0


def agree(value: Any) -> Any:
    """Process 0's ``value`` (a bool, number or array, or a tree of them), on every process: a
    decision taken once (stop now, skip a stage), so that no process waits in a collective that
    another has left. A collective: every process calls it."""
    if count() == 1:
        return value
    from jax.experimental import multihost_utils

    return multihost_utils.broadcast_one_to_all(value)


def host_value(x: Any) -> np.ndarray:
    """``x`` (a ``jax.Array``) whole, as a NumPy array on this host, also when its shards lie on
    other hosts' devices (then gathered: a collective, every process calls it)."""
    return np.asarray(_compat.whole(x))
