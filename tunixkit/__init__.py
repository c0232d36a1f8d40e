"""tunixkit: thin helpers for post-training Gemma with Google Tunix, used by the notebooks.

Modules, one concern each (each opens with a docstring saying more):

  runtime      profile (smoke/full), platform, mesh, secrets
  session      the session clock, recipe.json, RESUME_FROM continuation, Kaggle Model upload
  recipes      the smoke/full presets of each notebook; start(), every notebook's setup cell
  families     what differs between families (config.json, HF layout, LoRA targets, chat template)
  models       load_model (HF / Kaggle / local / smoke) onto a mesh; LoRA and QLoRA
  tokenizer    one interface over SentencePiece and Hugging Face tokenizers
  checkpoints  HF-layout writer and validation, Orbax save/restore, the export (merged HF + Orbax)
  data         GSM8K records from any source, prompts in a family's chat template, GRPO batches
  answers      answer extraction and numeric checking
  rewards      GRPO reward functions (a registry the property tests walk)
  evaluation   batched generation and the GSM8K evaluator, paired comparisons
  training     SFT batches (packing), optimizer, trainer options, run(): the one training loop
  runlog       metrics.jsonl across sessions, curves, weights digest
  rl           GRPO wiring (RLCluster + GRPOLearner), curves, held-out reward, rollout engines
  preferences  DPO/ORPO pairs (on-policy or a dataset), tokenization, held-out scores
  distill      logit distillation: vocabulary check, LogitStrategy, held-out losses
  domains      the competition's domains: traces in any shape, smoke tasks, per-domain evaluation
  judging      rewards without a ground truth: rubric checks, an LLM judge, relevance, weights
  pipeline     stages in one session (SFT, self-improvement, SimPO/DPO, GRPO), notebook 06
  calculator   a safe calculator: parsed and bounded, never eval
  agentic      agentic GRPO with the calculator tool and tunix 0.1.7's workarounds, notebook 07
  memplan      memory plan: each recipe's step programs compiled at real shape, bytes per device
  smoke        the smoke profile's tiny models, offline tokenizer and data
  doctor       checks that the installed tunix offers every API tunixkit uses
  testing      helpers for tunixkit's own tests
"""

__version__ = "0.3.0"
