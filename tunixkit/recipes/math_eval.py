"""The presets of notebook 05_math_eval: :class:`MathEval`."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from tunixkit import evaluation
from tunixkit.recipes._base import _Presets

__all__ = ["MathEval"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class MathEval(_Presets):
    """05_math_eval: several models on the GSM8K test set, MATH-500 and MATH."""

    PARAMETERS: ClassVar[dict[str, str | tuple[str, ...]]] = {  # start_notebook
        "MODELS": "inputs.models",
        "LIMIT": "inputs.limit",
        "BENCHMARKS": "benchmarks",
    }

    models: dict[str, str]  # display name -> model id or HF-layout folder
    base_id: str  # the model id whose family/tokenizer rules apply to local folders
    eval: evaluation.EvalConfig
    # evaluated beside GSM8K: "math500", "math" (LaTeX answers, checked by math-verify)
    benchmarks: tuple[str, ...] = ("math500",)

    @classmethod
    def smoke(cls) -> MathEval:
        return cls(
            models={"tiny-random": "tiny-gemma3", "tiny-sft": "tiny-gemma3-sft"},
            base_id="tiny-gemma3",
            eval=evaluation.EvalConfig.smoke(),
            benchmarks=("math500", "math"),  # each one's fixture, end to end
        )

    @classmethod
    def full(cls) -> MathEval:
        return cls(
            models={"gemma-3-1b-it": "gemma-3-1b-it", "grpo": "runs/02_grpo_gsm8k/export/hf"},
            base_id="gemma-3-1b-it",
            eval=evaluation.EvalConfig.full(),
            benchmarks=("math500",),  # MATH's 5,000 problems on request: BENCHMARKS
        )
