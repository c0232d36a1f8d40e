"""A small training run through tunixkit's one loop, for the kill-and-resume tests (run as a script).

    python tests/resume_job.py {grpo,dpo,simpo,agentic,distill} OUTPUT_DIR

Builds the trainer the way the notebooks do (GRPO: LoRA on the shared reference, KL, gradient
accumulation; DPO: LoRA; distillation: tiny teacher and student), trains ``STEPS`` steps with
``training.run`` and checkpoints every 2, and records what it trained on: ``trained.jsonl`` gets one
row per trained batch (its step and a fingerprint of its content, taken where the trainer prepares
the batch it is about to train on; GRPO's own ``rollouts.jsonl`` names each step's questions).
A test kills it at a known checkpoint with ``tests/killing.py``. The last line printed is a JSON summary with the weights digest.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import pathlib

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("WANDB_MODE", "disabled")

from tunixkit import (
    agentic,
    data,
    distill,
    models,
    preferences,
    prompting,
    recipes,
    rewards,
    rl,
    runlog,
    runtime,
    testing,
    training,
)

STEPS, EVERY = 6, 2


def _records(n: int, seed: int) -> list[dict[str, str]]:
    return data.to_records(
        testing.synthetic_gsm8k(n, seed=seed, max_operand=9), "synthetic", verbose=False
    )[0]


def _fingerprint(batch) -> str:
    leaves = batch.values() if isinstance(batch, dict) else dataclasses.asdict(batch).values()
    h = hashlib.sha256()
    for x in leaves:
        h.update(json.dumps(getattr(x, "tolist", lambda x=x: str(x))()).encode())
    return h.hexdigest()[:12]


def _record_batches(trainer, path: pathlib.Path) -> None:
    """Note each batch the trainer prepares to train on (tunix calls ``_prepare_inputs`` once per
    trained batch, after skipping the ones a restored checkpoint covers)."""
    prepare = trainer._prepare_inputs

    def recorded(batch):
        with path.open("a") as f:
            f.write(
                json.dumps({"step": trainer.train_steps + 1, "batch": _fingerprint(batch)}) + "\n"
            )
        return prepare(batch)

    trainer._prepare_inputs = recorded


def grpo(out: pathlib.Path, mesh, steps: int = STEPS, **settings):
    """``settings``: GRPOSettings fields other than these (tests/test_compat.py's rollout test)."""
    reference = models.load_model("tiny-gemma3-sft", mesh=mesh, verbose=False)
    actor = models.apply_lora(reference.model, rank=8, alpha=16.0, mesh=mesh, verbose=False)
    settings = rl.GRPOSettings(
        learning_rate=3e-3,
        beta=0.1,
        max_prompt_length=96,
        max_generation_steps=16,
        batch_size=4,
        micro_batch_size=2,
        num_generations=2,
        num_steps=steps,
        checkpoint_every=EVERY,
        temperature=1.0,
        **settings,
    )

    learner, _ = rl.build_grpo(
        actor,
        reference.model,
        reference.tokenizer,
        mesh=mesh,
        settings=settings,
        reward_fns=list(rewards.DEFAULT_REWARDS),
        output_dir=out,
        eos_ids=reference.eos_ids,
        vocab_size=reference.config.num_embed,
    )
    batches = data.grpo_dataset(_records(200, 0), batch_size=4, num_batches=steps, seed=0)
    return learner, batches, None, actor


def dpo(out: pathlib.Path, mesh, algorithm: str = "dpo"):
    reference = models.load_model("tiny-gemma3-sft", mesh=mesh, verbose=False)
    actor = models.apply_lora(reference.model, rank=8, alpha=16.0, mesh=mesh, verbose=False)
    pairs = [
        {
            "prompt": prompting.format_prompt(r["question"]),
            "chosen": prompting.format_completion(r["solution"], r["answer"]),
            "rejected": prompting.format_completion(r["solution"], str(int(r["answer"]) + 1)),
        }
        for r in _records(64, 2)
    ]
    batches = preferences.preference_dataset(
        pairs,
        reference.tokenizer,
        batch_size=4,
        num_batches=STEPS,
        max_prompt_length=88,
        max_response_length=48,
    )
    settings = dataclasses.replace(
        recipes.DPO.smoke(),
        algorithm=algorithm,
        beta=0.5,
        learning_rate=1e-3,
        clip_norm=1.0,
        steps=STEPS,
        eval_every=10**6,
        checkpoint_every=EVERY,
    )
    # the one builder of 03's DPO and of 06's preference stage (SimPO: tunix's DPOTrainer with
    # tunixkit's loss)
    trainer = preferences.trainer(settings, actor, reference.model, output_dir=out)
    _record_batches(trainer, out / "trained.jsonl")
    return trainer, batches, None, actor


def simpo(out: pathlib.Path, mesh):
    return dpo(out, mesh, algorithm="simpo")


def agentic_grpo(out: pathlib.Path, mesh, trace=None):
    """07's learner: tunix's agentic GRPO with the calculator, as agentic.build makes it
    (``trace``: a ``profiling.StepTrace`` for its first steps), on ``agentic.training_mesh``."""
    reference = models.load_model("tiny-gemma3-sft", mesh=mesh, verbose=False)
    actor = models.apply_lora(reference.model, rank=8, alpha=16.0, mesh=mesh, verbose=False)
    settings = rl.GRPOSettings(
        learning_rate=3e-3,
        beta=0.1,
        max_prompt_length=1024,  # the conversation of two turns grows past 512 tokens
        max_generation_steps=16,
        batch_size=2,
        num_generations=2,
        num_steps=STEPS,
        checkpoint_every=EVERY,
        temperature=1.0,
    )
    learner, _, _ = agentic.build(
        actor,
        reference.model,
        reference.tokenizer,
        mesh=mesh,
        settings=settings,
        output_dir=out,
        eos_ids=reference.eos_ids,
        vocab_size=reference.config.num_embed,
        max_turns=2,
        trace=trace,
    )
    batches = data.grpo_dataset(
        _records(200, 0), batch_size=2, num_batches=STEPS, seed=0, system_prompt=None
    )
    return learner, batches, None, actor


def distillation(out: pathlib.Path, mesh):
    from tunix.distillation import distillation_trainer

    teacher = models.load_model("tiny-gemma3-sft", mesh=mesh, verbose=False)
    student = models.load_model("tiny-gemma3-student", mesh=mesh, verbose=False)
    batches = training.sft_dataset(
        [data.sft_pair(r) for r in _records(64, 3)],
        teacher.tokenizer,
        max_len=144,
        batch_size=4,
        num_batches=STEPS,
        verbose=False,
    )
    config = training.trainer_config(
        out,
        max_steps=STEPS,
        eval_every=10**6,
        checkpoint_every=EVERY,
        description=None,
        config_cls=distillation_trainer.TrainingConfig,
    )
    trainer = distillation_trainer.DistillationTrainer(
        student.model,
        teacher.model,
        distill.strategy(student.config.num_embed, temperature=2.0, alpha=0.7),
        training.optimizer(3e-3, STEPS),
        config,
    ).with_gen_model_input_fn(training.model_inputs_fn(teacher.tokenizer.pad_id()))
    _record_batches(trainer, out / "trained.jsonl")
    return trainer, batches, None, student.model


JOBS = {
    "grpo": grpo,
    "dpo": dpo,
    "simpo": simpo,
    "agentic": agentic_grpo,
    "distill": distillation,
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=sorted(JOBS))
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument(
        "--stop-after", type=int, help="train only this many steps (a session clock stop)"
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    mesh = runtime.make_mesh()
    if args.kind == "agentic":
        mesh = agentic.training_mesh(mesh)  # as agentic.stage trains it
    trainer, batches, eval_batches, model = JOBS[args.kind](args.out, mesh)
    if args.stop_after:
        batches = batches[: args.stop_after]
    restored = runlog.digest(model)
    result = training.run(
        trainer,
        batches,
        eval_batches,
        mesh=mesh,
        metrics_file=args.out / "metrics.jsonl",
        label=args.kind,
    )
    print(
        json.dumps(
            dataclasses.asdict(result) | {"restored": restored, "digest": runlog.digest(model)}
        )
    )


if __name__ == "__main__":
    main()
