"""Per-notebook presets: frozen, keyword-only configs with ``smoke()`` and ``full()``.

The profile is the one dial: ``Recipe.for_runtime(rt)`` picks the preset, and notebooks override a
field with ``dataclasses.replace`` instead of branching on ``if smoke:``. Also here: where each
profile's GSM8K data comes from (:func:`gsm8k`), so notebooks never branch on it either.
"""

from __future__ import annotations

import dataclasses
import pathlib

from tunixkit import data, evaluation, testing
from tunixkit.runtime import Runtime


class _Presets:
    @classmethod
    def for_runtime(cls, rt: Runtime):
        return cls.smoke() if rt.smoke else cls.full()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Quickstart(_Presets):
    """00_quickstart: load a model, answer a few questions."""

    model_id: str  # a tunixkit.models.MODELS id
    num_questions: int  # questions to answer
    eval: evaluation.EvalConfig  # generation settings

    @classmethod
    def smoke(cls) -> Quickstart:
        return cls(model_id="tiny-gemma3-sft", num_questions=4, eval=evaluation.EvalConfig.smoke())

    @classmethod
    def full(cls) -> Quickstart:
        return cls(
            model_id="gemma-3-1b-it",
            num_questions=4,
            eval=dataclasses.replace(
                evaluation.EvalConfig.full(), max_generation_steps=512, batch_size=4
            ),
        )


def gsm8k(
    rt: Runtime,
    split: str,
    *,
    data_dir: str | pathlib.Path,
    source: str = "hf",
    limit: int | None = None,
) -> list[data.Record]:
    """GSM8K ``split`` for the profile: the real dataset (full) or synthetic files written to ``data_dir``
    (smoke); both go through the same loader."""
    if rt.smoke:
        paths = testing.write_synthetic_gsm8k(data_dir)
        return data.load_gsm8k(split, source="file", path=str(paths[split]), limit=limit)
    return data.load_gsm8k(split, source=source, limit=limit)
