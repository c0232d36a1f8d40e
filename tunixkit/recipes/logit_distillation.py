"""The presets of notebook 04_logit_distillation: :class:`Distill`."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from tunixkit import evaluation
from tunixkit.evaluation import Bar
from tunixkit.recipes._base import _Presets

__all__ = ["Distill"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Distill(_Presets):
    """04_logit_distillation: a smaller student learns the teacher's next-token distributions."""

    PARAMETERS: ClassVar[dict[str, str | tuple[str, ...]]] = {  # start_notebook
        "TEACHER_ID": "teacher_id",
        "MODEL_ID": "student_id",
        "TEACHER_PATH": "inputs.teacher_path",
        "STUDENT_PATH": "inputs.student_path",
        "NUM_STEPS": "steps",
        "LEARNING_RATE": "learning_rate",
        "EVAL_QUESTIONS": "eval_questions",
        "DATA_SOURCE": "inputs.data_source",
    }

    # The last cell's bars (the runs behind them, trained and untrained: docs/tuning.md#no-learning)
    BARS: ClassVar[tuple[Bar, ...]] = (
        # each learning bar at most half way from the untrained figure to the trained one
        Bar("student_kl_ratio", "<=", 0.6, "student's KL to the teacher cut by 40% or more"),
        Bar("eval_loss_gap_ratio", "<=", 0.6, "eval loss gap to the teacher cut by 40% or more"),
    )

    teacher_id: str
    student_id: str  # must share the teacher's vocabulary
    temperature: float  # softens both distributions for the soft loss
    alpha: float  # weight of the soft loss; 1 - alpha on the hard (task) loss
    learning_rate: float
    steps: int
    batch_size: int
    max_len: int  # tokens per example (prompt + reference solution)
    eval_every: int
    eval_examples: int  # held-out examples for the losses (a multiple of batch_size)
    checkpoint_every: int
    eval: evaluation.EvalConfig  # greedy evaluation of teacher and student
    eval_questions: int | None

    @classmethod
    def smoke(cls) -> Distill:
        # At temperature 2 the student ended further from the teacher on held-out answers (KL at 1)
        # than the same student on the hard loss alone (1.35x); at 1 as close as it (1.02x), not
        # closer (the runs behind it: docs/tuning.md#04-distill-smoke)
        return cls(
            teacher_id="tiny-gemma3-sft",
            student_id="tiny-gemma3-student",
            temperature=1.0,
            alpha=0.7,
            learning_rate=3e-3,
            steps=150,
            batch_size=16,
            max_len=144,
            eval_every=25,
            eval_examples=64,
            checkpoint_every=25,
            eval=evaluation.EvalConfig.smoke(),
            eval_questions=None,
        )

    @classmethod
    def full(cls) -> Distill:
        return cls(
            teacher_id="gemma-3-1b-it",
            student_id="gemma-3-270m-it",
            temperature=2.0,
            alpha=0.7,
            learning_rate=5e-5,
            steps=1000,
            batch_size=16,
            max_len=512,
            eval_every=100,
            eval_examples=256,
            checkpoint_every=100,
            eval=evaluation.EvalConfig.full(),
            eval_questions=None,
        )

    @classmethod
    def one_chip(cls) -> Distill:
        # One 16 GiB chip: 4 rows of 512 per step (the [rows, 512, 262k] logits dominate).
        return dataclasses.replace(
            cls.full(), batch_size=4, steps=4000, eval_examples=64, checkpoint_every=200
        )
