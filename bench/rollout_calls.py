"""One rollout call per GRPO step against one per micro-batch, at the real vocabulary, on this CPU.

tunix sets the rollout's micro-batch to the update's unless told otherwise, so a step of 02's or
06's full preset (4 prompts x G=4, updates of 2 prompts) sampled its 16 answers in 2 sampler calls
of 8, each reading every weight once per new token. tunixkit's default
(``rl.GRPOSettings.rollout_micro_batch_size = None``) samples the whole step in one call. Both
variants, each in its own process, run whole GRPO steps through ``rl.build_grpo`` on the real
Gemma 3 270M (``gemma-3-270m``, installed from the package index; 262,144-token vocabulary) with the
full preset's batch geometry and its prompt and answer lengths cut to this CPU (``--prompt``,
``--new``):

- ``split``: ``rollout_micro_batch_size`` = the update's micro-batch (2 prompts): 2 calls a step;
- ``whole``: the default: 1 call a step.

Per process: the median seconds of a step (between consecutive rollouts, after ``--warm`` steps)
and of its rollout calls (their sum per step). ``--repeats`` rounds, interleaved and rotated
(``bench/_repeats.py``); the ratios whole / split with their interval. Whether the two give the same
answers for the same seed is recorded too (``same_answers``).

    .venv/bin/python bench/rollout_calls.py                      # 02's shape (~25 min, 2 cores)
    .venv/bin/python bench/rollout_calls.py --preset 06 --prompt 256
    .venv/bin/python bench/rollout_calls.py --model tiny-gemma3-sft --out /tmp/r.json  # seconds

Writes ``bench/results/rollout_calls_<preset>.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
VARIANTS = ("split", "whole")
os.environ.setdefault("WANDB_MODE", "disabled")


def settings_for(preset: str, prompt: int, new: int, steps: int, variant: str):
    """The preset's full GRPO settings, lengths cut to ``prompt``/``new``, ``steps`` steps, and
    the variant's rollout micro-batch."""
    from tunixkit import recipes

    full = (recipes.GRPO if preset == "02" else recipes.Pipeline).full().grpo
    return dataclasses.replace(
        full,
        max_prompt_length=prompt,
        max_generation_steps=new,
        num_steps=steps,
        checkpoint_every=10**6,
        rollout_micro_batch_size=full.micro_batch_size if variant == "split" else None,
    )


def synthetic_batches(loaded, settings, steps: int):
    """``steps`` batches of synthetic GSM8K-style prompts as 02 makes them for ``settings``: its
    prompts per step, cut to the rollout's prompt length for ``loaded``'s tokenizer."""
    from tunixkit import data, evaluation, testing

    records = data.to_records(
        testing.synthetic_gsm8k(steps * settings.batch_size, seed=3, max_operand=9),
        "synthetic",
        verbose=False,
    )[0]
    return data.grpo_dataset(
        records,
        batch_size=settings.batch_size,
        num_batches=steps,
        family=loaded.family,
        fit=evaluation.prompt_fitter(loaded.tokenizer, settings.max_prompt_length),
    )


def one_variant(variant: str, args: argparse.Namespace) -> dict:
    import jax
    import numpy as np

    from tunixkit import families, models, rewards, rl, runtime

    s = settings_for(args.preset, args.prompt, args.new, args.steps, variant)
    mesh = runtime.make_mesh()
    reference = models.load_model(args.model, mesh=mesh, verbose=False)
    actor = models.apply_lora(
        reference.model, family=reference.family, rank=16, alpha=16.0, mesh=mesh
    )
    batches = synthetic_batches(reference, s, args.steps)
    out = pathlib.Path(tempfile.mkdtemp(prefix=f"rollout_calls_{variant}_"))
    learner, cluster = rl.build_grpo(
        actor,
        reference.model,
        reference.tokenizer,
        mesh=mesh,
        settings=s,
        reward_fns=rewards.DEFAULT_REWARDS,
        output_dir=out,
        eos_ids=reference.eos_ids,
        vocab_size=families.vocab_size(reference.config),
        family=reference.family,
    )
    calls: list[tuple[float, float, int]] = []  # (start, seconds, rows) of each sampler call
    answers: list[list[int]] = []
    generate = cluster.generate

    def recorded(prompts, *a, **k):
        t0 = time.perf_counter()
        result = generate(prompts, *a, **k)
        calls.append((t0, time.perf_counter() - t0, len(prompts)))
        answers.extend(np.asarray(t).tolist() for t in result.tokens)
        return result

    cluster.generate = recorded
    learner.train(batches)
    end = time.perf_counter()
    per_step = len(calls) // args.steps
    starts = [calls[i][0] for i in range(0, len(calls), per_step)] + [end]
    step_s = np.diff(starts)[args.warm :]
    rollout_s = [
        sum(c[1] for c in calls[i : i + per_step]) for i in range(0, len(calls), per_step)
    ][args.warm :]
    return {
        "variant": variant,
        "model": reference.model_id,
        "vocabulary": families.vocab_size(reference.config),
        "calls_per_step": per_step,
        "rows_per_call": calls[0][2],
        "median_step_s": float(np.median(step_s)),
        "median_rollout_s": float(np.median(rollout_s)),
        "answers": answers,
        "device": f"{jax.devices()[0].device_kind} x{jax.device_count()}",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma-3-270m", help="a tunixkit model id")
    ap.add_argument("--preset", choices=("02", "06"), default="02", help="whose full GRPO preset")
    ap.add_argument("--prompt", type=int, default=128, help="max prompt tokens (cut to the CPU)")
    ap.add_argument("--new", type=int, default=16, help="answer tokens (cut to the CPU)")
    ap.add_argument("--steps", type=int, default=4, help="GRPO steps per process")
    ap.add_argument("--warm", type=int, default=2, help="first steps left out (compilation)")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved rounds of both variants")
    ap.add_argument("--out", type=pathlib.Path, help="results file (default: bench/results/)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one_variant(args.child, args)))
        return 0
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import _repeats

    rows: list[dict] = []

    def run(variant: str, round_: int) -> float:
        cmd = [sys.executable, __file__, "--child", variant]
        for name in ("model", "preset", "prompt", "new", "steps", "warm"):
            cmd += [f"--{name}", str(getattr(args, name))]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"{variant} failed:\n{done.stderr[-3000:]}")
        r = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"round {round_} {variant:5s} {r['calls_per_step']} call(s) of {r['rows_per_call']} rows:"
            f" step {r['median_step_s']:.2f} s, rollout {r['median_rollout_s']:.2f} s",
            flush=True,
        )
        rows.append(r | {"round": round_})
        return r["median_step_s"]

    steps = _repeats.interleaved(VARIANTS, args.repeats, run)
    rollouts = {v: [r["median_rollout_s"] for r in rows if r["variant"] == v] for v in VARIANTS}
    step = _repeats.decide(steps["whole"], steps["split"], target=1.0)
    rollout = _repeats.decide(rollouts["whole"], rollouts["split"], target=1.0)
    first = {v: next(r for r in rows if r["variant"] == v) for v in VARIANTS}
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if "model name" in line),
        platform.processor(),
    )
    out = {
        "model": first["whole"]["model"],
        "vocabulary": first["whole"]["vocabulary"],
        "machine": f"{cpu}, {os.cpu_count()} cores, {first['whole']['device']}",
        "date": time.strftime("%Y-%m-%d"),
        "preset": args.preset,
        "settings": dataclasses.asdict(
            settings_for(args.preset, args.prompt, args.new, args.steps, "whole")
        ),
        "steps_per_process": args.steps,
        "warm_steps_left_out": args.warm,
        "calls_per_step": {v: first[v]["calls_per_step"] for v in VARIANTS},
        "rows_per_call": {v: first[v]["rows_per_call"] for v in VARIANTS},
        "step_ratio_whole_over_split": step,
        "rollout_ratio_whole_over_split": rollout,
        "same_answers": first["whole"]["answers"] == first["split"]["answers"],
        "rows": [{k: v for k, v in r.items() if k != "answers"} for r in rows],
    }
    print(_repeats.describe("GRPO step, one rollout call / one per micro-batch", step))
    print(_repeats.describe("its rollout, one call / one per micro-batch", rollout))
    print(f"same answers for the same seed: {out['same_answers']}")
    path = args.out or RESULTS / f"rollout_calls_{args.preset}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
