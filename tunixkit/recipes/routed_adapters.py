"""The presets of notebook 09_routed_adapters (:class:`Routed`): 06's settings (the tasks, the
judge, the evaluations, stage 1's SFT for the smoke warm start) and the adapters'."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from tunixkit.evaluation import Bar
from tunixkit.recipes.curation import _fields
from tunixkit.recipes.multidomain_pipeline import TRACE_PARAMETERS, Pipeline

__all__ = ["Routed"]

_ROUTES = {
    "math": ("math",),
    "writing": ("creative", "ideation", "summarization", "science", "code"),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Routed(Pipeline):
    """09_routed_adapters: a LoRA adapter per group of domains from one base, routed by the
    prompt's domain, against one adapter trained on everything for as many steps in all, and
    against the adapters merged into one checkpoint. 06's preference and GRPO settings are not
    used here."""

    PARAMETERS: ClassVar[dict[str, str | tuple[str, ...]]] = {  # start_notebook
        **TRACE_PARAMETERS,  # 06's model, judge and traces
        "ROUTES": "routes",
        "ADAPTER_STEPS": "adapter_steps",
        "WARM_STEPS": "warm_steps",
        "MERGE_WEIGHTS": "merge_weights",
    }

    BARS: ClassVar[tuple[Bar, ...]] = (
        Bar(
            "routed_vs_base_low",
            ">",
            0.0,
            "the routed adapters raised the judged score over the base (95% low end)",
        ),
        Bar("router_accuracy", ">=", 0.9, "the router sent held-out prompts right", guard=True),
    )

    # adapter: the domains routed to it
    routes: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=lambda: dict(_ROUTES))
    # SFT steps on every training row before the adapters (06's stage 1: in smoke every weight, the
    # tiny model has only seen arithmetic); 0: the adapters start from the model as it is
    warm_steps: int = 0
    adapter_steps: int = 400  # SFT steps of each routed adapter; the one adapter trains their sum
    adapter_learning_rate: float = 1e-4
    # each adapter's weight in the merged checkpoint (None: 1 / adapters each, the mean update)
    merge_weights: dict[str, float] | None = None

    @classmethod
    def smoke(cls) -> Routed:
        # routed +0.12 (95% low end +0.08) over the warm-started base; against one adapter trained
        # as long in all, routed -0.02 (±0.04) and merged -0.08 (docs/tuning.md#09-routed-smoke)
        return cls(
            **_fields(Pipeline.smoke()),
            warm_steps=60,
            adapter_steps=100,
            adapter_learning_rate=5e-3,
        )
