"""SFT sequence packing: tokens/s with and without it, and the same loss on the same data.

Variable-length examples (synthetic GSM8K without the system prompt: 47-81 tokens) in rows of 144
tokens. Unpacked, each row holds one example and is mostly padding; packed
(``training.sft_dataset(..., packing=True)``), rows hold as many whole examples as fit, kept apart
by a block-diagonal mask (``training.model_inputs_fn``). Both train one epoch over the same examples
with tunix's ``PeftTrainer`` (tiny-gemma3, full fine-tuning), in this process, alternating rounds:

- ``speedup``: real (non-padding) tokens per second, packed over unpacked (median of the rounds);
- ``loss_difference``: tunix's loss of the starting model over all examples, packed vs unpacked
  (token-weighted: packing must not change it).

    .venv/bin/python bench/sft_packing.py

Writes ``bench/results/sft_packing.json``. Targets: speedup >= 1.3 and a loss difference under
1e-4; exits non-zero when one is missed.
"""

from __future__ import annotations

import json
import os
import pathlib
import platform
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("WANDB_MODE", "disabled")

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
MAX_LEN, EXAMPLES, ROUNDS = 144, 384, 3
MIN_SPEEDUP, MAX_LOSS_DIFF = 1.3, 1e-4


def main() -> int:
    import jax
    import numpy as np
    from flax import nnx
    from tunix.sft import peft_trainer

    from tunixkit import data, models, runlog, testing, training

    base = models.load_model("tiny-gemma3", verbose=False)
    tok, fn = base.tokenizer, training.model_inputs_fn(base.tokenizer.pad_id())
    records = data.to_records(
        testing.synthetic_gsm8k(EXAMPLES, seed=11), "synthetic", verbose=False
    )[0]
    pairs = [data.sft_pair(r, system_prompt=None) for r in records]
    sets = {
        packed: training.sft_dataset(
            pairs,
            tok,
            max_len=MAX_LEN,
            batch_size=16 if not packed else 8,
            packing=packed,
            verbose=False,
        )
        for packed in (False, True)
    }
    real_tokens = sum(int(np.count_nonzero(b.input_tokens != tok.pad_id())) for b in sets[False])
    fill = {p: real_tokens / sum(b.input_tokens.size for b in sets[p]) for p in sets}

    loss = nnx.jit(lambda m, kw: peft_trainer._default_loss_fn(m, **kw))

    def token_loss(batches) -> float:  # token-weighted over every example
        total = count = 0.0
        for b in batches:
            kw = fn(b)
            n = float(np.asarray(kw["input_mask"])[:, 1:].sum())
            total, count = total + float(loss(base.model, kw)) * n, count + n
        return total / count

    start_loss = {p: token_loss(sets[p]) for p in sets}

    class Clock(runlog.MetricsFile):  # step boundaries from tunix's own hook
        def __init__(self) -> None:
            self.stamps: list[float] = []

        def on_train_step_end(self, train_ctx, train_step, train_loss) -> None:
            jax.block_until_ready(train_loss)
            self.stamps.append(time.perf_counter())

        def on_eval_step_end(self, train_ctx, eval_loss) -> None: ...

        def on_train_step_start(self, train_ctx) -> None: ...

    tps: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(ROUNDS):
        for packed in (False, True):
            batches = list(sets[packed])
            model = models.load_model("tiny-gemma3", verbose=False).model
            config = peft_trainer.TrainingConfig(
                eval_every_n_steps=10**9, max_steps=len(batches), pbar_description=None
            )
            clock = Clock()
            trainer = training.sft_trainer(
                model, training.optimizer(1e-3, len(batches)), config, pad_id=tok.pad_id()
            )
            trainer.with_training_hooks(clock)
            trainer.train(batches)
            timed = batches[2:]  # the first two steps compile
            tokens = sum(int(np.count_nonzero(b.input_tokens != tok.pad_id())) for b in timed)
            tps[packed].append(tokens / (clock.stamps[-1] - clock.stamps[1]))
    speedup = float(np.median([a / b for a, b in zip(tps[True], tps[False], strict=True)]))
    out = {
        "device": f"{jax.devices()[0].device_kind} x{jax.device_count()}",
        "host": platform.node(),
        "examples": EXAMPLES,
        "max_len": MAX_LEN,
        "row_fill": {"unpacked": fill[False], "packed": fill[True]},
        "tokens_per_s": {"unpacked": tps[False], "packed": tps[True]},
        "speedup": speedup,
        "loss_unpacked": start_loss[False],
        "loss_packed": start_loss[True],
        "loss_difference": abs(start_loss[True] - start_loss[False]),
    }
    out["target_met"] = speedup >= MIN_SPEEDUP and out["loss_difference"] < MAX_LOSS_DIFF
    print(
        f"rows filled {fill[False]:.0%} -> {fill[True]:.0%}; tokens/s {np.median(tps[False]):.0f} -> "
        f"{np.median(tps[True]):.0f} (speedup {speedup:.2f}x); loss {start_loss[False]:.6f} vs "
        f"{start_loss[True]:.6f}; target {'met' if out['target_met'] else 'MISSED'}"
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sft_packing.json").write_text(json.dumps(out, indent=2))
    return 0 if out["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
