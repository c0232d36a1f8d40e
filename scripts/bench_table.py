"""The README's benchmark table, rendered from ``bench/results/*.json`` (never typed by hand).

    .venv/bin/python scripts/bench_table.py           # print the table
    .venv/bin/python scripts/bench_table.py --write   # replace it in README.md

``tests/test_readme.py`` fails when the README's table differs from what this renders.
"""

from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
BEGIN, END = "<!-- bench-table:begin -->", "<!-- bench-table:end -->"


def _interval(g: dict) -> str:
    """The overhead as its median and interval over the interleaved rounds (one figure before)."""
    o = g.get("overhead")
    if not o:
        return f"{g['overhead_ratio']:.3f}"
    low, high = o["interval"]
    return (
        f"median {o['median']:.3f} ({low:.3f}-{high:.3f}, {o['coverage']:.0%} interval, "
        f"{len(o['ratios'])} interleaved rounds)"
    )


def _load(name: str) -> dict | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _speed(sp: dict) -> list[str]:
    """``bench/speed.py``'s rows: the machine and decode, then the parts the file has."""
    out = []
    where = f"{sp['device']}, {sp['cores']} cores, {sp['date']}"
    bw, mm = sp["bandwidth"], sp["matmul"]
    if dec := sp.get("decode"):
        per = ", ".join(
            f"{r['batch']}: {r['tokens_per_s']:,.0f} tokens/s ({r['share_of_bound']:.0%})"
            for r in dec["rows"]
        )
        out.append(
            f"| `bench/speed.py --model {dec['model']}` | this machine's read bandwidth and matmul "
            f"peak, and greedy decode per batch against the bound that reading every weight once "
            f"a step sets ({where}) | read {bw['gb_per_s']:.0f} GB/s "
            f"(copy {bw['copy']['gb_per_s']:.1f}); matmul bf16 {mm['bfloat16']['tflop_per_s']:.2f}"
            f", f32 {mm['float32']['tflop_per_s']:.2f} TFLOP/s; decode by batch (share of the "
            f"bound) {per}; step = {dec['fit']['a_s'] * 1e3:.1f} ms + "
            f"{dec['fit']['b_s_per_row'] * 1e3:.2f} ms x batch | a figure, no target |"
        )
    if g := sp.get("grpo"):
        st, gs = g["median_after_first"], g["settings"]
        phases = ", ".join(
            f"{c} {st[c]:.2f}" for c in ("rollout", "reference", "rewards", "update", "other")
        )
        peaks = {m["phase"]: m["peak_bytes"] for m in g["memory_after"]}  # the last of each
        peak = ", ".join(f"{k} {v / 2**30:.2f}" for k, v in peaks.items())
        out.append(
            f"| `bench/speed.py --parts grpo` | 02's {g['preset']} GRPO step on {g['model_id']} "
            f"({gs['batch_size']} prompts x G={gs['num_generations']}, {gs['max_prompt_length']} "
            f"prompt + {gs['max_generation_steps']} answer tokens, rank {g['lora_rank']}) by phase, "
            f"median after the first ({where}) | {st['seconds']:.2f} s a step: {phases}; peak "
            f"after each, GiB ({g['memory_after'][0]['measures']}): {peak} | a figure, no target |"
        )
    if t := sp.get("sft"):
        mfu = f", MFU {t['mfu']:.0%} of the bf16 matmul figure" if "mfu" in t else ""
        out.append(
            f"| `bench/speed.py --parts sft` | 01's QLoRA step, {t['batch']} x {t['seq']} tokens, "
            f"rank {t['rank']}, on {t['shape']} (random weights; FLOPs: 4 x parameters + "
            f"attention as PaLM counts it) ({where}) | {t['median_step_s']:.2f} s a step, "
            f"{t['tokens_per_s']:,.0f} tokens/s, {t['model_tflop_per_s']:.3f} TFLOP/s{mfu}; peak "
            f"{t['peak_bytes'] / 2**30:.2f} GiB ({t['peak_measures']}) | a figure, no target |"
        )
    if pl := sp.get("plan"):
        found = "; ".join(
            f"{k}: {v['peak'] / 2**30:.2f} GiB at most ({max(v['steps'], key=lambda s: s['peak'])['name']})"
            for k, v in pl.items()
        )
        out.append(
            f"| `bench/speed.py --parts plan` | memplan's plans of the same two programs, "
            f"compiled for this device ({where}) | {found} | beside the measured peaks |"
        )
    if pr := sp.get("projection"):
        s = pr["step_s"]
        out.append(
            f"| `bench/speed.py --parts projection` | the GRPO step above projected onto a Kaggle "
            f"v5e-8 (assumptions in the file) | {s['total']:.2f} s a step (rollout "
            f"{s['rollout']:.2f}, reference {s['reference']:.2f}, update {s['update']:.2f}, "
            f"rewards and host {s['rewards and host']:.2f}): {pr['preset_steps']:,} steps in "
            f"{pr['preset_hours']:.1f} h | a projection, no target |"
        )
    return out


def rows() -> list[str]:
    out = ["| script | measures | result (from `bench/results/`) | target |", "|---|---|---|---|"]
    for name in (
        "eval_throughput",
        "grpo_step",
        "sft_step",
        "sft_step_gpu",
        "sft_packing",
        "sampler_placement",
        "sampler_placement_tpu_aot",
        "prefill_last_position",
        "rollout_calls_02",
        "rollout_calls_06",
        "compile_count_06",
        "speed_cpu",
        "speed_gpu",
        "judge_score",
        "judge_score_tpu_aot",
        "memplan",
        "memplan_gpu",
        "memplan_tpu_aot",
        "memplan_tpu_aot_families",
        "memplan_tpu_aot_pod",
    ):
        try:
            out += _rows(name)
        except KeyError as e:  # a result written by an older version of the bench
            script = {
                "memplan": "memory_plan",
                "memplan_gpu": "memory_plan",
                "memplan_tpu_aot": "memory_plan",
                "memplan_tpu_aot_families": "memory_plan",
                "memplan_tpu_aot_pod": "memory_plan",
                "sft_step_gpu": "sft_step",
                "sampler_placement_tpu_aot": "sampler_placement",
                "judge_score_tpu_aot": "judge_score",
                "rollout_calls_02": "rollout_calls",
                "rollout_calls_06": "rollout_calls",
                "speed_cpu": "speed",
                "speed_gpu": "speed",
            }.get(name, name)
            out.append(
                f"| `bench/{script}.py` | | stale: `bench/results/{name}.json` lacks {e}; rerun the bench | |"
            )
    return out


def _rows(name: str) -> list[str]:
    out: list[str] = []
    if name == "eval_throughput" and (e := _load("eval_throughput")):
        tiny = e["rows"][0]
        out.append(
            f"| `bench/eval_throughput.py` | tunixkit's evaluator vs the upstream loop (4 prompts, 768 steps, greedy) "
            f"| {tiny['speedup']:.1f}x on {tiny['model']} ({tiny['questions']} questions, texts identical: "
            f"{tiny['texts_identical']}); random 4x512: {e['rows'][1]['speedup']:.1f}x (batching alone) "
            f"| >= 3x: {'met' if e['target_met'] else 'missed'} |"
        )
    if name == "grpo_step" and (g := _load("grpo_step")):
        out.append(
            f"| `bench/grpo_step.py` | `rl.build_grpo` vs a plain tunix script, and vs the upstream rollout config "
            f"| overhead {_interval(g)}; tokens after `<end_of_turn>`: {g['tokens_after_end_of_turn']} "
            f"(upstream config: {g['upstream_tokens_after_end_of_turn']:,}) "
            f"| <= 1.05 and 0: {g.get('verdict', 'met' if g['target_met'] else 'missed')} |"
        )
    if name == "sft_step" and (s := _load("sft_step")):
        out.append(
            f"| `bench/sft_step.py` | LoRA vs QLoRA (nf4) vs full fine-tuning: step time, memory "
            f"| QLoRA parameters {s['qlora_param_share']:.0%} of LoRA's "
            f"| <= 30%: {'met' if s['target_met'] else 'missed'} |"
        )
    if name == "sft_step_gpu" and (s := _load("sft_step_gpu")):
        by = {r["mode"]: r for r in s["rows"]}
        device = by["lora"]["device"].split(" x")[0]
        planned = next(  # the same program's plan, compiled for the same chip
            (
                p["peak"]
                for p in (_load("memplan_gpu") or {"plans": []})["plans"]
                if p["recipe"].startswith("01 on one chip (Colab)")
            ),
            None,
        )
        plan = f" (its plan: {planned / 2**30:.1f})" if planned else ""
        step_ms = " / ".join(
            f"{by[m]['median_step_s'] * 1e3:.0f}" for m in ("lora", "qlora", "full")
        )
        peaks = ", ".join(
            f"{m} {by[m]['peak_bytes'] / 2**30:.1f}" for m in ("lora", "qlora", "full")
        )
        out.append(
            f"| `bench/sft_step.py --shape gemma-3-1b` | one SFT step at 01's one-chip shape "
            f"({s['batch']} x {s['seq']}, rank {s['rank']}, random weights) on {device} "
            f"| peak in use, GiB: {peaks}{plan}; step {step_ms} ms; QLoRA parameters "
            f"{s['qlora_param_share']:.0%} of LoRA's (the 262k-row embedding stays bf16) "
            f"| <= 30%: {'met' if s['target_met'] else 'missed'} |"
        )
    if name == "sft_packing" and (p := _load("sft_packing")):
        out.append(
            f"| `bench/sft_packing.py` | SFT tokens/s with and without packing, same data "
            f"| rows filled {p['row_fill']['unpacked']:.0%} -> {p['row_fill']['packed']:.0%}, "
            f"{p['speedup']:.2f}x tokens/s; loss difference {p['loss_difference']:.1e} "
            f"| >= 1.3x, < 1e-4: {'met' if p['target_met'] else 'missed'} |"
        )
    if name == "sampler_placement" and (t := _load("sampler_placement")):
        found = ", ".join(
            f"{shape} {d['median']:.2f} ({d['interval'][0]:.2f}-{d['interval'][1]:.2f}; texts "
            f"identical: {d['identical_texts']})"
            for shape, d in t["shapes"].items()
        )
        verdicts = {d["verdict"] for d in t["shapes"].values()}
        out.append(
            f"| `bench/sampler_placement.py` | sampling time, the batch split over the mesh vs "
            f"tunix's `Sampler` ({t['devices']}, {len(t['shapes']['judge']['ratios'])} interleaved "
            f"rounds) | time ratio, median (interval): {found} "
            f"| <= {t['shapes']['judge']['target']}: {'/'.join(sorted(verdicts))} |"
        )
    if name in ("speed_cpu", "speed_gpu") and (sp := _load(name)):
        out += _speed(sp)
    if name == "compile_count_06" and (c := _load("compile_count_06")):
        t, r, dec = c["total"], c["repeated"], c["programs"]["_decode_fn"]
        out.append(
            f"| `bench/compile_count.py 06` | every compile a whole smoke run of 06 asks for, from an "
            f"empty compilation cache ({c['machine']}) | {t['requests']:.0f} requests in a "
            f"{c['run_seconds']:.0f} s run: {t['compiles']:.0f} compiled ({t['compile_s']:.1f} s), "
            f"{t['cache_reads']:.0f} read from the cache; its passes built {dec['requests']:.0f} "
            f"samplers of {dec['compiles']:.0f} shapes; building each once could save "
            f"{r['seconds']:.1f} s ({r['seconds'] / c['run_seconds']:.1%}) "
            f"| repeats read, not compiled: {'met' if dec['compiles'] < dec['requests'] else 'missed'} |"
        )
    if name == "prefill_last_position" and (t := _load("prefill_last_position")):
        c = t["compiled"]
        low, high = t["interval"]
        out.append(
            f"| `bench/prefill_last_position.py` | sampling with the prefill projecting the last "
            f"prompt position only vs tunix's `Sampler`, {t['model']}, {t['rows']} x "
            f"{t['prompt_tokens']} prompt tokens + {t['new_tokens']} new, {t['machine']} "
            f"| prefill {c['tunix']['prefill_gflops']:,.0f} -> "
            f"{c['last_position']['prefill_gflops']:,.0f} GFLOP, temporaries "
            f"{c['tunix']['prefill_temp_mib']:,.0f} -> {c['last_position']['prefill_temp_mib']:,.0f}"
            f" MiB; call time ratio median {t['median']:.2f} ({low:.2f}-{high:.2f}, "
            f"{len(t['ratios'])} interleaved rounds); texts identical: {t['identical_texts']} "
            f"| <= {t['target']}: {t['verdict']} |"
        )
    if name.startswith("rollout_calls_") and (t := _load(name)):
        st, ro, s = (
            t["step_ratio_whole_over_split"],
            t["rollout_ratio_whole_over_split"],
            t["settings"],
        )

        def ratio(d: dict) -> str:
            low, high = d["interval"]
            return (
                f"{d['median']:.2f} ({low:.2f}-{high:.2f}, {len(d['ratios'])} interleaved rounds)"
            )

        out.append(
            f"| `bench/rollout_calls.py` | a GRPO step of {t['preset']}'s full preset "
            f"({s['batch_size']} prompts x G={s['num_generations']}, updates of "
            f"{s['micro_batch_size']}; {s['max_prompt_length']} prompt and "
            f"{s['max_generation_steps']} answer tokens on this CPU) with its rollout in one sampler "
            f"call vs one per update micro-batch ({t['calls_per_step']['split']} calls), {t['model']} "
            f"({t['vocabulary']:,}-token vocabulary), {t['machine']} "
            f"| step time ratio one call / split {ratio(st)}; its rollout {ratio(ro)}; same answers "
            f"for the same seed: {t['same_answers']} | < 1: step {st['verdict']}, rollout "
            f"{ro['verdict']} |"
        )
    if name == "sampler_placement_tpu_aot" and (t := _load("sampler_placement_tpu_aot")):

        def gib(d: dict) -> str:
            return f"{d['temp_gib']:.2f}" if d["compiled"] else "does not fit (compile fails)"

        j, h = t["judge_prefill"], t["heldout_logps"]
        out.append(
            f"| `bench/sampler_placement.py --tpu-aot` | temporaries per chip, GiB, gemma-3-1b on "
            f"{t['topology']}: rows unplaced (tunix) -> split | judge's prefill (16 x 2,048): "
            f"{gib(j['tunix'])} -> {gib(j['split'])}; 03's held-out scoring ({h['shapes']}): "
            f"{gib(h['tunix'])} -> {gib(h['split'])} | split fits: "
            f"{'met' if j['split']['compiled'] else 'missed'} |"
        )
    if name == "judge_score" and (t := _load("judge_score")):
        low, high = t["interval"]
        out.append(
            f"| `bench/judge_score.py` | a judge call's time, its score digits' probabilities in "
            f'one forward pass vs a sampled "Score: N" ({t["rows"]} rubric prompts of '
            f"{t['prompt_tokens'][0]:,}-{t['prompt_tokens'][1]:,} tokens, {t['devices']}, "
            f"{len(t['ratios'])} interleaved rounds) | time ratio, median {t['median']:.2f} "
            f"({low:.2f}-{high:.2f}) | <= {t['target']}: {t['verdict']} |"
        )
    if name == "judge_score_tpu_aot" and (t := _load("judge_score_tpu_aot")):
        for topology, d in t.items():
            out.append(
                f"| `bench/judge_score.py --tpu-aot` | the judge's pass per chip, GiB, {d['model']} "
                f"on {topology} ({d['rows']} x {d['prompt']:,}): sampled prefill -> score pass "
                f"| peak {d['sampled_prefill']['peak_gib']:.2f} -> {d['score']['peak_gib']:.2f} "
                f"(temporaries {d['sampled_prefill']['temp_gib']:.2f} -> "
                f"{d['score']['temp_gib']:.2f}) | peak not above: "
                f"{'met' if d['peak_ratio'] <= 1 else 'missed'} |"
            )
    if name.startswith("memplan") and (m := _load(name)):
        flag = name.split("_", 1)[-1].removesuffix("_families")
        out += _memplan_rows(m, accelerator=name != "memplan", flag=flag)
    return out


def _memplan_rows(m: dict, *, accelerator: bool, flag: str = "gpu") -> list[str]:
    """One row per plan: the CPU's emulated-device upper bounds, or compiled for an accelerator
    (a lent GPU, ``--accelerator``; a TPU slice's compiler run here, ``--tpu-aot``)."""
    aot = flag.startswith("tpu_aot")
    option = " --tpu-aot" if aot else " --accelerator"
    script = f"`bench/memory_plan.py{option if accelerator else ''}`"
    device = m["device"].split(" (")[0] if not aot else f"{m['device'].split(',')[0]} (AOT)"
    out = []
    for plan in [*m["plans"], *m.get("rechecks", [])]:
        worst = max(plan["steps"], key=lambda s: s["peak"])
        spare = plan["spare_gib"]
        over = f"{-spare:.1f} GiB over" if accelerator else f"CPU bound {-spare:.1f} GiB over"
        verdict = f"fits, {spare:.1f} GiB spare" if spare >= 0 else over
        stage = f", stage {plan['stage']}" if plan.get("stage") else ""
        where = (
            f"compiled for {device}"
            if accelerator
            else f"{sum(s['compile_s'] for s in plan['steps']):.0f} s of compiles"
        )
        if flag == "tpu_aot_pod":  # planned by memplan's command itself, for a multi-host slice
            script, where = f"`{plan['command']}`", f"compiled for {plan['topology']} (AOT)"
        out.append(
            f"| {script} | {plan['recipe']}{stage} | {plan['peak'] / 2**30:.1f} GiB"
            f"{'' if accelerator else '/device'} ({worst['name']}), {where} "
            f"| v5e 16 GiB less 10%: {verdict} |"
        )
    return out


def main() -> int:
    table = "\n".join(rows())
    if "--write" not in sys.argv:
        print(table)
        return 0
    readme = ROOT / "README.md"
    text = readme.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    readme.write_text(text[:start] + "\n" + table + "\n" + text[end:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
