"""How fast this machine's device reads memory, multiplies matrices and decodes, and how close
decoding comes to the bound that memory reads set.

Parts, each writing its figures to the results file as soon as it finishes (a run cut short keeps
what it measured):

- ``bandwidth``: jitted passes over a ``--copy-mib`` float32 array, best of ``--repeats``: a copy
  (read and written once), a sum and a matrix-vector product (read once); the fastest read is the
  bound a decode step is held to.
- ``matmul``: a jitted ``--matmul`` square matmul in bfloat16 and float32, best of ``--repeats``:
  2 n^3 flops per product.
- ``decode``: tunix's sampler as tunixkit builds it (``evaluation.make_sampler``), greedy, prompts of
  ``--prompt`` tokens, at each batch of ``--batches``: the seconds of one decode step, from two calls
  that differ only in their number of new tokens (``--new`` and 4 x ``--new``; the prefill and the
  call's fixed costs cancel), the stop token one the model never writes. Beside each: the bound that
  reading every weight once per step sets (the weights' bytes over the ``bandwidth`` part's figure),
  the step's share of it, and a least-squares fit ``step = a + b x batch`` (a: the per-step cost of
  reading the weights and of the loop; b: each row's).

Models: ``--model gemma-3-270m`` (the real checkpoint, installed from the package index: this CPU),
``gemma-3-1b`` (random weights at the real shape; the real vocabulary and tokenizer where the
270M's package is installed, else the smoke tokenizer's: for a lent GPU or TPU), or
``tiny`` (the smoke model, seconds: the test's mode).

    .venv/bin/python bench/speed.py --model gemma-3-270m           # this CPU, ~5 minutes
    .venv/bin/python bench/speed.py --model tiny --out /tmp/s.json  # tests/test_speed.py

Writes ``bench/results/speed_<device kind>.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
WORDS = "the a model answer question summary river energy cell proof code list idea story".split()


def _best(fn, repeats: int) -> float:
    """The fastest of ``repeats`` timed calls of ``fn`` (after one warm-up call: its compile)."""
    import jax

    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return min(times)


def bandwidth(mib: int, repeats: int) -> dict:
    """Bytes a second three ways over a ``mib`` float32 array: a copy (read once, written once), a
    sum (read once) and a matrix-vector product (read once, as a decode step reads its weights);
    ``gb_per_s``, the bound a decode step is held to, is the fastest read."""
    import jax
    import jax.numpy as jnp

    keys = jax.random.split(jax.random.PRNGKey(0))
    x = jax.random.uniform(keys[0], (mib * 2**20 // 4 // 4096, 4096), jnp.float32)
    v = jax.random.uniform(keys[1], (4096,), jnp.float32)
    kinds = {
        "copy": (jax.jit(lambda a: a + 0.0), 2 * x.nbytes),
        "sum": (jax.jit(jnp.sum), x.nbytes),
        "matvec": (jax.jit(lambda a: a @ v), x.nbytes),
    }
    out: dict = {"mib": mib}
    for name, (fn, moved) in kinds.items():
        seconds = _best(lambda fn=fn: fn(x), repeats)
        out[name] = {"seconds": seconds, "gb_per_s": moved / seconds / 1e9}
    out["gb_per_s"] = max(out["sum"]["gb_per_s"], out["matvec"]["gb_per_s"])
    return out


def matmul(n: int, repeats: int) -> dict:
    import jax
    import jax.numpy as jnp

    out = {"n": n}
    for dtype in ("bfloat16", "float32"):
        a = jnp.ones((n, n), dtype)
        mm = jax.jit(lambda a: a @ a)
        seconds = _best(lambda mm=mm, a=a: mm(a), repeats)
        out[dtype] = {"seconds": seconds, "tflop_per_s": 2 * n**3 / seconds / 1e12}
    return out


def _load(model: str):
    from tunixkit import models, runtime

    if model == "tiny":
        return models.load_model("tiny-gemma3-sft", mesh=runtime.make_mesh(), verbose=False)
    if model == "gemma-3-270m":
        return models.load_model("gemma-3-270m", source="package", verbose=False)
    if model == "gemma-3-1b":  # random weights at the real shape
        import dataclasses

        from tunix.models.gemma3 import model as g3

        from tunixkit import testing

        cfg = g3.ModelConfig.gemma3_1b_it()
        try:  # the real 262,144-token tokenizer, where the 270M's package is installed
            words = models.load_model("gemma-3-270m", source="package", verbose=False)
        except Exception as e:  # noqa: BLE001 - a device machine without the package
            print(f"no Gemma 3 tokenizer ({e}); the smoke tokenizer and its vocabulary instead")
            words = models.load_model("tiny-gemma3-sft", verbose=False)
            cfg = dataclasses.replace(cfg, num_embed=words.config.num_embed)
        return dataclasses.replace(words, model=testing.random_model(cfg), config=cfg)
    raise ValueError(f"--model {model!r}: expected tiny, gemma-3-270m or gemma-3-1b")


def decode(model: str, batches: list[int], prompt: int, new: int, gb_per_s: float | None) -> dict:
    import jax
    import numpy as np
    from flax import nnx

    from tunixkit import evaluation

    loaded = _load(model)
    weights = sum(x.nbytes for x in jax.tree.leaves(nnx.state(loaded.model, nnx.Param)))
    tok = loaded.tokenizer
    text = " ".join(WORDS[i % len(WORDS)] for i in range(prompt))
    ids = tok.encode(text)[: prompt - 8]
    prompt_text = tok.decode(ids)
    never = int(loaded.config.num_embed) - 1  # a stop token no greedy step writes here
    sampler = evaluation.make_sampler(loaded, prompt + 4 * new)
    rows = []
    for batch in batches:

        def call(steps: int, batch: int = batch) -> float:
            t0 = time.perf_counter()
            sampler(
                [prompt_text] * batch,
                max_generation_steps=steps,
                max_prompt_length=prompt,
                eos_tokens=[never],
                temperature=0.0,
                echo=False,
            )
            return time.perf_counter() - t0

        call(new), call(4 * new)  # compiles
        short, long = min(call(new) for _ in range(2)), min(call(4 * new) for _ in range(2))
        step = max(long - short, 1e-9) / (3 * new)
        row = {"batch": batch, "step_s": step, "tokens_per_s": batch / step}
        if gb_per_s:
            bound = weights / (gb_per_s * 1e9)
            row |= {"bound_step_s": bound, "share_of_bound": bound / step}
        rows.append(row)
        print(f"decode, batch {batch}: {row}", flush=True)
    b = np.array([r["batch"] for r in rows], float)
    s = np.array([r["step_s"] for r in rows])
    fit = np.polyfit(b, s, 1) if len(rows) > 1 else (0.0, s[0])
    return {
        "model": model,
        "params": int(sum(x.size for x in jax.tree.leaves(nnx.state(loaded.model, nnx.Param)))),
        "weight_bytes": int(weights),
        "prompt": prompt,
        "new_tokens": [new, 4 * new],
        "rows": rows,
        "fit": {"a_s": float(fit[1]), "b_s_per_row": float(fit[0])},
    }


def main() -> int:
    import jax

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gemma-3-270m")
    ap.add_argument("--parts", default="bandwidth,matmul,decode")
    ap.add_argument("--copy-mib", type=int, default=1024)
    ap.add_argument("--matmul", type=int, default=2048)
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--new", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    device = jax.devices()[0]
    kind = getattr(device, "device_kind", device.platform).replace(" ", "_").lower()
    out = pathlib.Path(args.out or RESULTS / f"speed_{kind}.json")
    result: dict = {
        "device": f"{device.device_kind} x{jax.device_count()} ({jax.default_backend()})",
        "cores": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
    }

    def save() -> None:
        out.write_text(json.dumps(result, indent=1) + "\n")

    parts = args.parts.split(",")
    if "bandwidth" in parts:
        result["bandwidth"] = bandwidth(args.copy_mib, args.repeats)
        print("bandwidth:", result["bandwidth"], flush=True)
        save()
    if "matmul" in parts:
        result["matmul"] = matmul(args.matmul, args.repeats)
        print("matmul:", result["matmul"], flush=True)
        save()
    if "decode" in parts:
        gb = result.get("bandwidth", {}).get("gb_per_s")
        batches = [int(b) for b in args.batches.split(",")]
        result["decode"] = decode(args.model, batches, args.prompt, args.new, gb)
        print("decode fit:", result["decode"]["fit"], flush=True)
        save()
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
