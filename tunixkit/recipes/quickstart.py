"""The presets of notebook 00_quickstart: :class:`Quickstart`."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from tunixkit import evaluation
from tunixkit.recipes._base import _Presets

__all__ = ["Quickstart"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Quickstart(_Presets):
    """00_quickstart: load a model, answer a few questions."""

    PARAMETERS: ClassVar[dict[str, str | tuple[str, ...]]] = {  # start_notebook
        "MODEL_PATH": "inputs.model_path",
        "MODEL_ID": "model_id",
    }

    model_id: str = "gemma-3-1b-it"  # a tunixkit.models.MODELS id
    num_questions: int = 4  # questions to answer
    # generation settings
    eval: evaluation.EvalConfig = dataclasses.replace(
        evaluation.EvalConfig.full(), max_generation_steps=512, batch_size=4
    )

    @classmethod
    def smoke(cls) -> Quickstart:
        return cls(model_id="tiny-gemma3-sft", eval=evaluation.EvalConfig.smoke())
