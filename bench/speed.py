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

- ``grpo``: whole GRPO steps of 02's preset (``--grpo-preset``: ``full``, 4 prompts x G=4 with
  updates of 2, or ``one_chip``) at ``--grpo-prompt`` prompt and ``--grpo-new`` answer tokens,
  through ``rl.build_grpo`` with tunix's perf tracer (``profiling.StepTrace``): each step's
  seconds split into rollout, reference log-probabilities, rewards, update and the rest, and the
  peak memory after each of the rollout, the reference pass and the update. The reference pass is
  waited for before its memory is read (tunix dispatches it without waiting), so a step here is
  not overlapped as in a notebook; the first step compiles and is left out of the medians.
- ``sft``: 01's QLoRA (nf4) step (``bench/sft_step.py``'s program: ``--sft-batch`` rows of
  ``--sft-seq`` random tokens, rank ``--sft-rank``) on the model's shape with random weights:
  tokens a second, model FLOP/s and MFU against the ``matmul`` part's bf16 figure. The FLOPs are
  the dense-training convention with a frozen base: 4 x parameters per token (the forward and the
  activations' gradients; the frozen weights get no gradient, the adapters' share is left out) plus
  attention's scores as PaLM counts them, 12 x layers x heads x head_dim x sequence per token (no
  causal or sliding-window discount).
- ``plan``: ``tunixkit.tools.memplan``'s plan of the same two programs compiled for this device
  (one device), beside the peaks the ``grpo`` and ``sft`` parts measured.
- ``projection``: the ``grpo`` part's step projected onto a Kaggle v5e-8 from the figures above;
  its assumptions are written into the file beside it.

``grpo``, ``sft`` and ``plan`` each run in a process of their own, so that each peak is their own.

Models: ``--model gemma-3-270m`` (the real checkpoint, installed from the package index: this CPU),
``gemma-3-1b`` (random weights at the real shape; the real vocabulary and tokenizer where the
270M's package is installed, else the smoke tokenizer's: for a lent GPU or TPU), or
``tiny`` (the smoke model, seconds: the test's mode).

    .venv/bin/python bench/speed.py --model gemma-3-270m           # this CPU, ~5 minutes
    .venv/bin/python bench/speed.py --model tiny --out /tmp/s.json  # tests/test_speed.py
    python3 bench/speed.py --model gemma-3-1b --parts bandwidth,matmul,decode \
        --batches 1,8,32,128 --prompt 256 --new 192       # a lent GPU, call 1
    python3 bench/speed.py --model gemma-3-1b --parts grpo,sft,plan,projection --resume
                                                          # call 2 (bench/device/speed.sh)

Writes ``bench/results/speed_<device kind>.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

BENCH = pathlib.Path(__file__).resolve().parent
RESULTS = BENCH / "results"
# tunixkit's ids of the models the sft and plan parts build: (SFT's, GRPO's)
MODEL_IDS = {
    "tiny": ("tiny-gemma3", "tiny-gemma3-sft"),
    "gemma-3-270m": ("gemma-3-270m", "gemma-3-270m"),
    "gemma-3-1b": ("gemma-3-1b-it", "gemma-3-1b-it"),
}
# A Kaggle v5e-8 as the projection takes it: Google's published per-chip figures
V5E = {"chips": 8, "hbm_gb_per_s": 819.0, "bf16_tflop_per_s": 197.0}
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


def _load(model: str, tokenizer_dir: str | None = None):
    """The model of ``--model``; for ``gemma-3-1b``, the real Gemma 3 tokenizer from
    ``tokenizer_dir`` (a folder with ``tokenizer.model``: a lent machine, which cannot install the
    270M's package, is given the file) or from the 270M's package."""
    from tunixkit import models, runtime, tokenizer

    if model == "tiny":
        return models.load_model("tiny-gemma3-sft", mesh=runtime.make_mesh(), verbose=False)
    if model == "gemma-3-270m":
        return models.load_model("gemma-3-270m", source="package", verbose=False)
    if model == "gemma-3-1b":  # random weights at the real shape
        from tunix.models.gemma3 import model as g3

        from tunixkit import testing

        cfg = g3.ModelConfig.gemma3_1b_it()
        try:  # the real 262,144-token tokenizer: given, or from the 270M's package
            if tokenizer_dir:
                words = models.load_model("tiny-gemma3-sft", verbose=False)
                words = dataclasses.replace(words, tokenizer=tokenizer.load(tokenizer_dir))
            else:
                words = models.load_model("gemma-3-270m", source="package", verbose=False)
        except Exception as e:  # noqa: BLE001 - a device machine without the package
            print(f"no Gemma 3 tokenizer ({e}); the smoke tokenizer and its vocabulary instead")
            words = models.load_model("tiny-gemma3-sft", verbose=False)
            cfg = dataclasses.replace(cfg, num_embed=words.config.num_embed)
        return dataclasses.replace(words, model=testing.random_model(cfg), config=cfg)
    raise ValueError(f"--model {model!r}: expected tiny, gemma-3-270m or gemma-3-1b")


def decode(
    model: str,
    batches: list[int],
    prompt: int,
    new: int,
    gb_per_s: float | None,
    tokenizer_dir: str | None = None,
) -> dict:
    import jax
    import numpy as np
    from flax import nnx

    from tunixkit import evaluation

    loaded = _load(model, tokenizer_dir)
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
        "vocabulary": int(loaded.config.num_embed),
        "prompt": prompt,
        "new_tokens": [new, 4 * new],
        "rows": rows,
        "fit": {"a_s": float(fit[1]), "b_s_per_row": float(fit[0])},
    }


def _grpo_recipe(args: argparse.Namespace):
    """02's recipe at ``--grpo-preset`` on the model's id, its lengths and steps from ``args``."""
    from tunixkit import recipes

    rec = getattr(recipes.GRPO, args.grpo_preset)()
    settings = dataclasses.replace(
        rec.grpo,
        max_prompt_length=args.grpo_prompt,
        max_generation_steps=args.grpo_new,
        num_steps=args.grpo_steps,
        checkpoint_every=10**6,
    )
    return dataclasses.replace(rec, model_id=MODEL_IDS[args.model][1], grpo=settings)


def _memory() -> dict:
    """The peak bytes so far (and in use now, where the device says), as ``runtime`` reads them."""
    import jax

    from tunixkit import runtime

    peak, what = runtime.peak_memory()
    stats = jax.devices()[0].memory_stats() or {}
    return {"peak_bytes": peak, "in_use_bytes": stats.get("bytes_in_use"), "measures": what}


def grpo(args: argparse.Namespace) -> dict:
    import jax
    import numpy as np
    from flax import nnx

    from tunixkit import families, models, profiling, rl, runtime

    rec = _grpo_recipe(args)
    s = rec.grpo
    mesh = runtime.make_mesh()
    loaded = _load(args.model, args.tokenizer)
    actor = models.apply_lora(
        loaded.model,
        family=loaded.family,
        rank=rec.lora_rank,
        alpha=rec.lora_alpha,
        modules=rec.lora_modules,
        mesh=mesh,
        verbose=False,
    )
    sys.path.insert(0, str(BENCH))
    import rollout_calls

    batches = rollout_calls.synthetic_batches(loaded, s, args.grpo_steps)
    out = pathlib.Path(tempfile.mkdtemp(prefix="speed_grpo_"))
    trace = profiling.StepTrace(out / "trace", args.grpo_steps)
    learner, cluster = rl.build_grpo(
        actor,
        loaded.model,
        loaded.tokenizer,
        mesh=mesh,
        settings=s,
        reward_fns=rec.reward_fns(),
        output_dir=out,
        eos_ids=loaded.eos_ids,
        vocab_size=families.vocab_size(loaded.config),
        family=loaded.family,
        trace=trace,
    )
    memory: list[dict] = []  # in call order: each rollout call, reference pass and update call
    loaded_memory = _memory()

    def watched(phase: str, fn, wait):
        def call(*a, **k):
            result = fn(*a, **k)
            jax.block_until_ready(wait(result))
            memory.append({"phase": phase} | _memory())
            return result

        return call

    cluster.generate = watched("rollout", cluster.generate, lambda r: r)
    cluster.get_ref_per_token_logps = watched(
        "reference", cluster.get_ref_per_token_logps, lambda r: r
    )
    cluster.update_actor = watched(
        "update", cluster.update_actor, lambda _: nnx.state(actor, nnx.LoRAParam)
    )
    learner.train(batches)
    rows = trace.finish() or trace.rows
    later = [r for r in rows if r["step"] > 1]
    medians = {
        k: float(np.median([r[k] for r in later]))
        for k in (later[0] if later else {})
        if k != "step"
    }
    return {
        "model": args.model,
        "model_id": rec.model_id,
        "vocabulary": families.vocab_size(loaded.config),
        "preset": args.grpo_preset,
        "settings": dataclasses.asdict(s),
        "lora_rank": rec.lora_rank,
        "rollouts_per_step": s.batch_size * s.num_generations,
        "steps": rows,
        "median_after_first": medians,
        "memory_loaded": loaded_memory,
        "memory_after": memory,
    }


def sft_flops_per_token(params: int, layers: int, heads: int, head_dim: int, seq: int) -> float:
    """Model FLOPs of one trained token with a frozen base (QLoRA, LoRA): 4 x parameters (the
    forward's 2 and the activations' gradients' 2; frozen weights get none) plus the attention
    scores as PaLM counts them for training, 12 x layers x heads x head_dim x sequence.

    >>> sft_flops_per_token(1_000, layers=2, heads=4, head_dim=8, seq=16)
    16288.0
    """
    return 4.0 * params + 12.0 * layers * heads * head_dim * seq


def sft(args: argparse.Namespace) -> dict:
    sys.path.insert(0, str(BENCH))
    import sft_step

    shape = "tiny" if args.model == "tiny" else args.model
    row = sft_step.one_mode(
        "qlora", shape, args.sft_steps, args.sft_batch, args.sft_seq, args.sft_rank
    )
    cfg = sft_step._config(shape)
    base = row["params"] - row["trainable"]  # the frozen weights (the adapters are trainable)
    per_token = sft_flops_per_token(base, cfg.num_layers, cfg.num_heads, cfg.head_dim, args.sft_seq)
    tokens = args.sft_batch * args.sft_seq
    return row | {
        "batch": args.sft_batch,
        "seq": args.sft_seq,
        "rank": args.sft_rank,
        "tokens_per_s": tokens / row["median_step_s"],
        "model_flops_per_token": per_token,
        "model_tflop_per_s": per_token * tokens / row["median_step_s"] / 1e12,
        "flop_convention": " ".join(sft_flops_per_token.__doc__.split("\n\n")[0].split()),
    }


def plan(args: argparse.Namespace) -> dict:
    """memplan's plans, compiled for this process's one device, of the ``sft`` and ``grpo`` parts'
    programs (the same model, batch, lengths and rank)."""
    import jax

    from tunixkit import recipes, runtime
    from tunixkit.tools import memplan

    mesh = runtime.make_mesh((1, 1), devices=jax.devices()[:1])
    sft_id, _ = MODEL_IDS[args.model]
    sft_rec = dataclasses.replace(
        recipes.SFT.one_chip(),
        model_id=sft_id,
        batch_size=args.sft_batch,
        max_len=args.sft_seq,
        lora_rank=args.sft_rank,
        lora_alpha=float(args.sft_rank),
    )
    out = {}
    for kind, rec in (("sft", sft_rec), ("grpo", _grpo_recipe(args))):
        t0 = time.perf_counter()
        found = memplan.plan(kind, rec, mesh=mesh, verbose=False)
        out[kind] = found.to_json() | {"compile_s": time.perf_counter() - t0}
        print(found.table(), flush=True)
    return out


def projection(result: dict) -> dict:
    """The ``grpo`` part's step on a Kaggle v5e-8 (:data:`V5E`), each phase scaled by what bounds
    it; the assumptions go into the file with the figures."""
    from tunixkit import recipes

    missing = [k for k in ("grpo", "bandwidth", "matmul") if k not in result]
    if missing:
        raise SystemExit(
            f"the projection needs the {', '.join(missing)} part(s) in the same file: run them "
            "first (or --resume from call 1's file)"
        )
    step = result["grpo"]["median_after_first"]
    read = result["bandwidth"]["gb_per_s"]
    flops = result["matmul"]["bfloat16"]["tflop_per_s"]
    by_reads = read / (V5E["chips"] * V5E["hbm_gb_per_s"])
    by_flops = flops / (V5E["chips"] * V5E["bf16_tflop_per_s"])
    phases = {
        "rollout": step.get("device rollout") or step["rollout"],
        "reference": step.get("device reference") or step.get("reference", 0.0),
        "update": step.get("device update") or step["update"],
    }
    projected = {
        "rollout": phases["rollout"] * by_reads,
        "reference": phases["reference"] * by_flops,
        "update": phases["update"] * by_flops,
        "rewards and host": step["seconds"] - sum(phases.values()),
    }
    total = sum(projected.values())
    steps = getattr(recipes.GRPO, result["grpo"]["preset"])().grpo.num_steps
    return {
        "assumptions": [
            f"a v5e-8 is {V5E['chips']} chips of {V5E['hbm_gb_per_s']:g} GB/s HBM and "
            f"{V5E['bf16_tflop_per_s']:g} bf16 TFLOP/s each (Google's figures), used as well as "
            "this device uses its own",
            "the rollout is bound by reading the weights: it scales by this device's measured "
            "read bandwidth over the v5e-8's summed HBM bandwidth (weights sharded 8 ways, "
            "no time for collectives)",
            "the reference pass and the update are bound by bf16 matmuls: they scale by this "
            "device's measured bf16 matmul rate over the v5e-8's summed peak",
            "rewards and the host's share of a step do not scale (the same CPU work)",
            "the step is the grpo part's median after the first, its phases as the device "
            "timed them where it did",
        ],
        "scale_reads": by_reads,
        "scale_flops": by_flops,
        "step_s": projected | {"total": total},
        "preset_steps": steps,
        "preset_hours": steps * total / 3600,
    }


def _child(part: str, args: argparse.Namespace) -> dict:
    """Run ``part`` in a process of its own (its peak memory its own) with the same arguments."""
    cmd = [sys.executable, __file__, *sys.argv[1:], "--child", part]
    done = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write(done.stderr[-4000:])
    if done.returncode:
        raise SystemExit(f"part {part} failed (exit {done.returncode}): see above")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    import jax

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gemma-3-270m", choices=sorted(MODEL_IDS))
    ap.add_argument("--parts", default="bandwidth,matmul,decode")
    ap.add_argument("--copy-mib", type=int, default=1024)
    ap.add_argument("--matmul", type=int, default=2048)
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--new", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--grpo-preset", default="full", choices=("full", "one_chip"))
    ap.add_argument("--grpo-prompt", type=int, default=256)
    ap.add_argument("--grpo-new", type=int, default=768)
    ap.add_argument("--grpo-steps", type=int, default=3, help="the first compiles")
    ap.add_argument("--sft-batch", type=int, default=4)
    ap.add_argument("--sft-seq", type=int, default=512)
    ap.add_argument("--sft-rank", type=int, default=64)
    ap.add_argument("--sft-steps", type=int, default=10, help="the first 2 compile")
    ap.add_argument("--tokenizer", help="gemma-3-1b: a folder with Gemma 3's tokenizer.model")
    ap.add_argument("--out")
    ap.add_argument("--resume", action="store_true", help="keep the parts the file already has")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps({"grpo": grpo, "sft": sft, "plan": plan}[args.child](args)))
        return 0
    device = jax.devices()[0]
    kind = getattr(device, "device_kind", device.platform).replace(" ", "_").lower()
    out = pathlib.Path(args.out or RESULTS / f"speed_{kind}.json")
    result: dict = json.loads(out.read_text()) if args.resume and out.is_file() else {}
    result |= {
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
        result["decode"] = decode(args.model, batches, args.prompt, args.new, gb, args.tokenizer)
        print("decode fit:", result["decode"]["fit"], flush=True)
        save()
    for part in ("grpo", "sft", "plan"):
        if part in parts:
            result[part] = _child(part, args)
            if part == "sft" and "matmul" in result:
                peak = result["matmul"]["bfloat16"]["tflop_per_s"]
                result["sft"]["mfu"] = result["sft"]["model_tflop_per_s"] / peak
            print(f"{part}: done", flush=True)
            save()
    if "projection" in parts:
        result["projection"] = projection(result)
        print("projection:", result["projection"]["step_s"], flush=True)
        save()
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
