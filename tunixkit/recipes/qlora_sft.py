"""The presets of notebook 01_qlora_sft: :class:`SFT`."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from tunixkit import evaluation
from tunixkit.evaluation import Bar
from tunixkit.recipes._base import _Presets

__all__ = ["SFT"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class SFT(_Presets):
    """01_qlora_sft: LoRA/QLoRA SFT into the reasoning format."""

    PARAMETERS: ClassVar[dict[str, str | tuple[str, ...]]] = {  # start_notebook
        "MODEL_ID": "model_id",
        "NUM_STEPS": "steps",
        "LEARNING_RATE": "learning_rate",
        "LORA_RANK": "lora_rank",
        "QLORA": "qlora",
        "EVAL_QUESTIONS": "eval_questions",
        "DATA_SOURCE": "inputs.data_source",
        "DATASET": "inputs.dataset",
        "PROMPT_FIELD": "inputs.prompt_field",
        "RESPONSE_FIELD": "inputs.response_field",
    }

    # The last cell's bars (the runs behind them, trained and untrained: docs/tuning.md#no-learning)
    BARS: ClassVar[tuple[Bar, ...]] = (
        # each learning bar at most half way from the untrained figure to the trained one
        Bar("format_after", ">=", 0.5, "format after training"),
        Bar("eval_loss_ratio", "<=", 0.6, "held-out loss cut by 40% or more (last / first)"),
        # the format check proves SFT taught it only if the start model did not already know it
        Bar("format_before", "<=", 0.2, "format before training", guard=True),
    )

    model_id: str = "gemma-3-1b-it"
    lora_rank: int = 64
    lora_alpha: float = 64.0
    qlora: bool = True  # nf4 backbone under the adapters
    learning_rate: float = 1e-4  # peak AdamW learning rate (warmup-cosine)
    steps: int = 930  # optimizer steps: ~2 epochs of GSM8K train (7,473 solutions) at 16 per step
    batch_size: int = 16  # examples per step
    # tokens per row (prompt + target); longer examples are counted and truncated
    max_len: int = 512
    # fill each row with as many whole examples as fit (block-diagonal attention)
    packing: bool = True
    eval_every: int = 100  # steps between held-out loss evaluations
    eval_examples: int = 256  # held-out examples for the loss (a multiple of batch_size)
    checkpoint_every: int = 100
    eval: evaluation.EvalConfig = evaluation.EvalConfig.full()  # generation, before and after
    eval_questions: int | None = None  # None: the whole test split

    @classmethod
    def smoke(cls) -> SFT:
        # From the random tiny model: 150 steps take format compliance from 0 to ~1 (~65 s on CI).
        return cls(
            model_id="tiny-gemma3",
            lora_rank=16,
            lora_alpha=16.0,
            learning_rate=3e-3,
            steps=150,
            max_len=144,
            eval_every=25,
            eval_examples=64,
            checkpoint_every=25,
            eval=evaluation.EvalConfig.smoke(),
        )

    @classmethod
    def one_chip(cls) -> SFT:
        # One 16 GiB chip (Colab v5e-1): 4 rows of 512 per step, the same ~2 epochs in 4x the steps.
        return dataclasses.replace(
            cls.full(), batch_size=4, steps=3700, eval_examples=64, checkpoint_every=200
        )
