"""tunixkit: thin helpers for post-training Gemma with Google Tunix, used by the notebooks.

Modules, one concern each:
  runtime      profile (smoke/full), platform, mesh, secrets
  models       load_model (HF / Kaggle / local / smoke) onto a mesh, LoRA and QLoRA
  checkpoints  HF-layout writer and validation, Orbax save/restore, merged and Orbax export
  data         GSM8K records from any source, the chat template, pipelines
  answers      answer extraction and numeric checking
  rewards      GRPO reward functions
  evaluation   batched generation and the GSM8K evaluator
  training     SFT batches, optimizer, wall-clock budget, trainer options
  plots        training curves
  testing      tiny Gemma3, offline tokenizer, synthetic GSM8K (public)
  doctor       checks that the installed tunix offers every API tunixkit calls
"""

__version__ = "0.1.0"
