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

    # display name -> model id or HF-layout folder
    models: dict[str, str] = dataclasses.field(
        default_factory=lambda: {
            "gemma-3-1b-it": "gemma-3-1b-it",
            "grpo": "runs/02_grpo_gsm8k/export/hf",
        }
    )
    # the model id whose family/tokenizer rules apply to local folders
    base_id: str = "gemma-3-1b-it"
    eval: evaluation.EvalConfig = evaluation.EvalConfig.full()
    # evaluated beside GSM8K: "math500", "math" (LaTeX answers, checked by math-verify); MATH's
    # 5,000 problems on request: BENCHMARKS
    benchmarks: tuple[str, ...] = ("math500",)

    @classmethod
    def smoke(cls) -> MathEval:
        return cls(
            models={"tiny-random": "tiny-gemma3", "tiny-sft": "tiny-gemma3-sft"},
            base_id="tiny-gemma3",
            eval=evaluation.EvalConfig.smoke(),
            benchmarks=("math500", "math"),  # each one's fixture, end to end
        )
