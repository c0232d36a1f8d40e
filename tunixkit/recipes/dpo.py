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

    model_id: str
    lora_rank: int | None  # None: full fine-tuning
    lora_alpha: float | None  # adapters scaled by alpha / rank; None: the rank (LORA_RANK alone)
    algorithm: str  # "dpo" or "orpo" (ORPO needs no reference model in training)
    beta: float  # DPO's KL strength
    lambda_orpo: float  # ORPO's preference-loss weight
    learning_rate: float  # peak AdamW learning rate (warmup-cosine)
    clip_norm: float
    steps: int
    batch_size: int  # pairs per step
    max_prompt_length: int
    max_response_length: int
    pair_questions: int  # training questions sampled for on-policy pairs
    pair_samples: int  # sampled answers per question
    pair_temperature: float  # sampling temperature for the pairs
    heldout_questions: int  # test questions for held-out pairs
    eval_every: int
    checkpoint_every: int
    eval: evaluation.EvalConfig  # greedy evaluation before/after
    eval_questions: int | None

    @classmethod
    def smoke(cls) -> DPO:
        # LoRA r16 (attention and MLP), beta 1.5, lr 7e-4, 120 steps: held-out preference accuracy
        # 0.5 -> 0.910 / 0.905 and greedy 0.67 -> 0.650 / 0.395 -> 0.470 on CI's two kinds of
        # machine (the runs behind it: docs/tuning.md#03-dpo-smoke).
        return cls(
            model_id="tiny-gemma3-sft",
            lora_rank=16,
            lora_alpha=None,
            algorithm="dpo",
            beta=1.5,
            lambda_orpo=0.1,
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
            eval_questions=None,
        )

    @classmethod
    def full(cls) -> DPO:
        return cls(
            model_id="gemma-3-1b-it",
            lora_rank=64,
            lora_alpha=64.0,
            algorithm="dpo",
            beta=0.1,
            lambda_orpo=0.1,
            # LoRA rank 64 on the real Gemma 3 270M, 30 steps of 4 on-policy pairs: 3e-5 collapsed
            # it (chosen answers' log-probability -3 -> -24, every greedy answer empty: format 1.00
            # -> 0.00); 5e-6 reached the same held-out preference accuracy (0.875) with the format
            # whole (bench/results/real_270m_cpu.json, runs 03 and 03-lr)
            learning_rate=5e-6,
            clip_norm=0.1,
            steps=1000,
            batch_size=8,
            max_prompt_length=256,
            max_response_length=512,
            pair_questions=2000,
            pair_samples=4,
            pair_temperature=1.0,
            heldout_questions=128,
            eval_every=100,
            checkpoint_every=100,
            eval=evaluation.EvalConfig.full(),
            eval_questions=None,
        )

    @classmethod
    def one_chip(cls) -> DPO:
        # One 16 GiB chip: 1 pair per step (the same pairs in 8x the steps). Compiled for an H200
        # (bench/results/memplan_gpu.json, a stand-in for the TPU), 2 pairs took 16.9 GiB (3.6 MiB
        # per token of the 4 rows of 256 + 512, beside the policy and reference); 1 pair ~9.5.
        return dataclasses.replace(
            cls.full(), batch_size=1, steps=8000, eval_every=800, checkpoint_every=400
        )
