"""One run over several hosts (a multi-host TPU slice): JAX's multi-controller runtime, one Python
process per host, each running the same notebook or script.

:func:`start` joins the processes (``jax.distributed.initialize``) when the environment says there
are several; every other function works the same in a one-process run, where it costs nothing.
Every process calls the same functions in the same order: :func:`agree` and :func:`host_value`
are collectives, and a process that skips one leaves the others waiting in it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from tunixkit import _compat

__all__ = ["agree", "count", "host_value", "is_writer", "once", "own_rows", "start"]

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

T = TypeVar("T")


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
    _compat.rl_shards_whole_batches()  # and its RL cluster took each process's rollouts as its own
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


def once(what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
    """``fn(*args, **kwargs)`` on process 0 alone (a file written once into the run's shared
    folder: a summary, a plot, the judged copy, an upload), then every process goes on together:
    the others wait for it to finish, so that none reads a file half written, and raise when it
    failed (``what`` names it), so that none waits for ever in a later collective. Returns ``fn``'s
    value on process 0, None on the others; in a one-process run, just ``fn``'s value."""
    if count() == 1:
        return fn(*args, **kwargs)
    result, failed = None, None
    if is_writer():
        try:
            result = fn(*args, **kwargs)
        except BaseException as e:  # told to the others before it is raised here
            failed = e
    if bool(agree(np.bool_(failed is not None))):
        if failed is not None:
            raise failed
        raise RuntimeError(f"process 0 failed to {what}: its log says why")
    return result


def own_rows(batch: Any, mesh: Any, axis: tuple[str, ...] = ("fsdp",)) -> Any:
    """The rows of ``batch`` (a tree of host arrays, the run's global batch) that this process's
    devices hold when the batch is sharded over ``axis`` of ``mesh``: what each process feeds a
    trainer that makes its global batch from every process's part (tunix's ``shard_input``:
    ``jax.make_array_from_process_local_data``). An array whose rows the mesh does not split
    (too few dimensions, rows not divisible by the axis) is kept whole, as tunix then replicates
    it. In a one-process run, ``batch`` itself.

    >>> import jax
    >>> mesh = jax.make_mesh((1,), ("fsdp",))
    >>> own_rows({"x": np.arange(4)}, mesh)["x"].tolist()  # one process holds every row
    [0, 1, 2, 3]
    """
    if count() == 1:
        return batch
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    sharding = NamedSharding(mesh, PartitionSpec(*axis))
    split = int(np.prod([mesh.shape[a] for a in axis]))

    def rows(x: Any) -> Any:
        if not isinstance(x, np.ndarray | jax.Array) or x.ndim < len(axis) or x.shape[0] % split:
            return x
        spans = sorted(
            {
                (index[0].start or 0, x.shape[0] if index[0].stop is None else index[0].stop)
                for index in sharding.addressable_devices_indices_map(x.shape).values()
            }
        )
        if any(a[1] != b[0] for a, b in zip(spans, spans[1:], strict=False)):
            raise ValueError(f"this process's rows of a batch are not contiguous: {spans}")
        return np.asarray(x)[spans[0][0] : spans[-1][1]]

    return jax.tree.map(rows, batch)
