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

    model_id: str
    lora_rank: int | None  # None: full fine-tuning (reference = a second copy)
    lora_alpha: float | None  # adapters scaled by alpha / rank; None: the rank (LORA_RANK alone)
    lora_modules: str | None  # qwix regex of the modules given adapters; None: attention and MLP
    qlora: bool  # nf4 backbone under the adapters
    grpo: rl.GRPOSettings
    eval: evaluation.EvalConfig  # greedy evaluation before/after
    eval_questions: int | None  # None: the whole test split (1,319 for GSM8K)
    heldout_questions: int  # held-out prompts for the sampled-reward check
    heldout_samples: int  # completions per held-out prompt
    # "gsm8k" (one number per answer) or "math": MATH's train split (LaTeX answers, rewarded by
    # rewards.latex_answer_match), evaluated on MATH-500; the bars were measured on "gsm8k"
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
        # LoRA r16 on the MLP, lr 2e-3, tunix's "kl" estimator: held-out reward +0.30, greedy
        # 0.56 -> 0.56 (the runs behind it: docs/tuning.md#02-grpo-smoke).
        settings = rl.GRPOSettings(
            learning_rate=2e-3,
            beta=0.04,
            clip_norm=1.0,
            weight_decay=0.0,
            warmup_ratio=0.05,
            temperature=1.0,
            max_prompt_length=96,
            max_generation_steps=64,
            batch_size=8,
            num_generations=8,
            num_steps=120,
            checkpoint_every=40,
        )
        return cls(
            model_id="tiny-gemma3-sft",
            lora_rank=16,
            lora_alpha=None,
            qlora=False,
            lora_modules=_MLP_LORA,
            grpo=settings,
            eval=evaluation.EvalConfig.smoke(),
            eval_questions=None,
            heldout_questions=200,
            heldout_samples=4,
        )

    @classmethod
    def full(cls) -> GRPO:
        # 9 h Kaggle session: ~0.5 h load + eval before, ~0.75 h eval after + exports, margin.
        settings = rl.GRPOSettings(
            max_prompt_length=256,
            max_generation_steps=768,
            batch_size=4,
            micro_batch_size=2,
            num_steps=3_000,
            checkpoint_every=100,
        )
        return cls(
            model_id="gemma-3-1b-it",
            lora_rank=64,
            lora_alpha=64.0,
            qlora=False,
            lora_modules=None,
            grpo=settings,
            eval=evaluation.EvalConfig.full(),
            eval_questions=None,
            heldout_questions=128,
            heldout_samples=1,
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
