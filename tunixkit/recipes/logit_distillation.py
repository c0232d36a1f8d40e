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

    teacher_id: str = "gemma-3-1b-it"
    student_id: str = "gemma-3-270m-it"  # must share the teacher's vocabulary
    temperature: float = 2.0  # softens both distributions for the soft loss
    alpha: float = 0.7  # weight of the soft loss; 1 - alpha on the hard (task) loss
    learning_rate: float = 5e-5
    steps: int = 1000
    batch_size: int = 16
    max_len: int = 512  # tokens per example (prompt + reference solution)
    eval_every: int = 100
    eval_examples: int = 256  # held-out examples for the losses (a multiple of batch_size)
    checkpoint_every: int = 100
    # greedy evaluation of teacher and student
    eval: evaluation.EvalConfig = evaluation.EvalConfig.full()
    eval_questions: int | None = None

    @classmethod
    def smoke(cls) -> Distill:
        return cls(
            teacher_id="tiny-gemma3-sft",
            student_id="tiny-gemma3-student",
            temperature=1.0,
            learning_rate=3e-3,
            steps=150,
            max_len=144,
            eval_every=25,
            eval_examples=64,
            checkpoint_every=25,
            eval=evaluation.EvalConfig.smoke(),
        )

    @classmethod
    def one_chip(cls) -> Distill:
        # One 16 GiB chip: 4 rows of 512 per step (the [rows, 512, 262k] logits dominate).
        return dataclasses.replace(
            cls.full(), batch_size=4, steps=4000, eval_examples=64, checkpoint_every=200
        )
