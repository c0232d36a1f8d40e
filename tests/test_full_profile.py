"""Every notebook's full profile, executed end to end on this CPU: ``PROFILE="full"`` with the full
presets' builders, mesh, memory-plan call, clock and exports, a tiny model in place of the real
weights, and local files in the real data sets' on-disk layout and schema (GSM8K as the Hugging Face
hub lays it out, SFT trace rows, preference rows) read through the full profile's loaders; counts
cut to a few steps and questions by the notebooks' own parameters (01, 02 and 03 by a rehearsal,
``REHEARSAL = True``, whose projection is checked too). A full preset that cannot even be built
fails here.

The notebook's py:percent source runs as a script (``tunixkit.testing.notebook_script``)."""

import json
import os
import pathlib
import re
import subprocess
import sys

import killing
import pytest

from tunixkit import data, recipes, rewards, testing

ROOT = pathlib.Path(__file__).resolve().parents[1]
FEW = {"NUM_STEPS": 2, "EVAL_QUESTIONS": 4}
# A rehearsal of a 6-step run: it must train 4 (session.Rehearsal.steps) and project the other 2.
REHEARSED = {"NUM_STEPS": 6, "EVAL_QUESTIONS": 4, "REHEARSAL": True}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inputs")
    return {
        "gsm8k": testing.write_gsm8k_hub(folder / "gsm8k", n_train=64, n_test=16),
        "traces": testing.write_trace_rows(folder / "traces.jsonl", 32),
        "pairs": testing.write_preference_rows(folder / "pairs.parquet", 160),
        # chat messages, no domain column, prompts of 300+ words (a document, then the question),
        # the summaries' documents past every length limit (the judge's 2,048 tokens too)
        "chat_long": testing.write_chat_traces(
            folder / "chat_long.jsonl", 120, preface_words=300, long_words=1000
        ),
        "tiny": testing.materialize("tiny-gemma3-sft"),
        "math500": testing.write_math500(folder / "math500", 12),  # HuggingFaceH4/MATH-500's layout
        # EleutherAI/hendrycks_math's layout, its train split too (02's DATASET = "math")
        "hendrycks_math": testing.write_hendrycks_math(folder / "math", 7, n_train=14),
        # the default mix's data sets in their real schemas (MIX_PATHS), 8 rows of each kind
        "mix": testing.write_mix_sources(folder / "mix", 8),
    }


CASES = {  # notebook: parameters beyond PROFILE, OUTPUT_DIR and GSM8K_PATH (inputs named by key)
    "00_quickstart": {"SOURCE": "local", "MODEL_PATH": "tiny"},
    "04_logit_distillation": FEW
    | {"TEACHER_ID": "tiny-gemma3-sft", "MODEL_ID": "tiny-gemma3-student"},
    # GRPO on MATH's train split (LaTeX answers, the LaTeX reward from tunix's thread), evaluated on
    # MATH-500, both from local copies
    "02_grpo_gsm8k": FEW
    | {
        "MODEL_ID": "tiny-gemma3-sft",
        "DATASET": "math",
        "MATH_PATH": "hendrycks_math",
        "MATH500_PATH": "math500",
    },
    "05_math_eval": {
        "MODELS": {"random": "tiny-gemma3", "sft": "tiny-gemma3-sft", "gone": "runs/02/export/hf"},
        "LIMIT": 4,
        "MATH500_PATH": "math500",  # the full preset's MATH-500, from a local copy
    },
    # 32 tokens a turn, not the preset's 512: the same path (4 turns of 1,024-token prompts) in
    # 2 steps of GRPO, without the tiny model's 512-token babble
    # 06 on the default public mix (no TRACES): every domain reaches every stage, stage 1's rows
    # without reasoning of their own go through the model's rejection-sampled reasoning, and each
    # domain gets its share; a stage or two of steps each, and a judge that grades every domain
    "06_multidomain_pipeline": {
        "MODEL_ID": "tiny-gemma3-sft",
        "JUDGE_ID": "tiny-gemma3-sft",
        "JUDGE_CHECK": "warn",
        "MIX_PATHS": "mix",
        "TRAIN_TASKS": 36,
        "HELDOUT_PER_DOMAIN": 1,
        "IMPROVE_PROMPTS": 12,
        "PAIR_PROMPTS": 12,
        "GENERATION_STEPS": 32,
        "SFT_STEPS": 2,
        "GRPO_STEPS": 2,
        "RECIPE_OVERRIDES": {
            "improve_steps": 2,
            "preference_steps": 2,
            "samples": 2,
            "eval_samples": 1,
            "grpo.checkpoint_every": 2,
        },
    },
    "07_agentic_calculator": FEW
    | {"MODEL_ID": "tiny-gemma3-sft", "SFT_STEPS": 2, "GENERATION_STEPS": 32},
    # 08 on the user's traces (chat messages, no domain column) with a judge model; the comparison
    # (off in the full preset) on, 2 steps a side, so its path runs too; every answer kept (a tiny
    # judge scores little), so there is something to compare
    "08_curation": {
        "MODEL_ID": "tiny-gemma3-sft",
        "JUDGE_ID": "tiny-gemma3-sft",
        "TRACES": "chat_long",
        "CURATE_PROMPTS": 8,
        "SAMPLES": 2,
        "MIN_SCORE": 0.0,
        "COMPARE_STEPS": 2,
        "RECIPE_OVERRIDES": {
            "train_tasks": 48,
            "heldout_per_domain": 1,
            "eval_samples": 1,
            "batch_size": 4,
            "eval.max_generation_steps": 32,
        },
    },
    # 09 on the default public mix with a judge model: two adapters and the one adapter, 2 steps
    # each, routed, merged and exported
    "09_routed_adapters": {
        "MODEL_ID": "tiny-gemma3-sft",
        "JUDGE_ID": "tiny-gemma3-sft",
        "MIX_PATHS": "mix",
        "ADAPTER_STEPS": 2,
        "RECIPE_OVERRIDES": {
            "train_tasks": 36,
            "heldout_per_domain": 1,
            "eval_samples": 1,
            "batch_size": 4,
            "eval.max_generation_steps": 32,
        },
    },
}
# 01, 02 and 03 run their full path as a rehearsal (the same cells, the export included, cut after
# 4 steps by the rehearsal instead of by NUM_STEPS): notebook: (parameters, its rehearsal's stages)
REHEARSALS = {
    "01_qlora_sft": (REHEARSED | {"MODEL_ID": "tiny-gemma3", "DATASET": "traces"}, {"SFT": 6}),
    "02_grpo_gsm8k": (REHEARSED | {"MODEL_ID": "tiny-gemma3-sft"}, {"GRPO": 6}),
    "03_dpo": (REHEARSED | {"MODEL_ID": "tiny-gemma3-sft", "PAIRS": "pairs"}, {"DPO": 6}),
    # 06 with a judge model and the user's traces; its stages' steps by knob or by the full preset
    "06_multidomain_pipeline": (
        {
            "REHEARSAL": True,
            "MODEL_ID": "tiny-gemma3-sft",
            "JUDGE_ID": "tiny-gemma3-sft",
            "TRACES": "chat_long",
            "TRAIN_TASKS": 96,
            "HELDOUT_PER_DOMAIN": 4,
            "IMPROVE_PROMPTS": 4,
            "PAIR_PROMPTS": 4,
            "GENERATION_STEPS": 32,  # answers need not be long to exercise the path (fast CI)
            "SFT_STEPS": 6,
            "GRPO_STEPS": 6,
            # SFT and self-improvement rows of the full preset's 1,024 tokens, 4 a step, not 16: the
            # same programs at a quarter of the compute (they took 76 of the rehearsal's 364 s)
            "RECIPE_OVERRIDES": {"batch_size": 4},
        },
        {"sft": 6, "improve": 200, "preference": 2400, "grpo": 6},
    ),
}


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TUNIXKIT_PROFILE", "KAGGLE_"))}
    return {
        **env,
        **killing.cpu_env(2),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_MODE": "disabled",
        "MPLBACKEND": "Agg",
        "PYTHONUNBUFFERED": "1",
    }


def _run(tmp_path: pathlib.Path, name: str, case: dict, inputs: dict) -> str:
    """Run notebook ``name`` as a script in the full profile; returns what it printed."""
    params = {
        k: (inputs[v] if isinstance(inputs[v], dict) else str(inputs[v]))
        if isinstance(v, str) and v in inputs
        else v
        for k, v in case.items()
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
            timeout=killing.DEADLINE_S,  # a stuck child fails here, not at CI's limit
        ).returncode
    said = log.read_text()
    assert rc == 0, said[-5000:]
    assert "profile: full" in said.lower() or "full (" in said.lower(), said[:2000]
    if case.get("DATASET") != "math":
        assert "main/test-00000-of-00001.parquet" in said  # GSM8K came from the hub-layout copy
    return said


@pytest.mark.parametrize("name", sorted(CASES))
def test_full_profile_runs_end_to_end_on_a_tiny_model(tmp_path, name, inputs):
    said = _run(tmp_path, name, CASES[name], inputs)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["profile"] == "full", summary
    if name == "02_grpo_gsm8k":  # MATH: 14 training problems, 4 of MATH-500's
        assert "14 training problems, 4 MATH-500 test problems" in said, said[-3000:]
        assert "provide the final answer (just the answer, in LaTeX" in said  # the prompt printed
        assert json.loads((tmp_path / "run" / "recipe.json").read_text())["recipe"]["dataset"] == (
            "math"
        )
        after = data.read_rows(tmp_path / "run" / "predictions_after.jsonl")
        assert {r["gold"] for r in after} <= {
            r["answer"] for r in data.load_math("math500", path=inputs["math500"])
        }
        assert summary["steps"] == 2, summary
    if name == "05_math_eval":  # a folder this session lacks is skipped and named, not an error
        assert "skipped gone: runs/02/export/hf is neither a model id nor a folder here" in said
        math500 = summary["benchmarks"]["math500"]  # read from the local copy, both models
        assert math500["problems"] == 4 and set(math500["models"]) == {"random", "sft"}
        assert (tmp_path / "run" / "predictions_math500_sft.jsonl").is_file()
    if name.startswith("08"):  # every prompt curated, 06's loader read the file, both sides judged
        assert summary["done"] == summary["prompts"] == 8, summary
        assert summary["curation"]["domains"]["all"]["kept"] > 0, summary["curation"]
        assert f"curated traces: TRACES = {summary['curated_file']!r}" in said
        assert set(summary["evaluations"]) == {"start", "uncurated", "curated"}, summary
        assert "uncurated->curated" in summary["changes"], summary
    if name.startswith("09"):  # every adapter trained, every evaluation, the merged export
        assert summary["steps"] == {"math": 2, "writing": 2, "one adapter": 4}, summary
        assert set(summary["evaluations"]) == {"base", "one adapter", "routed", "merged"}
        assert (tmp_path / "run" / "merged" / "export" / "hf" / "config.json").is_file()
        assert 1 <= len(summary["swap_seconds"]) <= 2, summary  # one swap per adapter routed to
    if name.startswith("06"):  # the default mix: every domain in every stage's data
        # the judge model's scores reach the pipeline (its NumPy floats were once read as 0)
        scores = [s["all"]["judged"] for s in summary["scores"].values()]
        assert all(0 < s < 1 for s in scores), summary["scores"]
        every = set(recipes.Pipeline.full().domain_shares)
        for stage in ("sft", "improve", "pair_prompts", "grpo"):
            assert set(summary["data_by_domain"][stage]) == every, (stage, summary)
        # stage 1 trains on no reasoning the data did not write: dolly's and MBPP's rows were
        # answered by the model, and only its answers the judge kept are among the rows
        reasoning = summary["reasoning"]
        assert reasoning["rows"] == 25 and reasoning["sampled"] == 25, reasoning  # 7 x 3 + 4
        assert set(reasoning["by_domain"]) == {"creative", "ideation", "summarization", "code"}
        rows = data.read_rows(tmp_path / "run" / "sft" / "reasoned.jsonl")
        assert all(r.get("reasoned", True) for r in rows)
        reasonings = [r["response"].split("</reasoning>")[0] for r in rows]
        assert all(rewards.has_format(r["response"]) for r in rows)
        assert len(set(reasonings)) > len(reasonings) // 2, reasonings  # no constant text
        # each domain's share of stage 1's rows exactly (the table printed before training)
        total = int(
            re.search(r"shares of the training rows \(domain_shares\): (\d+) rows", said)[1]
        )
        shares = recipes.Pipeline.full().domain_shares
        taken = summary["data_by_domain"]["sft"]
        assert sum(taken.values()) == total, (taken, total)
        assert all(abs(taken[d] - w * total) < 1 for d, w in shares.items()), (taken, total)


@pytest.mark.parametrize("name", sorted(REHEARSALS))
def test_rehearsal_times_every_stage_then_stops_before_the_long_run(tmp_path, name, inputs):
    case, planned = REHEARSALS[name]
    said = _run(tmp_path, name, case, inputs)
    out = tmp_path / "run"
    report = json.loads((out / "rehearsal.json").read_text())
    assert {n: s["planned_steps"] for n, s in report["stages"].items()} == planned, report
    for stage in report["stages"].values():
        assert stage["rehearsed_steps"] == 4, stage
        assert stage["steps_that_fit"] == stage["planned_steps"], stage  # no session limit here
        # (the projection's arithmetic is checked with fixed numbers in test_session)
        assert stage["seconds_per_step"] > 0, stage
    ends = report["export_ends_s"], report["last_evaluation_ends_s"], report["projected_seconds"]
    assert 0 < ends[0] < ends[1] <= ends[2], ends
    assert report["projected_seconds"] > report["rehearsal_seconds"], report
    # a process that loaded a model and trained it: hundreds of MiB (a unit slip would show)
    assert report["disk_bytes"] > 0 and report["peak_memory_bytes"] > 200 * 2**20, report
    # no training beyond the rehearsal's steps, none of it in OUTPUT_DIR itself, nothing uploaded
    run = out / "rehearsal"
    summary = json.loads((run / "summary.json").read_text())
    trained = (
        {n: (s["steps"], s["stopped"]) for n, s in summary["stages"].items()}
        if "stages" in summary
        else {"": (summary["steps"], summary["stopped"])}
    )
    assert set(trained.values()) == {(4, "rehearsal")}, trained
    for metrics in run.glob("**/metrics.jsonl"):
        steps = [json.loads(line).get("step", 0) for line in metrics.open()]
        assert max(steps) <= 4, (metrics, steps)
    assert not (out / "checkpoints").exists() and not (out / "summary.json").exists()
    assert not list(run.glob("**/export")), "the rehearsal's weights are kept"
    # the judged model was written where the template's harness looks (then removed with the rest)
    steps = sum(steps for steps, _ in trained.values())
    judged = re.findall(r"judged model(?: is now|:) (\S+)", said)
    assert judged and judged[-1].endswith(f"/ckpts/actor/{steps}/model_params"), judged
    assert not list(run.glob("**/ckpts")), "the rehearsal's judged model is kept"
    if name.startswith(("02", "06")):  # the judges' check: tunix alone answered every domain
        answers = [json.loads(line) for line in (run / "judges_check.jsonl").open()]
        assert len({a["domain"] for a in answers}) == 6 and all(a["tokens"] for a in answers)
    assert "a rehearsal's export is never uploaded" in said
    if name.startswith("03"):  # the held-out pairs are scored before and after: two batches, timed
        dpo = recipes.DPO.full()
        scored = [e for e in report["evaluations"] if e["what"] == "held-out scoring"]
        shape = (2 * dpo.batch_size, dpo.heldout_questions)
        assert [(e["items"], e["planned_items"]) for e in scored] == [shape] * 2, scored
        assert all(e["projected_seconds"] > e["seconds"] for e in scored), scored
    if name.startswith("06"):  # the user's traces: every target ends its turn, nothing cut
        added = int(re.search(r"SFT targets: \d+ \(end of turn added to (\d+);", said)[1])
        assert added > 0, said
        # prompts over every limit are cut and counted in every pass, and no stage crashes
        cut = summary["prompts_cut"]
        assert 0 < cut["generate"] < cut["generate_seen"] and 0 < cut["grpo"], cut
        assert summary["judge_prompts_cut"] > 0, summary
        # the tiny judge fails its calibration; a rehearsal keeps it grading, to time it
        assert "a rehearsal keeps it grading there to time it" in said
        calibrated = 3 * summary["judge_calibration"]["rows"]["all"]["n"]  # 3 answers a prompt
        assert summary["judged_completions"] > calibrated, summary  # it graded after calibration
        assert "removed sft's export" in said and "removed preference's export" in said
        # TRAIN_TASKS=96: the first 96 of the file's 120 rows are read (a split is sliced, not read whole)
        assert (
            "96 traces; without a 'domain' column, classified by keywords: {'math': 48, 'summarization': 48}"
            in said
        )
        assert set(summary["data_by_domain"]["pair_prompts"]) == {"math", "summarization"}
