"""One process of a two-process run on this CPU (``tests/test_hosts.py`` starts two).

    JAX_COORDINATOR_ADDRESS=localhost:PORT JAX_NUM_PROCESSES=2 JAX_PROCESS_ID=<0|1> \\
        python tests/hosts_job.py OUTPUT_DIR [dpo|grpo]

Joins the run (:func:`tunixkit.hosts.start`), checks the collectives (:func:`~tunixkit.hosts.agree`
gives process 0's value, :func:`~tunixkit.hosts.host_value` a sharded array whole), then trains
``resume_job``'s DPO run (or its GRPO run: rollouts sampled on every process) into the shared
``OUTPUT_DIR``, as every process of a pod does. Process
1's session clock has run out before the first step, process 0's has no limit: the run must go
on to the end on both (process 0's clock decides), not stop on one and leave the other waiting in
a collective. Process 0 writes the trained LoRA weights, whole, to ``OUTPUT_DIR/weights.npz``.
The last line printed is a JSON summary: the run, its weights digest, the checks. Run without the
variables it is a one-process run (on the devices ``XLA_FLAGS`` gives it).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import sys
import time

from tunixkit import hosts

hosts.start()

import jax  # noqa: E402
import numpy as np  # noqa: E402
import resume_job  # noqa: E402
from flax import nnx  # noqa: E402
from tunix.rl import rl_cluster  # noqa: E402

from tunixkit import runlog, runtime, session, training  # noqa: E402


def main() -> None:
    out, kind = pathlib.Path(sys.argv[1]), (sys.argv[2:] or ["dpo"])[0]
    me = jax.process_index()
    mesh = runtime.make_mesh()
    agreed = [bool(hosts.agree(np.bool_(me == 1))), int(hosts.agree(np.int32(10 + me)))]
    sharded = jax.device_put(
        np.arange(8.0),
        jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(mesh.axis_names)),
    )
    whole = hosts.host_value(sharded).tolist()
    # each process's rows of a global batch, and the global batch tunix makes of them
    rows = hosts.own_rows({"x": np.arange(8)}, mesh)["x"]
    made = jax.make_array_from_process_local_data(
        jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("fsdp")), rows
    )
    # the rollouts tunix's RL cluster scores (the same 8 rows on every process), placed as the
    # global batch its reference pass computes on (_compat.rl_shards_whole_batches)
    with mesh:
        scored = rl_cluster.sharding_utils.shard_input(np.arange(8), ("fsdp",))
    # a file written once: process 0 writes, the other waits for it; a failure there ends both
    hosts.once("write a note", (out / "note.txt").write_text, f"written by process {me}")
    note = (out / "note.txt").read_text()
    try:
        hosts.once("fail on purpose", lambda: 1 / 0)
        failed = ""
    except (ZeroDivisionError, RuntimeError) as e:
        failed = f"{type(e).__name__}: {e}"
    trainer, batches, _, model = resume_job.JOBS[kind](out, mesh)
    # process 1's clock has run out; process 0's has no limit (clocks of their own, in their own
    # folders: only the decision is shared)
    clock = session.Session(out / f"clock{me}", 1e-9 if me == 1 else None, time.time())
    result = training.run(
        trainer, batches, mesh=mesh, metrics_file=out / "metrics.jsonl", session=clock, label=kind
    )
    summary = dataclasses.asdict(result) | {
        "process": me,
        "processes": hosts.count(),
        "devices": jax.device_count(),
        "agreed": agreed,
        "whole": whole,
        "rows": rows.tolist(),
        "made": hosts.host_value(made).tolist(),
        "scored": hosts.host_value(scored).tolist(),
        "note": note,
        "failed": failed,
        "digest": runlog.digest(model),
    }
    # the trained LoRA weights, whole (gathered from every process), in path order
    state = jax.tree_util.tree_flatten_with_path(nnx.state(model, nnx.LoRAParam))[0]
    weights = [hosts.host_value(v) for _, v in sorted(state, key=lambda kv: str(kv[0]))]
    if hosts.is_writer():
        np.savez(out / "weights.npz", *weights)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
