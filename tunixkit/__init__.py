"""tunixkit: thin helpers for post-training Gemma with Google Tunix, used by the notebooks.

Modules, one concern each:
  runtime      profile (smoke/full), platform, mesh, secrets
  models       load_model (HF / Kaggle / local / smoke) onto a mesh, LoRA and QLoRA
  checkpoints  HF-layout writer and validation, Orbax save/restore, merged and Orbax export
  data         GSM8K records from any source, the chat template, pipelines
  answers      answer extraction and numeric checking
  rewards      GRPO reward functions
  evaluation   batched generation and the GSM8K evaluator
  training     SFT batches, optimizer, budget, trainer config and run, metrics on disk, digest
  rl           GRPO wiring (RLCluster + GRPOLearner), curves, held-out reward
  preferences  DPO/ORPO pairs (on-policy or a dataset), tokenization, held-out scores
  recipes      the smoke/full presets of each notebook
  testing      tiny Gemma3, offline tokenizer, synthetic GSM8K (public)
  doctor       checks that the installed tunix offers every API tunixkit calls
"""

__version__ = "0.1.0"
