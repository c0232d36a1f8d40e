"""SFT step time and peak memory: LoRA vs QLoRA (nf4) vs full fine-tuning, same model and batch.

Each mode runs in its own process (peak memory is per process), trains ``--steps`` steps with
tunix's ``PeftTrainer`` through tunixkit's helpers, and reports the median step time after the
first (compiling) steps and the peak memory: the accelerator's peak bytes in use, or on CPU the
process's peak RSS.

    .venv/bin/python bench/sft_step.py                   # tiny-gemma3, then a larger random shape
    .venv/bin/python bench/sft_step.py --shape gemma-3-1b  # the real 1B shape, random weights (GPU/TPU)

Writes ``bench/results/sft_step.json``; ratios are against LoRA measured in the same run. Target:
QLoRA's parameters take at most 30% of LoRA's bytes on the larger shape (nf4 backbone); exits
non-zero when missed.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import time

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
MODES = ("lora", "qlora", "full")
MAX_QLORA_PARAM_SHARE = 0.3


def _config(shape: str):
    import dataclasses

    from tunix.models.gemma3 import model as g3

    from tunixkit import testing

    vocab = testing.load_tokenizer().vocab_size
    if shape == "tiny":
        return testing.gemma3_config(vocab)
    if shape == "medium":
        return testing.gemma3_config(
            vocab,
            dataclasses.replace(
                testing.TINY_GEMMA3,
                num_layers=4,
                embed_dim=512,
                hidden_dim=2048,
                num_heads=8,
                head_dim=64,
            ),
        )
    if shape == "gemma-3-1b":
        return g3.ModelConfig.gemma3_1b_it()
    if shape == "gemma-3-270m":
        return g3.ModelConfig.gemma3_270m()
    raise SystemExit(f"unknown --shape {shape!r}: tiny, medium, gemma-3-270m or gemma-3-1b")


def one_mode(mode: str, shape: str, steps: int, batch: int, seq: int, rank: int) -> dict:
    import jax
    import numpy as np
    from tunix.sft import peft_trainer

    from tunixkit import models, runlog, runtime, testing, training

    cfg = _config(shape)
    model = testing.random_model(cfg, 0, embedding_std=0.1)
    if mode != "full":
        model = models.apply_lora(
            model, rank=rank, alpha=float(rank), qlora=mode == "qlora", verbose=False
        )
    size = models.footprint(model)
    rng = np.random.default_rng(0)
    items = [
        {
            "input_tokens": rng.integers(3, cfg.num_embed, seq).astype(np.int32),
            "input_mask": np.ones(seq, np.int32),
        }
        for _ in range(batch * steps)
    ]
    batches = [
        peft_trainer.TrainingInput(
            input_tokens=np.stack([x["input_tokens"] for x in items[i : i + batch]]),
            input_mask=np.stack([x["input_mask"] for x in items[i : i + batch]]),
        )
        for i in range(0, len(items), batch)
    ]
    times: list[float] = []

    class Clock(runlog.MetricsFile):  # step boundaries from tunix's own hook
        def on_train_step_end(self, train_ctx, train_step, train_loss) -> None:
            jax.block_until_ready(train_loss)
            times.append(time.perf_counter())

    trainer = training.sft_trainer(
        model,
        training.optimizer(1e-4, steps),
        peft_trainer.TrainingConfig(
            eval_every_n_steps=10**9, max_steps=steps, pbar_description=None
        ),
        pad_id=0,
    )
    trainer.with_training_hooks(Clock("/dev/null"))
    trainer.train(batches)
    step_times = np.diff(times)[2:]  # the first steps compile
    peak, what = runtime.peak_memory()
    return {
        "mode": mode,
        "shape": shape,
        "median_step_s": float(np.median(step_times)),
        "peak_bytes": peak,
        "peak_measures": what,
        "params": size["params"],
        "trainable": size["trainable"] or size["params"],
        "param_bytes": size["bytes"],
        "device": f"{jax.devices()[0].device_kind} x{jax.device_count()}",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", help="tiny, medium, gemma-3-1b (repeatable)")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--out", default="sft_step.json", help="file name under bench/results/")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        mode, shape = args.child.split(":")
        print(json.dumps(one_mode(mode, shape, args.steps, args.batch, args.seq, args.rank)))
        return
    rows = []
    for shape in args.shape or ["tiny", "medium"]:
        for mode in MODES:
            cmd = [
                sys.executable,
                __file__,
                "--child",
                f"{mode}:{shape}",
                "--steps",
                str(args.steps),
                "--batch",
                str(args.batch),
                "--seq",
                str(args.seq),
                "--rank",
                str(args.rank),
            ]
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode:
                raise SystemExit(f"{mode} on {shape} failed:\n{res.stderr[-3000:]}")
            rows.append(json.loads(res.stdout.strip().splitlines()[-1]))
        base = next(r for r in rows if r["shape"] == shape and r["mode"] == "lora")
        for r in (r for r in rows if r["shape"] == shape):
            r["step_vs_lora"] = r["median_step_s"] / base["median_step_s"]
            r["peak_vs_lora"] = r["peak_bytes"] / base["peak_bytes"]
            print(
                f"{shape:10s} {r['mode']:6s} step {r['median_step_s'] * 1e3:8.1f} ms ({r['step_vs_lora']:.2f}x)  "
                f"peak {r['peak_bytes'] / 2**20:8.0f} MiB ({r['peak_vs_lora']:.2f}x)  params {r['param_bytes'] / 2**20:7.1f} MiB  "
                f"trainable {r['trainable']:,}"
            )
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {
        "steps": args.steps,
        "batch": args.batch,
        "seq": args.seq,
        "rank": args.rank,
        "rows": rows,
    }
    largest = [r for r in rows if r["shape"] == (args.shape or ["tiny", "medium"])[-1]]
    share = (
        next(r for r in largest if r["mode"] == "qlora")["param_bytes"]
        / next(r for r in largest if r["mode"] == "lora")["param_bytes"]
    )
    out |= {"qlora_param_share": share, "target_met": share <= MAX_QLORA_PARAM_SHARE}
    (RESULTS / args.out).write_text(json.dumps(out, indent=2))
    print(
        f"wrote {RESULTS / args.out}; QLoRA params are {share:.0%} of LoRA's: target "
        f"{'met' if out['target_met'] else 'MISSED'}"
    )
    return 0 if out["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
