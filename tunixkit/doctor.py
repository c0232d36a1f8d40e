"""Check that the installed tunix/qwix offer every API tunixkit calls, with the parameters it passes.

Kaggle images ship tunix from git, unpinned; upstream renames things (``RLCluster`` became
``RLEngine`` on main). Run ``python -m tunixkit.doctor`` to see exactly what is missing and what
to install; the setup script runs it on Kaggle and Colab, and ``tests/test_api_drift.py`` in CI.
"""

from __future__ import annotations

import importlib
import inspect
import sys

PIN = "google-tunix==0.1.7"

# (module, attribute path, parameters tunixkit passes by keyword)
REQUIRED_API: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "tunix.models.gemma3.model",
        "ModelConfig",
        (
            "num_layers",
            "num_embed",
            "embed_dim",
            "hidden_dim",
            "num_heads",
            "head_dim",
            "num_kv_heads",
            "sliding_window_size",
            "param_dtype",
        ),
    ),
    ("tunix.models.gemma3.model", "Gemma3", ("config", "rngs")),
    ("tunix.models.gemma3.model", "GEMMA3_ATTENTION_PATTERN", ()),
    (
        "tunix.models.gemma3.params_safetensors",
        "create_model_from_safe_tensors",
        ("file_dir", "config", "mesh", "dtype"),
    ),
    (
        "tunix.models.gemma3.params",
        "save_lora_merged_model_as_safetensors",
        ("local_model_path", "output_dir", "lora_model", "rank", "alpha"),
    ),
    (
        "tunix.models.gemma.params_safetensors",
        "create_model_from_safe_tensors",
        ("file_dir", "config", "mesh", "dtype"),
    ),
    ("tunix.generate.sampler", "Sampler", ("transformer", "tokenizer", "cache_config")),
    (
        "tunix.generate.sampler",
        "CacheConfig",
        ("cache_size", "num_layers", "num_kv_heads", "head_dim"),
    ),
    (
        "tunix.generate.sampler",
        "Sampler.__call__",
        (
            "input_strings",
            "max_generation_steps",
            "max_prompt_length",
            "eos_tokens",
            "temperature",
            "top_p",
            "top_k",
            "seed",
            "echo",
        ),
    ),
    ("tunix.sft.peft_trainer", "PeftTrainer", ("model", "optimizer", "training_config")),
    ("tunix.sft.peft_trainer", "PeftTrainer.with_gen_model_input_fn", ("gen_model_input_fn",)),
    ("tunix.sft.peft_trainer", "PeftTrainer.train", ("train_ds", "eval_ds")),
    (
        "tunix.sft.peft_trainer",
        "TrainingConfig",
        (
            "eval_every_n_steps",
            "max_steps",
            "checkpoint_root_directory",
            "checkpointing_options",
            "metrics_logging_options",
            "pbar_description",
        ),
    ),
    ("tunix.sft.peft_trainer", "TrainingInput", ("input_tokens", "input_mask")),
    ("tunix.sft.utils", "build_positions_from_mask", ()),
    ("tunix.sft.utils", "make_causal_attn_mask", ()),
    ("tunix.sft.metrics_logger", "MetricsLoggerOptions", ("log_dir", "flush_every_n_steps")),
    ("qwix", "LoraProvider", ("module_path", "rank", "alpha", "weight_qtype", "tile_size")),
    ("qwix", "apply_lora_to_model", ("model", "provider", "rngs")),
)


def _resolve(module: str, path: str):
    obj = importlib.import_module(module)
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _accepts(obj, params: tuple[str, ...]) -> list[str]:
    target = obj.__init__ if inspect.isclass(obj) else obj
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return []
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return []
    return [p for p in params if p not in sig.parameters]


def check() -> list[str]:
    """Problems found, one readable line each (empty when all is well)."""
    problems = []
    for module, path, params in REQUIRED_API:
        try:
            obj = _resolve(module, path)
        except (ImportError, AttributeError) as e:
            problems.append(f"{module}.{path}: missing ({type(e).__name__}: {e})")
            continue
        missing = _accepts(obj, params)
        if missing:
            problems.append(f"{module}.{path}: no parameter(s) {', '.join(missing)}")
    return problems


def main() -> int:
    problems = check()
    try:
        from importlib.metadata import version

        installed = version("google-tunix")
    except Exception:  # noqa: BLE001 - tunix installed from source has no dist metadata
        installed = "unknown (not installed as a distribution)"
    if not problems:
        print(
            f"tunixkit doctor: all {len(REQUIRED_API)} tunix/qwix APIs present (google-tunix {installed})."
        )
        return 0
    print(
        f"tunixkit doctor: the installed tunix ({installed}) lacks {len(problems)} API(s) tunixkit calls:"
    )
    for p in problems:
        print(f"  - {p}")
    print(f"Fix: pip install --no-deps '{PIN}' qwix==0.1.8   (keeps the preinstalled jax/libtpu)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
