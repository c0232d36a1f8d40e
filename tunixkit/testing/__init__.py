"""The smoke profile and the helpers of tunixkit's own tests: public, so that CI and a user's own
checks use what the notebooks use in smoke.

Production code reaches this package through one seam only: :func:`tunixkit.runtime.smoke_kit`
(the loader for the tiny model ids, and the smoke profile's GSM8K files). The notebooks use it in
their smoke branches (06: the synthetic tasks, their rubric grader, the weak answers).

- tiny models (``_tiny``): :func:`materialize` (a tiny id's HF-layout folder, built once and
  cached), :func:`config`, :func:`random_model`, the shapes (:data:`TINY_GEMMA3`,
  :data:`TINY_GEMMA2`; the tiny Llama 3 and Qwen tokenizers: :func:`write_family_tokenizer`), the
  warm start (:data:`WARM_START`, its weights shipped: :func:`warm_start_file`, written by
  :func:`write_warm_start`), the offline tokenizer (:func:`load_tokenizer`,
  :func:`build_tokenizer`);
- synthetic data (``_synthetic``): :func:`synthetic_gsm8k` / :func:`write_synthetic_gsm8k`,
  :func:`synthetic_tasks` (every judged domain), :func:`uneven` with :data:`WEAK` answers, and
  :func:`rubric_grader`, the smoke profile's judge;
- test helpers (``_fixtures``): :class:`ScriptedClock`, :func:`randomize_all`, :func:`logits`,
  :func:`notebook_script`, :func:`load_orbax_export`, :func:`kernel_python`, and files in the
  real data sets' layouts (:func:`write_gsm8k_hub`, :func:`write_trace_rows`,
  :func:`write_preference_rows`, :func:`write_chat_traces`, :func:`write_hf_tokenizer`).
"""

from tunixkit.testing._fixtures import (
    ScriptedClock,
    kernel_python,
    load_orbax_export,
    logits,
    notebook_script,
    randomize_all,
    synthetic_math,
    write_chat_traces,
    write_gsm8k_hub,
    write_hendrycks_math,
    write_hf_tokenizer,
    write_math500,
    write_mix_sources,
    write_preference_rows,
    write_smoke_math,
    write_trace_rows,
)
from tunixkit.testing._synthetic import (
    SPLIT_SEEDS,
    WEAK,
    Task,
    rubric_grader,
    synthetic_gsm8k,
    synthetic_tasks,
    uneven,
    write_synthetic_gsm8k,
)
from tunixkit.testing._tiny import (
    SMOKE_MODELS,
    SPECIAL_TOKENS,
    TINY_GEMMA2,
    TINY_GEMMA3,
    WARM_START,
    TinyShape,
    build_tokenizer,
    config,
    gemma2_config,
    gemma3_config,
    load_tokenizer,
    materialize,
    random_model,
    tokenizer_corpus,
    tokenizer_path,
    warm_start,
    warm_start_file,
    write_family_tokenizer,
    write_warm_start,
)

__all__ = [
    "SMOKE_MODELS",
    "SPECIAL_TOKENS",
    "SPLIT_SEEDS",
    "ScriptedClock",
    "TINY_GEMMA2",
    "TINY_GEMMA3",
    "WARM_START",
    "WEAK",
    "Task",
    "TinyShape",
    "build_tokenizer",
    "config",
    "gemma2_config",
    "gemma3_config",
    "kernel_python",
    "load_orbax_export",
    "load_tokenizer",
    "logits",
    "materialize",
    "notebook_script",
    "random_model",
    "randomize_all",
    "rubric_grader",
    "synthetic_gsm8k",
    "synthetic_math",
    "synthetic_tasks",
    "tokenizer_corpus",
    "tokenizer_path",
    "uneven",
    "warm_start",
    "warm_start_file",
    "write_chat_traces",
    "write_gsm8k_hub",
    "write_hendrycks_math",
    "write_hf_tokenizer",
    "write_math500",
    "write_mix_sources",
    "write_preference_rows",
    "write_smoke_math",
    "write_synthetic_gsm8k",
    "write_trace_rows",
    "write_family_tokenizer",
    "write_warm_start",
]
