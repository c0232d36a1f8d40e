"""The presets of notebook 08_curation (:class:`Curation`): 06's settings (the tasks, the judge,
the evaluations, stage 1's SFT) and the curation pass's."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from tunixkit.curation import Filters
from tunixkit.evaluation import Bar
from tunixkit.recipes.multidomain_pipeline import TRACE_PARAMETERS, Pipeline

__all__ = ["Curation"]


def _fields(recipe: Pipeline) -> dict[str, Any]:
    return {f.name: getattr(recipe, f.name) for f in dataclasses.fields(Pipeline)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Curation(Pipeline):
    """08_curation: answer many prompts, keep the good answers (``curated.jsonl``, 06's
    ``TRACES`` for the next session), and measure what the filter buys: SFT on the curated rows
    against SFT on the same prompts' uncurated rows, at the same step count. The tasks, judge,
    evaluations and SFT settings are 06's (:class:`Pipeline`); its preference and GRPO settings are
    not used here."""

    PARAMETERS: ClassVar[dict[str, str | tuple[str, ...]]] = {  # start_notebook
        **TRACE_PARAMETERS,  # 06's model, judge and traces
        "MIX_NONCOMMERCIAL": "inputs.mix_noncommercial",
        "CURATE_PROMPTS": "curate_prompts",
        "SAMPLES": "curate_samples",
        "MIN_SCORE": "filters.min_score",
        "MAX_TOKENS": "filters.max_tokens",
        "MAX_REPEAT": "filters.max_repeat",
        "COMPARE_STEPS": "compare_steps",
    }

    BARS: ClassVar[tuple[Bar, ...]] = (
        Bar(
            "curated_vs_uncurated_low",
            ">",
            0.0,
            "SFT on curated rows beat SFT on uncurated ones (paired judged change, 95% low end)",
        ),
        Bar("kept_share", ">", 0.0, "the pass kept some prompts", guard=True),
    )

    # prompts answered (the first of the training prompts, balanced by domain)
    curate_prompts: int = 10000
    curate_samples: int = 4  # answers sampled per prompt (the data's own response is one more)
    with_data: bool = True  # the prompt's response in the data is a candidate too
    filters: Filters = Filters(min_score=0.7, max_tokens=1000)
    # SFT steps of each side of the comparison (curated against uncurated rows, from the start
    # model); 0: no comparison (a full session spends its time on the pass)
    compare_steps: int = 0

    @classmethod
    def smoke(cls) -> Curation:
        # SFT on the 280 curated rows beat SFT on the 480 uncurated ones by +0.136 (95% low end
        # +0.070) in held-out judged score, 150 steps each (docs/tuning.md#08-curation-smoke)
        return cls(
            **_fields(Pipeline.smoke()), curate_prompts=480, curate_samples=2, compare_steps=150
        )
