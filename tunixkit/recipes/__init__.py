"""Per-notebook presets: frozen, keyword-only configs with ``smoke()``, ``full()`` and, where the
full profile has one chip (Colab), ``one_chip()``; one file per notebook.

The profile is the one dial: ``Recipe.for_runtime(rt)`` picks the preset, and a notebook's
parameters override single fields through :func:`start` (every notebook's setup cell) instead of
branching on ``if smoke:``. A recipe shows as a table in a notebook. Also here: where each profile's
GSM8K data comes from (:func:`gsm8k`), GRPO's data set (:func:`grpo_records`), and 06's tasks
(:func:`pipeline_tasks`), so notebooks never branch on them either. How the presets' values were
chosen (the runs behind them) is in ``docs/tuning.md``.

==========================  =====================================================
notebook                    preset (file)
==========================  =====================================================
00_quickstart               :class:`Quickstart` (``quickstart.py``)
01_qlora_sft                :class:`SFT` (``qlora_sft.py``)
02_grpo_gsm8k               :class:`GRPO` (``grpo_gsm8k.py``)
03_dpo                      :class:`DPO` (``dpo.py``)
04_logit_distillation       :class:`Distill` (``logit_distillation.py``)
05_math_eval                :class:`MathEval` (``math_eval.py``)
06_multidomain_pipeline     :class:`Pipeline` (``multidomain_pipeline.py``)
07_agentic_calculator       :class:`Agentic` (``agentic_calculator.py``)
08_curation                 :class:`Curation` (``curation.py``)
09_routed_adapters          :class:`Routed` (``routed_adapters.py``)
==========================  =====================================================
"""

from tunixkit.recipes._base import (
    COMPETITION_MODELS,
    Start,
    competition_note,
    grpo_records,
    gsm8k,
    math_benchmark,
    start,
    start_notebook,
)
from tunixkit.recipes.agentic_calculator import Agentic
from tunixkit.recipes.curation import Curation
from tunixkit.recipes.dpo import DPO
from tunixkit.recipes.grpo_gsm8k import GRPO
from tunixkit.recipes.logit_distillation import Distill
from tunixkit.recipes.math_eval import MathEval
from tunixkit.recipes.multidomain_pipeline import Pipeline, Tasks, pipeline_tasks
from tunixkit.recipes.qlora_sft import SFT
from tunixkit.recipes.quickstart import Quickstart
from tunixkit.recipes.routed_adapters import Routed

__all__ = [
    "COMPETITION_MODELS",
    "DPO",
    "GRPO",
    "SFT",
    "Agentic",
    "Curation",
    "Distill",
    "MathEval",
    "Pipeline",
    "Quickstart",
    "Routed",
    "Start",
    "Tasks",
    "competition_note",
    "grpo_records",
    "gsm8k",
    "math_benchmark",
    "pipeline_tasks",
    "start",
    "start_notebook",
]
