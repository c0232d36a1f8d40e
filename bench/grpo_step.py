"""GRPO step time: tunixkit's ``rl.build_grpo`` against a plain tunix script with the same config.

Three variants, each in its own process, on the same model, prompts, rewards and hyper-parameters
(the smoke profile's GRPO settings unless overridden):

- ``tunixkit``: ``rl.build_grpo`` as notebook 02 calls it (rollouts stop at EOS and ``<end_of_turn>``);
- ``plain``: the upstream demo's code written out by hand (optax chain, ``ClusterConfig``,
  ``RolloutConfig``, ``GRPOLearner``) with the same stop tokens: the reference for ``overhead_ratio``;
- ``plain-upstream``: the same script with the ``RolloutConfig`` of the upstream demo, which passes no
  ``eos_tokens`` (the tokenizer's EOS only), so rollouts run past ``<end_of_turn>``.

Step times are the intervals between consecutive rollouts (one per step), median after the first
two (compilation). Every rollout is recorded: ``tokens_after_end_of_turn`` counts the completion
tokens that follow the first ``<end_of_turn>`` (GRPO trains on them and the rewards read them).
The model is loaded through tunixkit in every variant; only the GRPO setup differs.

    .venv/bin/python bench/grpo_step.py                   # tiny-gemma3-sft, 14 steps per variant
    .venv/bin/python bench/grpo_step.py --model gemma-3-1b --generation-steps 768  # GPU/TPU, random

The variants run ``--repeats`` times (default 5), interleaved and rotated each round
(``bench/_repeats.py``); the overhead is the median of the per-round ratios with an order-statistic
interval, and the verdict uses the interval: met (exit 0) when all of it is <= 1.05 and no rollout
token follows ``<end_of_turn>``, missed (exit 1) when all of it is above, undecided (exit 2) when it
straddles 1.05. Writes ``bench/results/grpo_step.json``. W&B stays off (``WANDB_MODE=disabled``):
tunix's default logger would otherwise start it in the plain-script variants and ask for a key.
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

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
VARIANTS = ("plain", "tunixkit", "plain-upstream")
MAX_OVERHEAD = 1.05
os.environ.setdefault("WANDB_MODE", "disabled")  # inherited by the variants' processes


def _model(name: str, mesh):
    from tunixkit import models, testing

    if name != "gemma-3-1b":
        return models.load_model(name, mesh=mesh, verbose=False)
    from tunix.models.gemma3 import model as g3

    tiny = models.load_model("tiny-gemma3", mesh=mesh, verbose=False)
    cfg = dataclasses.replace(g3.ModelConfig.gemma3_1b_it(), num_embed=tiny.config.num_embed)
    return dataclasses.replace(
        tiny,
        model=testing.random_model(cfg, 0, embedding_std=0.1),
        config=cfg,
        model_id="random gemma-3-1b shape",
    )


def plain_learner(actor, reference, tokenizer, mesh, s, reward_fns, out: pathlib.Path, eos_tokens):
    """The upstream GRPO demo's setup, by hand, with tunixkit's hyper-parameters ``s``."""
    import optax
    import orbax.checkpoint as ocp
    from tunix.rl import rl_cluster as rl_cluster_lib
    from tunix.rl.grpo.grpo_learner import GRPOConfig, GRPOLearner
    from tunix.rl.rollout import base_rollout
    from tunix.sft import metrics_logger

    schedule = optax.schedules.warmup_cosine_decay_schedule(
        init_value=0.0,
        peak_value=s.learning_rate,
        warmup_steps=max(1, int(s.warmup_ratio * s.num_steps)),
        decay_steps=s.num_steps,
        end_value=0.1 * s.learning_rate,
    )
    optimizer = optax.chain(
        optax.clip_by_global_norm(max_norm=s.clip_norm),
        optax.adamw(learning_rate=schedule, b1=0.9, b2=0.99, weight_decay=s.weight_decay),
    )
    rollout = dict(
        max_tokens_to_generate=s.max_generation_steps,
        max_prompt_length=s.max_prompt_length,
        kv_cache_size=s.max_prompt_length + s.max_generation_steps + 16,
        temperature=s.temperature,
        top_p=s.top_p,
        top_k=s.top_k,
        seed=s.seed,
    )
    if eos_tokens is not None:
        rollout["eos_tokens"] = list(eos_tokens)
    config = rl_cluster_lib.ClusterConfig(
        role_to_mesh={
            rl_cluster_lib.Role.ACTOR: mesh,
            rl_cluster_lib.Role.REFERENCE: mesh,
            rl_cluster_lib.Role.ROLLOUT: mesh,
        },
        rollout_engine="vanilla",
        offload_to_cpu=False,
        training_config=rl_cluster_lib.RLTrainingConfig(
            actor_optimizer=optimizer,
            eval_every_n_steps=10**9,
            max_steps=s.num_steps,
            mini_batch_size=s.batch_size,
            train_micro_batch_size=s.batch_size,
            rollout_micro_batch_size=s.batch_size,
            compute_logps_micro_batch_size=s.batch_size,
            metrics_logging_options=metrics_logger.MetricsLoggerOptions(
                log_dir=str(out / "tb"), flush_every_n_steps=10
            ),
            checkpoint_root_directory=str(out / "ckpt"),
            checkpointing_options=ocp.CheckpointManagerOptions(
                save_interval_steps=s.checkpoint_every, max_to_keep=2
            ),
        ),
        rollout_config=base_rollout.RolloutConfig(**rollout),
    )
    cluster = rl_cluster_lib.RLCluster(
        actor=actor, reference=reference, tokenizer=tokenizer, cluster_config=config
    )
    algo = GRPOConfig(
        num_generations=s.num_generations,
        num_iterations=s.num_iterations,
        beta=s.beta,
        epsilon=s.epsilon,
    )
    return GRPOLearner(rl_cluster=cluster, algo_config=algo, reward_fns=list(reward_fns)), cluster


def one_variant(variant: str, model_name: str, steps: int, generation_steps: int | None) -> dict:
    import grain
    import jax
    import numpy as np

    from tunixkit import data, prompting, recipes, rewards, rl, runtime, testing

    settings = recipes.GRPO.smoke().grpo
    settings = dataclasses.replace(
        settings,
        num_steps=steps,
        checkpoint_every=10**6,
        max_generation_steps=generation_steps or settings.max_generation_steps,
    )
    mesh = runtime.make_mesh()
    reference = _model(model_name, mesh)
    actor = _model(model_name, mesh).model
    tok = reference.tokenizer
    eot = tok.token_id(prompting.END_OF_TURN)
    records = data.to_records(
        testing.synthetic_gsm8k(steps * settings.batch_size, seed=3, max_operand=9),
        "synthetic",
        verbose=False,
    )[0]
    items = [
        {
            "prompts": prompting.format_prompt(r["question"]),
            "question": r["question"],
            "answer": r["answer"],
        }
        for r in records
    ]
    batches = grain.MapDataset.source(items).batch(settings.batch_size, drop_remainder=True)
    out = pathlib.Path(tempfile.mkdtemp(prefix=f"grpo_step_{variant}_"))
    if variant == "tunixkit":
        learner, cluster = rl.build_grpo(
            actor,
            reference.model,
            reference.tokenizer,
            mesh=mesh,
            settings=settings,
            reward_fns=rewards.DEFAULT_REWARDS,
            output_dir=out,
            eos_ids=reference.eos_ids,
            vocab_size=reference.config.num_embed,
        )
    else:
        settings = dataclasses.replace(
            settings, top_k=min(settings.top_k, reference.config.num_embed)
        )
        learner, cluster = plain_learner(
            actor,
            reference.model,
            reference.tokenizer,
            mesh,
            settings,
            rewards.DEFAULT_REWARDS,
            out,
            reference.eos_ids if variant == "plain" else None,
        )
    stamps: list[float] = []
    lengths: list[int] = []
    after_eot: list[int] = []
    generate = cluster.generate

    def recorded(*args, **kwargs):  # one rollout per step: its start marks the step boundary
        stamps.append(time.perf_counter())
        result = generate(*args, **kwargs)
        for toks in result.tokens:
            toks = np.asarray(toks).tolist()
            lengths.append(len(toks))
            after_eot.append(len(toks) - toks.index(eot) - 1 if eot in toks else 0)
        return result

    cluster.generate = recorded
    learner.train(batches)
    stamps.append(time.perf_counter())
    step_times = np.diff(stamps)[2:]
    return {
        "variant": variant,
        "model": reference.model_id,
        "steps": len(stamps) - 1,
        "median_step_s": float(np.median(step_times)),
        "mean_step_s": float(np.mean(step_times)),
        "completions": len(lengths),
        "mean_completion_tokens": float(np.mean(lengths)),
        "tokens_after_end_of_turn": int(np.sum(after_eot)),
        "completions_past_end_of_turn": int(np.sum(np.asarray(after_eot) > 0)),
        "settings": {
            k: v
            for k, v in dataclasses.asdict(settings).items()
            if k in ("batch_size", "num_generations", "max_generation_steps", "beta")
        },
        "device": f"{jax.devices()[0].device_kind} x{jax.device_count()}",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--model", default="tiny-gemma3-sft", help="a tunixkit model id, or gemma-3-1b (random)"
    )
    ap.add_argument("--steps", type=int, default=14)
    ap.add_argument("--repeats", type=int, default=5, help="interleaved rounds of the 3 variants")
    ap.add_argument(
        "--generation-steps", type=int, help="rollout length (default: the smoke profile's)"
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one_variant(args.child, args.model, args.steps, args.generation_steps)))
        return
    import _repeats

    def run(variant: str, round_: int) -> dict:
        cmd = [
            sys.executable,
            __file__,
            "--child",
            variant,
            "--model",
            args.model,
            "--steps",
            str(args.steps),
        ]
        if args.generation_steps:
            cmd += ["--generation-steps", str(args.generation_steps)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode:
            raise SystemExit(f"{variant} failed:\n{res.stderr[-3000:]}")
        r = json.loads(res.stdout.strip().splitlines()[-1])
        print(
            f"round {round_} {variant:15s} step {r['median_step_s'] * 1e3:8.1f} ms  completion tokens "
            f"{r['mean_completion_tokens']:6.1f}  tokens after <end_of_turn> {r['tokens_after_end_of_turn']:6d} "
            f"({r['completions_past_end_of_turn']}/{r['completions']} completions)"
        )
        rows.append(r | {"round": round_})
        return r["median_step_s"]

    rows: list[dict] = []
    times = _repeats.interleaved(VARIANTS, args.repeats, run)
    overhead = _repeats.decide(times["tunixkit"], times["plain"], target=MAX_OVERHEAD)
    upstream = _repeats.decide(
        times["plain-upstream"], times["tunixkit"], target=1.0, lower_is_better=False
    )
    ours = [r for r in rows if r["variant"] == "tunixkit"]
    leaked = sum(r["tokens_after_end_of_turn"] for r in ours)
    out = {
        "model": ours[0]["model"],
        "device": ours[0]["device"],
        "steps": args.steps,
        "repeats": args.repeats,
        "order": "interleaved, rotated each round",
        "overhead": overhead,
        "overhead_ratio": overhead["median"],
        "speedup_vs_upstream_rollout": upstream["median"],
        "tokens_after_end_of_turn": leaked,
        "upstream_tokens_after_end_of_turn": sum(
            r["tokens_after_end_of_turn"] for r in rows if r["variant"] == "plain-upstream"
        ),
        "rows": rows,
    }
    print(_repeats.describe("overhead (tunixkit / plain step time)", overhead))
    print(
        f"tokens after <end_of_turn>: {leaked} in tunixkit's rollouts (target 0; upstream rollout: "
        f"{out['upstream_tokens_after_end_of_turn']}); step time vs upstream rollout: "
        f"{upstream['median']:.2f}x faster"
    )
    verdict = overhead["verdict"] if leaked == 0 else "missed"
    out["verdict"] = verdict
    out["target_met"] = verdict == "met"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "grpo_step.json").write_text(json.dumps(out, indent=2))
    print(f"wrote {RESULTS / 'grpo_step.json'}; target {verdict.upper()}")
    return _repeats.EXIT[verdict]


if __name__ == "__main__":
    sys.exit(main())
