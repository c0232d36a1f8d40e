"""tunixkit: thin helpers for post-training Gemma with Google Tunix, used by the notebooks.

Modules by layer, lowest first; a module imports only modules of the layers before its own
(``tests/test_layers.py`` checks it). Each opens with a docstring saying more.

tunix workarounds
  _compat      every tunix 0.1.7 workaround in one place, each with its test, applied where used
processes
  hosts        one run over several processes (a multi-host slice): join, one writer, agreement
basics
  answers      answer extraction and numeric checking
  stats        the intervals and tests every evaluation reports (Wilson, McNemar, clustered means)
  calculator   a safe calculator: parsed and bounded, never eval
  runtime      profile (smoke/full), platform, mesh, secrets; the one seam to the smoke profile
  runlog       metrics.jsonl across sessions, curves, weights digest
  tokenizer    one interface over SentencePiece and Hugging Face tokenizers
  families     what differs between families (config.json, HF layout, LoRA targets, chat template)
the answer format
  prompting    THE answer format (<reasoning>/<answer>, end of turn) and every system prompt
data and files
  session      the session clock, recipe.json, RESUME_FROM continuation, Kaggle Model upload
  data         GSM8K records from any source, SFT pairs, GRPO batches
  rewards      every GRPO reward function: answers, format, rubric checks, relevance, weights
               (a registry the property tests walk)
  checkpoints  HF-layout writer and validation, Orbax save/restore, LoRA merge, the judged artifact
converted checkpoints
  packaged     real models from the package index (GGUF), converted once into the HF layout
training and models
  training     SFT batches (packing), optimizer, trainer options, run(): the one training loop
  models       load_model (HF / Kaggle / local / smoke) onto a mesh; LoRA and QLoRA; export
  evaluation   batched generation and the GSM8K evaluator, paired comparisons
  mix          06's default public data mix, converters that count what they skip
  profiling    where a GRPO step's time goes: tunix's perf tracers over the first steps, a
               Chrome or Perfetto trace, seconds by phase
algorithms
  judging      the LLM judge (or any grader) against a rubric, as a reward and a score
  rl           GRPO wiring (RLCluster + GRPOLearner), curves, held-out reward, rollout engines
  preferences  DPO/ORPO/SimPO pairs (on-policy or a dataset), tokenization, held-out scores
  distill      logit distillation: vocabulary check, LogitStrategy, held-out losses
  domains      the competition's domains: traces in any shape, per-domain evaluation, calibration
stages
  pipeline     stages in one session (SFT, self-improvement, SimPO/DPO, GRPO), notebook 06
  curation     answer many prompts, keep the good answers, write the next session's traces (08)
  routing      adapters by domain from one base: a router, swaps in place, the merged one (09)
agentic
  agentic      agentic GRPO with the calculator tool, notebook 07
recipes
  recipes      the smoke/full presets of each notebook; start(), every notebook's setup cell
above the library (no library module imports them)
  testing      the smoke profile's tiny models and synthetic data, and test helpers
  tools        the memory plan (tools.memplan) and the API check (tools.doctor)

``import tunixkit as tk`` then ``tk.models.load_model(...)``: each namespace is imported on first
use.
"""

import importlib

__version__ = "0.3.0"

__all__ = [
    "agentic",
    "answers",
    "calculator",
    "checkpoints",
    "curation",
    "data",
    "distill",
    "domains",
    "evaluation",
    "families",
    "hosts",
    "judging",
    "mix",
    "models",
    "packaged",
    "pipeline",
    "preferences",
    "profiling",
    "prompting",
    "recipes",
    "rewards",
    "rl",
    "routing",
    "runlog",
    "runtime",
    "session",
    "stats",
    "testing",
    "tokenizer",
    "tools",
    "training",
]


def __getattr__(name: str):
    """``tunixkit.<namespace>`` imported on first use (``import tunixkit`` alone stays light)."""
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
