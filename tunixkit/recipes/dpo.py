"""The presets of notebook 03_dpo: :class:`DPO`."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from tunixkit import evaluation
from tunixkit.evaluation import Bar
from tunixkit.recipes._base import _Presets

__all__ = ["DPO"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class DPO(_Presets):
    """03_dpo: DPO (or ORPO) on preference pairs, on-policy from GSM8K by default."""

    PARAMETERS: ClassVar[dict[str, str | tuple[str, ...]]] = {  # start_notebook
        "MODEL_ID": "model_id",
        "MODEL_PATH": "inputs.model_path",
        "NUM_STEPS": "steps",
        "LEARNING_RATE": "learning_rate",
        "LORA_RANK": "lora_rank",
        "EVAL_QUESTIONS": "eval_questions",
        "ALGORITHM": "algorithm",
        "PAIRS": "inputs.pairs",
        "FIELDS": "inputs.fields",
        "DATA_SOURCE": "inputs.data_source",
    }

    # The last cell's bars (the runs behind them, trained and untrained: docs/tuning.md#no-learning)
    BARS: ClassVar[tuple[Bar, ...]] = (
        # each learning bar at most half way from the untrained figure (every pair ties: 0.5) to
        # the trained one (0.90 on every setting tried: docs/tuning.md#03-dpo-smoke)
        Bar("preference_accuracy_after", ">=", 0.7, "held-out preference accuracy"),
        # untrained, the margin moves by float rounding alone (2e-7); trained, by 11
        Bar("margin_gain", ">", 1.0, "held-out reward margin grew (last - first)"),
        Bar("greedy_accuracy_change", ">=", -0.05, "greedy accuracy not lost", guard=True),
        Bar("format_after", ">=", 0.9, "format not broken", guard=True),
    )

    model_id: str = "gemma-3-1b-it"
    lora_rank: int | None = 64  # None: full fine-tuning
    # adapters scaled by alpha / rank; None: the rank (LORA_RANK alone)
    lora_alpha: float | None = 64.0
    # "dpo", "orpo" or "simpo" (ORPO and SimPO need no reference model in training)
    algorithm: str = "dpo"
    beta: float = 0.1  # DPO's KL strength (SimPO's reward scale)
    lambda_orpo: float = 0.1  # ORPO's preference-loss weight
    simpo_gamma: float = 0.5  # SimPO's target margin
    learning_rate: float = 5e-6  # peak AdamW learning rate (warmup-cosine)
    clip_norm: float = 0.1
    steps: int = 1000
    batch_size: int = 8  # pairs per step
    max_prompt_length: int = 256
    max_response_length: int = 512
    pair_questions: int = 2000  # training questions sampled for on-policy pairs
    pair_samples: int = 4  # sampled answers per question
    pair_temperature: float = 1.0  # sampling temperature for the pairs
    heldout_questions: int = 128  # test questions for held-out pairs
    eval_every: int = 100
    checkpoint_every: int = 100
    eval: evaluation.EvalConfig = evaluation.EvalConfig.full()  # greedy evaluation before/after
    eval_questions: int | None = None

    @classmethod
    def smoke(cls) -> DPO:
        return cls(
            model_id="tiny-gemma3-sft",
            lora_rank=16,
            lora_alpha=None,
            beta=1.5,
            learning_rate=7e-4,
            clip_norm=1.0,
            steps=120,
            batch_size=16,
            max_prompt_length=88,
            max_response_length=48,
            pair_questions=1000,
            pair_samples=3,
            pair_temperature=1.5,
            heldout_questions=200,
            eval_every=40,
            checkpoint_every=40,
            eval=evaluation.EvalConfig.smoke(),
        )

    @classmethod
    def one_chip(cls) -> DPO:
        # One 16 GiB chip: 1 pair per step (the same pairs in 8x the steps). Compiled for an H200
        # (bench/results/memplan_gpu.json, a stand-in for the TPU), 2 pairs took 16.9 GiB (3.6 MiB
        # per token of the 4 rows of 256 + 512, beside the policy and reference); 1 pair ~9.5.
        return dataclasses.replace(
            cls.full(), batch_size=1, steps=8000, eval_every=800, checkpoint_every=400
        )
