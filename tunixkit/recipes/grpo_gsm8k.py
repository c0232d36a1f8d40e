"""The presets of notebook 02_grpo_gsm8k: :class:`GRPO`."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from tunixkit import evaluation, prompting, rewards, rl
from tunixkit.evaluation import Bar
from tunixkit.recipes._base import _MLP_LORA, _Presets

__all__ = ["GRPO"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class GRPO(_Presets):
    """02_grpo_gsm8k: GRPO on GSM8K from a model with partial skill."""

    PARAMETERS: ClassVar[dict[str, str | tuple[str, ...]]] = {  # start_notebook
        "MODEL_ID": "model_id",
        "MODEL_PATH": "inputs.model_path",
        "NUM_STEPS": "num_steps",
        "LEARNING_RATE": "learning_rate",
        "LORA_RANK": "lora_rank",
        "NUM_GENERATIONS": "num_generations",
        "EVAL_QUESTIONS": "eval_questions",
        "DATA_SOURCE": "inputs.data_source",
        "DATASET": "dataset",
        "MATH_PATH": "inputs.math_path",
        "MATH500_PATH": "inputs.math500_path",
        "USE_RUBRIC": "inputs.use_rubric",
        "ROLLOUT_ENGINE": "rollout_engine",
    }

    # The last cell's bars (the runs behind them, trained and untrained: docs/tuning.md#no-learning)
    BARS: ClassVar[tuple[Bar, ...]] = (
        # each learning bar at most half way from the untrained figure to the trained one
        Bar("heldout_reward_gain", ">=", 0.15, "held-out sampled reward rose"),
        Bar("heldout_accuracy_gain", ">=", 0.02, "held-out sampled accuracy rose"),
        Bar("kl_last", ">", 0.0, "the policy moved off its reference (KL, last logged)"),
        Bar("greedy_accuracy_change", ">=", -0.05, "greedy accuracy not lost", guard=True),
        Bar("format_after", ">=", 0.9, "format not broken", guard=True),
    )

    model_id: str = "gemma-3-1b-it"
    lora_rank: int | None = 64  # None: full fine-tuning (reference = a second copy)
    # adapters scaled by alpha / rank; None: the rank (LORA_RANK alone)
    lora_alpha: float | None = 64.0
    # qwix regex of the modules given adapters; None: attention and MLP
    lora_modules: str | None = None
    qlora: bool = False  # nf4 backbone under the adapters
    grpo: rl.GRPOSettings = rl.GRPOSettings(micro_batch_size=2)
    eval: evaluation.EvalConfig = evaluation.EvalConfig.full()  # greedy evaluation before/after
    eval_questions: int | None = None  # None: the whole test split (1,319 for GSM8K)
    heldout_questions: int = 128  # held-out prompts for the sampled-reward check
    heldout_samples: int = 1  # completions per held-out prompt
    dataset: str = "gsm8k"

    DATASETS: ClassVar[tuple[str, ...]] = ("gsm8k", "math")

    def validate(self) -> None:
        if self.dataset not in self.DATASETS:
            raise ValueError(f"dataset={self.dataset!r}: expected one of {list(self.DATASETS)}")

    @property
    def latex(self) -> bool:
        """Whether the answers are MATH-style LaTeX (checked by math-verify), not one number."""
        return self.dataset == "math"

    def eval_config(self) -> evaluation.EvalConfig:
        """``eval`` with the data set's system prompt (LaTeX answers for "math")."""
        if not self.latex:
            return self.eval
        return dataclasses.replace(self.eval, system_prompt=prompting.LATEX_MATH_SYSTEM_PROMPT)

    def reward_fns(self) -> tuple[rewards.RewardFn, ...]:
        """The data set's rewards: :data:`tunixkit.rewards.DEFAULT_REWARDS` for GSM8K,
        :data:`tunixkit.rewards.LATEX_REWARDS` for MATH."""
        return rewards.LATEX_REWARDS if self.latex else rewards.DEFAULT_REWARDS

    @classmethod
    def smoke(cls) -> GRPO:
        return cls(
            model_id="tiny-gemma3-sft",
            lora_rank=16,
            lora_alpha=None,
            lora_modules=_MLP_LORA,
            grpo=dataclasses.replace(
                rl.GRPOSettings.smoke(),
                warmup_ratio=0.05,
                temperature=1.0,
                num_steps=120,
                checkpoint_every=40,
            ),
            eval=evaluation.EvalConfig.smoke(),
            heldout_questions=200,
            heldout_samples=4,
        )

    @classmethod
    def one_chip(cls) -> GRPO:
        # One 16 GiB chip: 2 prompts x G=4 per step, one prompt's 4 rollouts per forward/backward,
        # answers of at most 320 tokens. Compiled for an H200 (bench/results/memplan_gpu.json, a
        # stand-in for the TPU), the update took 20.0 GiB with 768-token answers and 14.7 with 384
        # (3.4 MiB per token of its 4 rows); 320 gives ~13.8 of the 14.4 GiB a v5e's plan allows.
        # GSM8K reasoning runs 150-300 tokens; the truncated share is in the evaluation.
        full = cls.full()
        # Rollouts one prompt a call, as the plan was compiled (not the whole step: unplanned)
        settings = dataclasses.replace(
            full.grpo,
            batch_size=2,
            micro_batch_size=1,
            rollout_micro_batch_size=1,
            max_generation_steps=320,
        )
        return dataclasses.replace(full, grpo=settings)
