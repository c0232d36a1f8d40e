"""The judge's score read from its digits' probabilities in one forward pass
(``judging.llm_grader``: ``evaluation.ChoiceScorer``, the last position projected only) against the
way it was read before: a greedy "Score: N" sampled by tunix's sampler (the batch split over the
mesh), whose prefill projects every prompt position onto the vocabulary.

Two measurements:

- **time, here** (default): the smoke judge (``tiny-gemma3-sft``) on 4 emulated CPU devices, 16
  rubric prompts of about 1,000 tokens (the limit 2,048), scored both ways: warmed once (the compiles),
  then ``--repeats`` interleaved rounds (``bench/_repeats.py``). Target: the score pass at most
  ``TARGET`` of the sampled reply's time (median of the per-round ratios, its whole interval).
- **memory, on a TPU's compiler** (``--tpu-aot``, libtpu installed as in ``bench/memory_plan.py``):
  both passes compiled for gemma-3-1b-it (26 layers) on ``--topology`` (``v5e:2x4``: Kaggle's
  v5e-8; ``v5e:1x1``: Colab's one chip), their temporaries and per-device peaks (arguments, outputs
  and temporaries) side by side.

    .venv/bin/python bench/judge_score.py
    PYTHONPATH=/tmp/libtpu .venv/bin/python bench/judge_score.py --tpu-aot --topology v5e:2x4

Since 2026-11-28 ``evaluation.make_sampler``'s prefill projects the last prompt position only
(``_compat.prefill_last_position``): a rerun of the time part compares the score pass with that
sampler, not the one the committed results used; the memory part keeps tunix's prefill.

Results go to ``bench/results/judge_score.json`` and ``judge_score_tpu_aot.json`` (one entry per
topology).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import random
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
RESULTS = HERE / "results"
TARGET = 0.8  # the score pass's time over the sampled reply's, at most
NEW_TOKENS = 16  # the sampled reply's tokens, as the judge sampled "Score: N" before
WORDS = "the a model answer question summary river energy cell proof code list idea story".split()


def measure_time(repeats: int) -> dict:
    import _repeats

    from tunixkit import evaluation, judging, models, runtime

    judge = models.load_model("tiny-gemma3-sft", mesh=runtime.make_mesh())
    rows, limit = judging.JUDGE_BATCH, judging.JUDGE_PROMPT_LENGTH
    rng = random.Random(0)
    rubric = judging.JudgeRubric()
    prompts = [
        judge.chat.prompt(
            rubric(
                "Write a short story about a river.",
                " ".join(rng.choice(WORDS) for _ in range(rng.randint(300, 340))),
            )
        )
        + judging.SCORE_PREFIX
        for _ in range(rows)
    ]
    tokens = [len(judge.tokenizer.encode(p)) + 1 for p in prompts]
    scorer = evaluation.ChoiceScorer(
        judge, judging.SCORE_DIGITS, max_prompt_length=limit, batch_size=rows
    )
    config = evaluation.EvalConfig(
        max_prompt_length=limit,
        max_generation_steps=NEW_TOKENS,
        batch_size=rows,
        system_prompt=None,
    )
    sampler = evaluation.make_sampler(judge, limit + NEW_TOKENS)

    def call(kind: str, _round: int = -1) -> float:
        t0 = time.perf_counter()
        if kind == "score":
            scorer(prompts)
        else:
            evaluation.generate(judge, prompts, config, progress=False, sampler=sampler)
        return time.perf_counter() - t0

    kinds = ["score", "sampled"]
    first = {kind: call(kind) for kind in kinds}  # compiles
    seconds = _repeats.interleaved(kinds, repeats, call)
    decided = _repeats.decide(seconds["score"], seconds["sampled"], target=TARGET)
    print(_repeats.describe("judge call, score pass / sampled reply", decided), flush=True)
    return {
        "rows": rows,
        "prompt_tokens": [min(tokens), max(tokens)],
        "prompt_limit": limit,
        "sampled_new_tokens": NEW_TOKENS,
        "seconds": seconds,
        "first_call_s": first,
        **decided,
    }


def measure_memory(topology: str) -> dict:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from tunixkit import _compat, judging
    from tunixkit.tools import memplan

    mesh = memplan.tpu_slice_mesh(topology)
    judge, _, cfg = memplan._abstract("gemma-3-1b-it", None, mesh)
    rows, p = judging.JUDGE_BATCH, judging.JUDGE_PROMPT_LENGTH
    out: dict = {"topology": topology, "model": "gemma-3-1b-it", "rows": rows, "prompt": p}

    def figures(compiled) -> dict:
        m = compiled.memory_analysis()
        peak = m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
        return {
            "temp_gib": m.temp_size_in_bytes / 2**30,
            "peak_gib": (peak - m.alias_size_in_bytes) / 2**30,
        }

    t0 = time.perf_counter()
    ids, mask = _compat.split_rows(
        (jax.ShapeDtypeStruct((rows, p), jnp.int32), jax.ShapeDtypeStruct((rows, p), jnp.bool_)),
        mesh,
    )
    choices = jax.ShapeDtypeStruct((len(judging.SCORE_DIGITS),), jnp.int32)
    fn = _compat.choice_logprobs(judge)
    out["score"] = figures(fn.lower(nnx.state(judge), ids, mask, choices).compile())
    out["score"]["compile_s"] = time.perf_counter() - t0
    print(f"{topology}: score pass {out['score']}", flush=True)
    t0 = time.perf_counter()
    sampler, state = memplan._sampler(
        judge,
        cfg,
        rows,
        p,
        NEW_TOKENS,
        p + NEW_TOKENS,
        eos=[memplan.EOS_ID],
        temperature=0.0,
        top_p=None,
        top_k=None,
        last=False,  # the sampled reply as it was read: tunix's prefill, every position projected
    )
    state = _compat.place_sampling_batch(state, mesh)
    params = sampler._flattened_transformer_state
    prefill = sampler._compiled_prefill_fn.lower(params, state, None, echo=False).compile()
    out["sampled_prefill"] = figures(prefill)
    out["sampled_prefill"]["compile_s"] = time.perf_counter() - t0
    print(f"{topology}: sampled reply's prefill {out['sampled_prefill']}", flush=True)
    out["temp_ratio"] = out["score"]["temp_gib"] / out["sampled_prefill"]["temp_gib"]
    out["peak_ratio"] = out["score"]["peak_gib"] / out["sampled_prefill"]["peak_gib"]
    print(
        f"{topology}: score pass / sampled prefill: temporaries {out['temp_ratio']:.2f}, "
        f"peak {out['peak_ratio']:.2f}",
        flush=True,
    )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tpu-aot", action="store_true", help="compile both passes for a TPU slice")
    ap.add_argument("--topology", default="v5e:2x4")
    args = ap.parse_args()
    if args.tpu_aot:
        os.environ["JAX_PLATFORMS"] = "cpu"
        path = RESULTS / "judge_score_tpu_aot.json"
        found = json.loads(path.read_text()) if path.exists() else {}
        entry = measure_memory(args.topology)
        entry["host"] = platform.processor() or platform.machine()
        entry["date"] = time.strftime("%Y-%m-%d")
        found[args.topology] = entry
        ok = entry["peak_ratio"] <= 1.0
    else:
        os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        path = RESULTS / "judge_score.json"
        found = {"devices": "4 emulated CPU devices", "cpus": os.cpu_count()}
        found |= measure_time(args.repeats)
        found["host"] = platform.processor() or platform.machine()
        found["date"] = time.strftime("%Y-%m-%d")
        ok = found["verdict"] == "met"
    path.write_text(json.dumps(found, indent=1) + "\n")
    print(f"wrote {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
