"""Every notebook's full profile, executed end to end on this CPU: ``PROFILE="full"`` with the full
presets' builders, mesh, memory-plan call, clock and exports, a tiny model in place of the real
weights, and local files in the real data sets' on-disk layout and schema (GSM8K as the Hugging Face
hub lays it out, SFT trace rows, preference rows) read through the full profile's loaders; counts
cut to a few steps and questions by the notebooks' own parameters. A full preset that cannot even be
built fails here. (06 has its own full-profile test.)

The notebook's py:percent source runs as a script (``tunixkit.testing.notebook_script``)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tunixkit import smoke, testing

ROOT = pathlib.Path(__file__).resolve().parents[1]
FEW = {"NUM_STEPS": 2, "EVAL_QUESTIONS": 4}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inputs")
    return {
        "gsm8k": testing.write_gsm8k_hub(folder / "gsm8k", n_train=64, n_test=16),
        "traces": testing.write_trace_rows(folder / "traces.jsonl", 32),
        "pairs": testing.write_preference_rows(folder / "pairs.parquet", 160),
        "tiny": smoke.materialize("tiny-gemma3-sft"),
    }


CASES = {  # notebook: parameters beyond PROFILE, OUTPUT_DIR and GSM8K_PATH (inputs named by key)
    "00_quickstart": {"SOURCE": "local", "MODEL_PATH": "tiny"},
    "01_qlora_sft": FEW | {"MODEL_ID": "tiny-gemma3", "DATASET": "traces"},
    "02_grpo_gsm8k": FEW | {"MODEL_ID": "tiny-gemma3-sft"},
    "03_dpo": FEW | {"MODEL_ID": "tiny-gemma3-sft", "PAIRS": "pairs"},
    "04_logit_distillation": FEW
    | {"TEACHER_ID": "tiny-gemma3-sft", "MODEL_ID": "tiny-gemma3-student"},
    "05_math_eval": {
        "MODELS": {"random": "tiny-gemma3", "sft": "tiny-gemma3-sft", "gone": "runs/02/export/hf"},
        "LIMIT": 4,
    },
    "07_agentic_calculator": FEW | {"MODEL_ID": "tiny-gemma3-sft", "SFT_STEPS": 2},
}


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TUNIXKIT_PROFILE", "KAGGLE_"))}
    return env | {
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_MODE": "disabled",
        "MPLBACKEND": "Agg",
        "PYTHONUNBUFFERED": "1",
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_full_profile_runs_end_to_end_on_a_tiny_model(tmp_path, name, inputs):
    params = {
        k: str(inputs[v]) if isinstance(v, str) and v in inputs else v
        for k, v in CASES[name].items()
    }
    params |= {
        "PROFILE": "full",
        "OUTPUT_DIR": str(tmp_path / "run"),
        "GSM8K_PATH": str(inputs["gsm8k"]),
    }
    script = testing.notebook_script(ROOT / "notebooks" / f"{name}.py", params, tmp_path / "nb.py")
    log = tmp_path / "log.txt"
    with log.open("w") as out:
        rc = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        ).returncode
    said = log.read_text()
    assert rc == 0, said[-5000:]
    assert "profile: full" in said.lower() or "full (" in said.lower(), said[:2000]
    assert "main/test-00000-of-00001.parquet" in said  # GSM8K came from the hub-layout copy
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["profile"] == "full", summary
    if name == "05_math_eval":  # a folder this session lacks is skipped and named, not an error
        assert "skipped gone: runs/02/export/hf is neither a model id nor a folder here" in said
