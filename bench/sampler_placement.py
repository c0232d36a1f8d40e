"""Sampling with the batch split over the mesh (``_compat.BatchShardedSampler``, what
``evaluation.make_sampler`` builds) against tunix's own ``Sampler``, whose unplaced state makes every
device compute every row outside a ``with mesh:``.

Two measurements:

- **time, here** (default): the smoke model on 4 emulated CPU devices (the CI notebooks' mesh when
  measured; 2 since 2026-11-28), at the judge's former sampling shapes (:data:`JUDGE`: 16 prompts
  near 2,048 tokens, 16 greedy tokens) and an evaluation's (32 prompts of a few hundred tokens, 64
  tokens, greedy). Each variant is warmed once (its compile), then timed ``--repeats`` rounds,
  interleaved (``bench/_repeats.py``); the texts of both must be identical. Target: the split
  sampler at most ``TARGET`` of tunix's time (median of the per-round ratios, its whole interval).
- **memory, on a TPU's compiler** (``--tpu-aot``, libtpu installed as in ``bench/memory_plan.py``):
  the judge's prefill for gemma-3-1b on a v5e-8 (``v5e:2x4``), compiled both ways (tunix's own needs
  more temporary memory than the chip has: the compile fails, and is recorded as such), and 03's
  held-out preference scoring (``preferences.sequence_logps``) with its rows unplaced and split.

    .venv/bin/python bench/sampler_placement.py
    PYTHONPATH=$PWD /tmp/tpuaot/venv/bin/python bench/sampler_placement.py --tpu-aot

Since 2026-11-28 (tenth session) the split sampler's prefill also projects the last prompt position
only (``_compat.prefill_last_position``; measured on its own by ``bench/prefill_last_position.py``):
a rerun measures both changes together; the committed results predate it.

Writes ``bench/results/sampler_placement.json`` (``sampler_placement_tpu_aot.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import random
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench/_repeats.py
RESULTS = HERE / "results"
TARGET = 0.8  # the split sampler's time over tunix's, at most
# The judge's sampling shapes when it wrote its score greedily (rows, prompt limit, new tokens); it
# now reads its score digits' probabilities in one forward pass (evaluation.ChoiceScorer), but
# evaluations and GRPO's rollouts still sample this way.
JUDGE = (16, 2048, 16)
WORDS = "the a model answer question summary river energy cell proof code list idea story".split()


def _time_shape(loaded, batch: list[str], limit: int, steps: int, repeats: int) -> dict:
    """Both samplers on one batch: warmed once, then ``repeats`` interleaved rounds."""
    import _repeats
    from tunix.generate import sampler as sampler_lib

    from tunixkit import _compat

    cache = sampler_lib.CacheConfig(
        cache_size=limit + steps,
        num_layers=loaded.config.num_layers,
        num_kv_heads=loaded.config.num_kv_heads,
        head_dim=loaded.config.head_dim,
    )
    kinds = {"tunix": sampler_lib.Sampler, "split": _compat.BatchShardedSampler}
    samplers = {k: cls(loaded.model, loaded.tokenizer, cache) for k, cls in kinds.items()}
    texts = {}

    def call(kind: str, _round: int = -1) -> float:
        t0 = time.perf_counter()
        result = samplers[kind](
            batch,
            max_generation_steps=steps,
            max_prompt_length=limit,
            eos_tokens=loaded.eos_ids,
            temperature=0.0,
            echo=False,
        )
        texts[kind] = result.text
        return time.perf_counter() - t0

    first = {kind: call(kind) for kind in kinds}  # compiles
    seconds = _repeats.interleaved(list(kinds), repeats, call)
    decided = _repeats.decide(seconds["split"], seconds["tunix"], target=TARGET)
    return {
        "rows": len(batch),
        "prompt_tokens": limit,
        "new_tokens": steps,
        "seconds": seconds,
        "first_call_s": first,
        "identical_texts": texts["split"] == texts["tunix"],
        **decided,
    }


def measure_time(repeats: int) -> dict:
    import _repeats

    from tunixkit import models, runtime

    loaded = models.load_model("tiny-gemma3-sft", mesh=runtime.make_mesh())
    rng = random.Random(0)

    def prompts(n: int, words: tuple[int, int]) -> list[str]:
        return [
            loaded.chat.prompt(" ".join(rng.choice(WORDS) for _ in range(rng.randint(*words))))
            for _ in range(n)
        ]

    rows, p, t = JUDGE
    shapes = {  # name: (prompts, prompt limit, new tokens)
        "judge": (prompts(rows, (600, 700)), p, t),
        "evaluation": (prompts(32, (20, 45)), 256, 64),
    }
    out: dict = {}
    for name, (batch, limit, steps) in shapes.items():
        out[name] = found = _time_shape(loaded, batch, limit, steps, repeats)
        print(
            _repeats.describe(f"{name}, split/tunix", found),
            f"identical texts: {found['identical_texts']}",
            flush=True,
        )
    return out


def measure_memory(topology: str, layers: int) -> dict:
    from tunixkit import _compat
    from tunixkit.tools import memplan

    mesh = memplan.tpu_slice_mesh(topology)
    judge, _, cfg = memplan._abstract("gemma-3-1b-it", layers, mesh)
    rows, p, t = JUDGE
    out: dict = {}
    for kind in ("tunix", "split"):
        sampler, state = memplan._sampler(
            judge,
            cfg,
            rows,
            p,
            t,
            p + t,
            eos=[memplan.EOS_ID],
            temperature=0.0,
            top_p=None,
            top_k=None,
            last=kind == "split",  # BatchShardedSampler's prefill projects the last position only
        )
        if kind == "split":
            state = _compat.place_sampling_batch(state, mesh)
        params = sampler._flattened_transformer_state
        try:
            compiled = sampler._compiled_prefill_fn.lower(params, state, None, echo=False).compile()
            m = compiled.memory_analysis()
            out[kind] = {"temp_gib": m.temp_size_in_bytes / 2**30, "compiled": True}
        except Exception as e:  # the TPU compiler refuses a program over the chip's memory
            out[kind] = {"compiled": False, "error": str(e).splitlines()[0][:300]}
        print(f"{topology}, {layers} layers, judge_prefill, {kind}: {out[kind]}", flush=True)
    return {
        "topology": topology,
        "layers": layers,
        "judge_prefill": out,
        "heldout_logps": _heldout_logps(judge, mesh, topology, layers),
    }


def _heldout_logps(model, mesh, topology: str, layers: int) -> dict:
    """03's held-out preference scoring (``preferences.sequence_logps``: tunix's ``compute_logps``)
    at the full preset's shapes, its rows unplaced and split."""
    import jax
    import jax.numpy as jnp
    from flax import nnx
    from tunix.sft.dpo import dpo_trainer

    from tunixkit import _compat, recipes

    rec = recipes.DPO.full()
    rows, p, c = 2 * rec.batch_size, rec.max_prompt_length, rec.max_response_length
    graphdef, state = nnx.split(model)

    def logps(state, ids, positions, attn, completion_mask):
        merged = nnx.merge(graphdef, state)
        return dpo_trainer.compute_logps(merged, ids, positions, attn, c, completion_mask)

    s = jax.ShapeDtypeStruct
    args = (
        s((rows, p + c), jnp.int32),
        s((rows, p + c), jnp.int32),
        s((rows, p + c, p + c), jnp.bool_),
        s((rows, c), jnp.int32),
    )
    out: dict = {"shapes": f"{rows} rows of {p} + {c}"}
    for kind in ("tunix", "split"):
        placed = _compat.split_rows(args, mesh) if kind == "split" else args
        m = jax.jit(logps).lower(state, *placed).compile().memory_analysis()
        out[kind] = {"temp_gib": m.temp_size_in_bytes / 2**30, "compiled": True}
        print(f"{topology}, {layers} layers, heldout_logps, {kind}: {out[kind]}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--tpu-aot", action="store_true", help="compile the judge's prefill for a v5e-8"
    )
    ap.add_argument("--topology", default="v5e:2x4")
    ap.add_argument("--layers", type=int, default=26)
    args = ap.parse_args()
    if args.tpu_aot:
        os.environ["JAX_PLATFORMS"] = "cpu"
        found = measure_memory(args.topology, args.layers)
        path = RESULTS / "sampler_placement_tpu_aot.json"
        ok = found["judge_prefill"]["split"]["compiled"]
    else:
        os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        found = {"devices": "4 emulated CPU devices", "cpus": os.cpu_count()}
        found["shapes"] = measure_time(args.repeats)
        path = RESULTS / "sampler_placement.json"
        ok = all(s["verdict"] == "met" and s["identical_texts"] for s in found["shapes"].values())
    found["host"] = platform.processor() or platform.machine()
    found["date"] = time.strftime("%Y-%m-%d")
    path.write_text(json.dumps(found, indent=1) + "\n")
    print(f"wrote {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
