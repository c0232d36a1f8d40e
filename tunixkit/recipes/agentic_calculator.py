"""The presets of notebook 07_agentic_calculator: :class:`Agentic`."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from tunixkit import evaluation, prompting, rl
from tunixkit.evaluation import Bar
from tunixkit.recipes._base import _Presets

__all__ = ["Agentic"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Agentic(_Presets):
    """07_agentic_calculator: a warm start on tool-use traces, then agentic GRPO with a
    calculator."""

    PARAMETERS: ClassVar[dict[str, str | tuple[str, ...]]] = {  # start_notebook
        "MODEL_ID": "model_id",
        "NUM_STEPS": "num_steps",
        "SFT_STEPS": "sft_steps",
        "LEARNING_RATE": "learning_rate",
        "LORA_RANK": "lora_rank",
        "NUM_GENERATIONS": "num_generations",
        "EVAL_QUESTIONS": "eval_questions",
        "GENERATION_STEPS": ("eval.max_generation_steps", "grpo.max_generation_steps"),
        "DATA_SOURCE": "inputs.data_source",
        "JUDGED": "judged",
    }

    # The last cell's bars (the runs behind them, trained and untrained: docs/tuning.md#no-learning)
    BARS: ClassVar[tuple[Bar, ...]] = (
        # near half of what training moved each figure: 0.05 -> 0.92, 0 -> 1, -0.08 -> 0.92
        Bar("accuracy_gain", ">=", 0.4, "held-out accuracy with the tool rose"),
        Bar("well_formed_call_gain", ">=", 0.5, "episodes with a well-formed call rose"),
        Bar("tool_advantage", ">=", 0.4, "the trained model is more accurate with the tool"),
    )

    model_id: str = "gemma-3-1b-it"
    sft_lora_rank: int | None = 64  # the warm start's LoRA rank; None: full fine-tuning
    lora_rank: int = 64  # the GRPO stage's LoRA rank (on the shared reference)
    lora_alpha: float = 64.0
    sft_steps: int = 200  # warm-start steps on tool-use traces
    sft_learning_rate: float = 1e-4
    batch_size: int = 16  # warm-start rows per step
    max_len: int = 1024  # warm-start tokens per row
    trace_questions: int = 3000  # training questions turned into warm-start traces
    tool_share: float = 1.0  # the share of traces that call the tool; the rest answer directly
    max_operand: int = 0  # smoke: the largest number added or subtracted (the tool earns its keep)
    # only the problems one calculation answers, trained and held out (smoke: one call to learn)
    single_call: bool = False
    max_turns: int = 4  # model turns per episode (tool calls + the answer)
    tools_prompt: str | None = None  # None: tunix's JSON-schema tool prompt; else this text
    grpo: rl.GRPOSettings = rl.GRPOSettings(
        max_prompt_length=1024,
        max_generation_steps=512,
        micro_batch_size=2,
        num_steps=1000,
        checkpoint_every=50,
    )
    # greedy; max_generation_steps: per episode, as grpo's
    eval: evaluation.EvalConfig = dataclasses.replace(
        evaluation.EvalConfig.full(), max_prompt_length=1024, max_generation_steps=512
    )
    eval_questions: int = 500
    # each stage's share of the training time
    shares: dict[str, float] = dataclasses.field(
        default_factory=lambda: {"sft": 0.15, "grpo": 0.85}
    )
    # whether the tool model is also written as the judged model (ckpts/actor/<step>): the
    # competition's judges run no tool, so not unless asked
    judged: bool = False

    def validate(self) -> None:
        """Training and the evaluations share one token budget per episode; no rollout
        micro-batch (tunix's agentic learner has none)."""
        if self.eval.max_generation_steps != self.grpo.max_generation_steps:
            raise ValueError(
                "Agentic: eval.max_generation_steps "
                f"({self.eval.max_generation_steps}) and grpo.max_generation_steps "
                f"({self.grpo.max_generation_steps}) are both the episode's token budget (every "
                "model turn and tool result, as tunix counts it in training): set them equal, "
                "e.g. with the notebook's GENERATION_STEPS"
            )
        if self.grpo.rollout_micro_batch_size is not None:
            raise ValueError(
                "Agentic: grpo.rollout_micro_batch_size "
                f"({self.grpo.rollout_micro_batch_size}) is not used: tunix's agentic learner "
                "runs each prompt's episodes on their own; leave it None"
            )

    @classmethod
    def smoke(cls) -> Agentic:
        grpo = dataclasses.replace(
            rl.GRPOSettings.smoke(),
            learning_rate=1e-3,
            max_prompt_length=160,
            max_generation_steps=80,
            batch_size=4,
            num_generations=4,
            num_steps=20,  # 0.05 -> 0.92; 30 steps: 0.96 (docs/tuning.md#07-agentic-smoke)
            checkpoint_every=10,
        )
        return cls(
            model_id="tiny-gemma3-sft",
            sft_lora_rank=None,
            lora_rank=16,
            lora_alpha=16.0,
            sft_steps=160,
            sft_learning_rate=3e-3,
            max_len=192,
            trace_questions=1200,
            tool_share=0.3,
            max_operand=99,
            single_call=True,
            max_turns=2,
            tools_prompt=prompting.SHORT_TOOL_PROMPT,
            grpo=grpo,
            eval=dataclasses.replace(
                evaluation.EvalConfig.smoke(), max_prompt_length=160, max_generation_steps=80
            ),
            eval_questions=128,
            shares={"sft": 0.3, "grpo": 0.7},
        )

    @classmethod
    def one_chip(cls) -> Agentic:
        # One 16 GiB chip (Colab v5e-1), sized by plans compiled for an H200 (a stand-in for the
        # TPU; bench/results/memplan_gpu.json "rechecks"): the warm start's 4 rows of 1,024 took
        # 18.4 GiB, 2 rows 11.9 (8x the steps: the same rows seen); GRPO's G=4 episodes of
        # 1,024 + 512 tokens took 26.5 GiB, of 384 + 256 14.0 (384 + 320: 15.4; 512 + 256: 16.2).
        # 384 prompt tokens hold the question with the short tool prompt (tunix's JSON-schema one
        # is ~340 tokens alone); 256 hold a call, its result and the answer. A v5e chip's own
        # compile of that GRPO step: 11.5 GiB (memplan_tpu_aot.json). Run REHEARSAL = True first:
        # it reports the peak memory against the chip's.
        full = cls.full()
        return dataclasses.replace(
            full,
            batch_size=2,
            sft_steps=8 * full.sft_steps,
            tools_prompt=prompting.SHORT_TOOL_PROMPT,
            grpo=dataclasses.replace(
                full.grpo,
                batch_size=2,
                micro_batch_size=1,
                max_prompt_length=384,
                max_generation_steps=256,
            ),
            eval=dataclasses.replace(full.eval, max_prompt_length=384, max_generation_steps=256),
        )
