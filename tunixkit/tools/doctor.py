"""Check that the installed tunix/qwix offer every API tunixkit uses, and that tunix has its own
deps.

Kaggle images ship tunix from git, unpinned; upstream renames things (``RLCluster`` became
``RLEngine`` on main). ``python -m tunixkit.tools.doctor`` reports, for every tunix/qwix name
tunixkit and its notebooks use (:data:`REQUIRED_API`, which a test keeps complete by scanning the
sources with :func:`scan`):

- **missing**: the name, or a parameter tunixkit passes, is not there;
- **unverifiable**: the signature takes ``**kwargs``, so the parameters cannot be checked;
- and tunix's own dependencies that are not installed, with the one pip line that adds them
  (``--no-deps``, so the preinstalled jax/libtpu stay as they are; :mod:`tunixkit.tools.deps`,
  which the setup script asks first, as tunix cannot be imported without them).

The setup script runs it on Kaggle and Colab; ``tests/test_api_drift.py`` runs it in CI.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.metadata as md
import importlib.util
import inspect
import pathlib
import sys
from collections.abc import Iterable

from tunixkit import families
from tunixkit.tools.deps import missing_dependencies, pip_line

__all__ = ["PIN", "REQUIRED_API", "check", "required", "scan"]

PIN = "google-tunix==0.1.7"

_TRAINER_CONFIG = (
    "eval_every_n_steps",
    "max_steps",
    "checkpoint_root_directory",
    "checkpointing_options",
    "metrics_logging_options",
    "pbar_description",
)
_DECODER_CONFIG = (  # the Llama3/Qwen2/Qwen3 ModelConfig fields families.py sets
    "num_layers",
    "vocab_size",
    "embed_dim",
    "hidden_dim",
    "num_heads",
    "head_dim",
    "num_kv_heads",
    "rope_theta",
    "norm_eps",
)
_QWEN_CONFIG = ("use_tied_embedding", "param_dtype")  # Qwen2/Qwen3's beside those
_SAFETENSORS = ("file_dir", "config", "mesh", "dtype")  # create_model_from_safe_tensors'
# (module, attribute path, parameters tunixkit passes by keyword); each family's model class and
# loader are added by required()
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
            "local_base_frequency",
            "global_base_frequency",
            "global_scale_factor",
            "query_pre_attn_norm",
            "param_dtype",
        ),
    ),
    # _compat.choice_logprobs: the final hidden states, then the last position's logits
    ("tunix.models.gemma3.model", "Gemma3.__call__", ("output_hidden_states",)),
    ("tunix.models.gemma3.model", "Embedder.decode", ()),
    ("tunix.models.gemma.model", "Gemma.__call__", ("output_hidden_states",)),
    ("tunix.models.gemma.model", "Embedder.decode", ()),
    ("tunix.models.gemma3.model", "GEMMA3_ATTENTION_PATTERN", ()),
    ("tunix.models.gemma3.model", "AttentionType", ()),
    ("tunix.models.gemma3.model", "QueryPreAttentionNormalisation", ()),
    ("tunix.models.gemma3.model", "Attention", ()),  # _compat.gemma3_qk_norms's argument
    ("tunix.models.gemma3.model", "RMSNorm", ()),
    (
        "tunix.models.gemma.model",
        "ModelConfig",
        (
            "num_layers",
            "num_embed",
            "embed_dim",
            "hidden_dim",
            "num_heads",
            "head_dim",
            "num_kv_heads",
            "final_logit_softcap",
            "use_post_attn_norm",
            "use_post_ffw_norm",
            "attention_types",
            "attn_logits_soft_cap",
            "sliding_window_size",
        ),
    ),
    ("tunix.models.gemma.model", "AttentionType", ()),
    # Llama 3.x and Qwen (families.py); _compat.config_rope wraps apply_rope and Attention.block
    (
        "tunix.models.llama3.model",
        "ModelConfig",
        (*_DECODER_CONFIG, "weight_tying"),
    ),
    *(
        (f"tunix.models.{family}.model", "ModelConfig", (*_DECODER_CONFIG, *_QWEN_CONFIG))
        for family in ("qwen2", "qwen3")
    ),
    ("tunix.models.llama3.model", "apply_rope", ("head_dim", "rope_theta")),
    ("tunix.models.qwen3.model", "apply_rope", ("head_dim", "rope_theta")),
    ("tunix.models.llama3.model", "Attention.block", ()),
    ("tunix.models.qwen3.model", "Attention.block", ()),
    ("tunix.models.qwen2.model", "Qwen2.__call__", ("output_hidden_states",)),
    ("tunix.models.qwen3.model", "Qwen3.__call__", ("output_hidden_states",)),
    ("tunix.generate.sampler", "Sampler", ("transformer", "tokenizer", "cache_config")),
    ("tunix.rl.rollout.vanilla_rollout", "VanillaRollout", ()),  # holds ._sampler (split)
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
            "return_logprobs",
        ),
    ),
    ("tunix.generate.sampler", "Sampler.init_sample_state", ("all_input_ids",)),
    # the module's own jax, whose device_get a multi-process run swaps (sampler_fetches_whole)
    ("tunix.generate.sampler", "jax", ()),
    # the module rl_cluster places rollouts with, which a multi-process run swaps
    # (rl_shards_whole_batches), and the sharding it asks of it
    ("tunix.rl.rl_cluster", "sharding_utils", ()),
    ("tunix.sft.sharding_utils", "shard_input", ("input_data", "data_sharding_axis")),
    ("tunix.sft.sharding_utils", "get_sharding", ("x", "mesh", "pspec")),
    ("tunix.generate.sampler", "_SamplingState", ("token_buffer", "positions", "cache", "done")),
    ("tunix.sft.peft_trainer", "PeftTrainer", ("model", "optimizer", "training_config")),
    ("tunix.sft.peft_trainer", "PeftTrainer.with_gen_model_input_fn", ("gen_model_input_fn",)),
    ("tunix.sft.peft_trainer", "PeftTrainer.with_training_hooks", ("training_hooks",)),
    ("tunix.sft.peft_trainer", "PeftTrainer.train", ("train_ds", "eval_ds")),
    ("tunix.sft.peft_trainer", "PeftTrainer.train_steps", ()),
    ("tunix.sft.peft_trainer", "TrainingConfig", _TRAINER_CONFIG),
    ("tunix.sft.peft_trainer", "TrainingInput", ("input_tokens", "input_mask")),
    ("tunix.sft.utils", "build_positions_from_mask", ()),
    ("tunix.sft.utils", "make_causal_attn_mask", ()),
    ("tunix.sft.hooks", "TrainingHooks", ()),
    # training.run sizes the learning-rate schedule before a step (the first steps' pace)
    ("tunix.sft.hooks", "TrainingHooks.on_train_step_start", ()),
    (
        "tunix.sft.metrics_logger",
        "MetricsLoggerOptions",
        ("log_dir", "flush_every_n_steps", "backend_kwargs"),
    ),
    (
        "tunix.sft.dpo.dpo_trainer",
        "DPOTrainer",
        ("model", "ref_model", "optimizer", "training_config"),
    ),
    (
        "tunix.sft.dpo.dpo_trainer",
        "DPOTrainingConfig",
        (*_TRAINER_CONFIG, "algorithm", "beta", "lambda_orpo"),
    ),
    ("tunix.sft.dpo.dpo_trainer", "compute_logps", ()),
    (
        "tunix.distillation.distillation_trainer",
        "DistillationTrainer",
        ("student_model", "teacher_model", "strategy", "optimizer", "training_config"),
    ),
    ("tunix.distillation.distillation_trainer", "TrainingConfig", _TRAINER_CONFIG),
    (
        "tunix.distillation.strategies",
        "LogitStrategy",
        ("student_forward_fn", "teacher_forward_fn", "labels_fn", "temperature", "alpha"),
    ),
    (  # overridden by _compat.AnswerTokenLogitStrategy
        "tunix.distillation.strategies",
        "LogitStrategy.compute_loss",
        ("student_output", "teacher_output", "labels"),
    ),
    (
        "tunix.distillation.strategies",
        "LogitStrategy.compute_eval_loss",
        ("student_output", "labels"),
    ),
    ("tunix.rl.common", "build_positions_from_mask", ()),
    ("tunix.rl.common", "make_causal_attn_mask", ()),
    (
        "tunix.rl.rl_cluster",
        "RLCluster",
        ("actor", "reference", "tokenizer", "cluster_config", "perf_config"),
    ),
    ("tunix.perf.metrics", "PerfMetricsConfig", ("custom_export_fn", "custom_export_fn_v2")),
    ("tunix.perf.metrics", "PerfSpanQuery", ()),
    ("tunix.perf.trace", "NoopTracer", ()),
    ("tunix.perf.experimental.tracer", "NoopTracer", ()),
    (
        "tunix.perf.experimental.trace_writer",
        "PerfettoTraceWriter",
        ("trace_dir", "role_to_devices"),
    ),
    ("tunix.perf.experimental.trace_writer", "PerfettoTraceWriter.write_timelines", ("timelines",)),
    ("tunix.rl.rl_cluster", "RLCluster.with_external_metrics_logger", ("external_metrics_logger",)),
    (
        "tunix.rl.rl_cluster",
        "ClusterConfig",
        ("role_to_mesh", "rollout_engine", "offload_to_cpu", "training_config", "rollout_config"),
    ),
    (
        "tunix.rl.rl_cluster",
        "RLTrainingConfig",
        (
            "actor_optimizer",
            "eval_every_n_steps",
            "max_steps",
            "mini_batch_size",
            "train_micro_batch_size",
            "rollout_micro_batch_size",
            "compute_logps_micro_batch_size",
            "metrics_logging_options",
            "checkpoint_root_directory",
            "checkpointing_options",
        ),
    ),
    ("tunix.rl.rl_cluster", "Role", ()),
    (
        "tunix.rl.rollout.base_rollout",
        "RolloutConfig",
        (
            "max_tokens_to_generate",
            "max_prompt_length",
            "kv_cache_size",
            "temperature",
            "top_k",
            "top_p",
            "eos_tokens",
            "seed",
            "return_logprobs",
        ),
    ),
    (
        "tunix.rl.grpo.grpo_learner",
        "GRPOConfig",
        ("num_generations", "num_iterations", "beta", "epsilon", "kl_loss_mode"),
    ),
    ("tunix.rl.grpo.grpo_learner", "GRPOLearner", ("rl_cluster", "algo_config", "reward_fns")),
    ("qwix", "LoraProvider", ("module_path", "rank", "alpha", "weight_qtype", "tile_size")),
    ("qwix", "apply_lora_to_model", ("model", "provider", "rngs")),
    # memplan: each step compiled the way the trainers build it
    (
        "tunix.rl.trainer",
        "Trainer",
        ("model", "optimizer", "training_config", "custom_checkpoint_metadata_fn"),
    ),
    ("tunix.rl.function_registry", "get_policy_loss_fn", ()),
    (
        "tunix.rl.common",
        "compute_per_token_logps",
        ("pad_id", "eos_id", "stop_gradient", "return_logits", "temperature"),
    ),
    (
        "tunix.rl.grpo.grpo_learner",
        "TrainExample",
        (
            "prompt_ids",
            "prompt_mask",
            "completion_ids",
            "completion_mask",
            "advantages",
            "old_per_token_logps",
            "ref_per_token_logps",
        ),
    ),
    (
        "tunix.sft.dpo.dpo_trainer",
        "TrainExample",
        (
            "input_ids",
            "positions",
            "attention_mask",
            "ref_chosen_logps",
            "ref_rejected_logps",
            "completion_mask",
            "logits_to_keep",
        ),
    ),
    (
        "tunix.distillation.distillation_trainer",
        "TrainingInput",
        ("input_tokens", "input_mask", "teacher_output"),
    ),
    ("tunix.sft.sharding_utils", "get_sharding", ("mesh", "pspec")),
    # agentic GRPO with the calculator (tunixkit.agentic): the classes it subclasses and the hooks
    # it overrides
    (
        "tunix.rl.agentic.agentic_grpo_learner",
        "GRPOConfig",
        (
            "num_generations",
            "num_iterations",
            "beta",
            "epsilon",
            "kl_loss_mode",
            "system_prompt",
            "max_response_length",
            "max_concurrency",
        ),
    ),
    ("tunix.rl.rollout.base_rollout", "BaseRollout.generate", ("prompts", "rollout_config")),
    (
        "tunix.rl.agentic.agentic_grpo_learner",
        "GRPOLearner",
        (
            "rl_cluster",
            "algo_config",
            "reward_fns",
            "metric_fns",
            "chat_parser",
            "agent_class",
            "agent_kwargs",
            "env_class",
            "env_kwargs",
        ),
    ),
    (
        "tunix.rl.agentic.agents.tool_agent",
        "ToolAgent",
        ("system_prompt", "tool_parser_name", "tool_map"),
    ),
    ("tunix.rl.agentic.agents.tool_agent", "ToolAgent._init_messages", ("system_prompt",)),
    ("tunix.rl.agentic.utils", "get_recent_assistant_user_messages", ()),
    (
        "tunix.rl.agentic.utils",
        "tokenize_and_generate_masks",
        ("tokenizer", "parser", "contains_first_msg", "contains_generation_msg"),
    ),
    (
        "tunix.rl.agentic.agents.tool_agent",
        "ToolAgent._observation_to_messages",
        ("observation", "reward", "done", "info"),
    ),
    (
        "tunix.rl.agentic.environments.tool_environment",
        "ToolEnvironment",
        ("task", "tool_map", "reward_fn", "max_steps"),
    ),
    (
        "tunix.rl.agentic.environments.tool_environment",
        "ToolEnvironment._execute_tool_calls",
        ("tool_calls",),
    ),
    ("tunix.rl.agentic.environments.tool_environment", "ToolEnvironment.step", ("action",)),
    (
        "tunix.rl.agentic.parser.chat_template_parser.parser",
        "GemmaChatTemplateParser",
        ("tokenizer",),
    ),
    (
        "tunix.rl.agentic.parser.chat_template_parser.parser",
        "GemmaChatTemplateParser.preprocess_messages",
        ("messages",),
    ),
    ("tunix.rl.agentic.parser.tool_parser", "qwen_parser", ()),
    (
        "tunix.rl.agentic.parser.tool_parser.qwen_parser",
        "QwenToolParser.parse",
        ("model_response",),
    ),
    ("tunix.rl.agentic.tools.base_tool", "BaseTool", ("name", "description")),
    ("tunix.rl.agentic.tools.base_tool", "ToolOutput", ("name", "output", "error")),
)


def _resolve(module: str, path: str):
    obj = importlib.import_module(module)
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _params(obj, params: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(parameters ``obj`` lacks, parameters it may take through ``**kwargs`` but does not name)."""
    if isinstance(obj, property) or not params:
        return [], []
    target = obj.__init__ if inspect.isclass(obj) else obj
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return [], list(params)
    absent = [p for p in params if p not in sig.parameters]
    var_kw = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    return ([], absent) if var_kw else (absent, [])


def check() -> tuple[list[str], list[str]]:
    """(problems, unverifiable): one readable line each; no problems means every name exists and
    takes the parameters tunixkit passes (except the unverifiable ones, which take ``**kwargs``)."""
    problems, unverifiable = [], []
    for module, path, params in required():
        try:
            obj = _resolve(module, path)
        except (ImportError, AttributeError) as e:
            problems.append(f"{module}.{path}: missing ({type(e).__name__}: {e})")
            continue
        missing, hidden = _params(obj, params)
        if missing:
            problems.append(f"{module}.{path}: no parameter(s) {', '.join(missing)}")
        elif hidden:
            unverifiable.append(
                f"{module}.{path}: takes **kwargs, so {', '.join(hidden)} cannot be checked"
            )
    return problems, unverifiable


def required() -> list[tuple[str, str, tuple[str, ...]]]:
    """:data:`REQUIRED_API` plus what each model family names by string (its model class, config
    and safetensors loader: see :mod:`tunixkit.families`)."""
    out = list(REQUIRED_API)
    for fam in families.FAMILIES.values():
        out += [
            (fam.model_module, fam.model_class, ("config", "rngs")),
            (fam.model_module, "ModelConfig", ()),
            (fam.loader_module, "create_model_from_safe_tensors", _SAFETENSORS),
        ]
    return list(dict.fromkeys(out))


def scan(paths: Iterable[str | pathlib.Path]) -> set[tuple[str, str]]:
    """Every ``(tunix or qwix module, name)`` the Python sources in ``paths`` use: names imported
    from a tunix/qwix module, and attributes read (not assigned) from an imported tunix/qwix
    module."""
    used: set[tuple[str, str]] = set()
    for path in paths:
        tree = ast.parse(pathlib.Path(path).read_text(encoding="utf-8"))
        aliases: dict[str, str] = {}  # local name -> tunix/qwix module
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in ("tunix", "qwix"):
                        aliases[a.asname or a.name] = a.name
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
                "tunix",
                "qwix",
            ):
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    if importlib.util.find_spec(node.module) and _is_module(full):
                        aliases[a.asname or a.name] = full
                    else:
                        used.add((node.module, a.name))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Load)  # read, not set by tunixkit
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
            ):
                used.add((aliases[node.value.id], node.attr))
    return used


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Check the installed tunix against what tunixkit uses."
    )
    ap.add_argument(
        "--pins", type=pathlib.Path, help="requirements.txt whose versions the pip line uses"
    )
    args = ap.parse_args(argv)
    deps = missing_dependencies()
    problems, unverifiable = check()
    try:
        installed = md.version("google-tunix")
    except md.PackageNotFoundError:
        installed = "unknown (not installed as a distribution)"
    total = len(required())
    verified = total - len(problems) - len(unverifiable)
    print(f"tunixkit doctor: google-tunix {installed}: {verified} of {total} APIs verified")
    for line in unverifiable:
        print(f"  unverifiable: {line}")
    for line in problems:
        print(f"  MISSING: {line}")
    if deps:
        print(
            f"  tunix's own dependencies not installed: {', '.join(deps)}\n"
            f"  Fix: {pip_line(deps, args.pins)}"
        )
    if problems:
        print(
            f"Fix: pip install --no-deps '{PIN}' qwix==0.1.8   (keeps the preinstalled jax/libtpu)"
        )
    return 1 if problems or deps else 0


if __name__ == "__main__":
    sys.exit(main())
