"""Sampling with the prefill projecting the last prompt position only
(``_compat.prefill_last_position``, in every sampler tunixkit builds) against tunix's own
``Sampler``, whose Gemma3 prefill projects every prompt position onto the 262,144-token vocabulary.

At the real vocabulary, on this CPU: the real Gemma 3 270M (``gemma-3-270m``, installed from the
package index), at a GRPO rollout's shape (``--rows``
prompts of ``--prompt`` tokens, ``--new`` sampled tokens, temperature 1). Three figures, both ways:

- the compiled prefill's flops and temporary memory (XLA's cost and memory analyses);
- a whole sampler call's time: each variant warmed once (its compile), then ``--repeats`` rounds,
  interleaved (``bench/_repeats.py``); the ratio ours / tunix's, median and interval, against
  :data:`TARGET`;
- whether both give the same tokens (same seed) and log-probabilities.

    .venv/bin/python bench/prefill_last_position.py

Writes ``bench/results/prefill_last_position.json``.
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
sys.path.insert(0, str(HERE))  # bench/_repeats.py
RESULTS = HERE / "results"
TARGET = 0.8  # a sampler call with the last-position prefill over tunix's, at most
WORDS = "the a model answer question summary river energy cell proof code list idea story".split()


def _cpu() -> str:
    """This machine's processor, as /proc/cpuinfo names it (else the platform's word)."""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> int:
    import _repeats
    import jax
    import numpy as np
    from tunix.generate import sampler as sampler_lib

    from tunixkit import _compat

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--new", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(RESULTS / "prefill_last_position.json"))
    args = ap.parse_args()

    from tunixkit import models

    loaded = models.load_model("gemma-3-270m", source="package")  # the real 270M (TUNIX_NOTES.md)
    cfg = loaded.config
    rng = random.Random(0)
    prompts = []
    while len(prompts) < args.rows:  # prompts that fill most of the prompt limit
        words = " ".join(rng.choice(WORDS) for _ in range(args.prompt))
        ids = loaded.tokenizer.encode(words)[: args.prompt - 24]
        prompts.append(loaded.chat.prompt(loaded.tokenizer.decode(ids)))
    cache = sampler_lib.CacheConfig(
        cache_size=args.prompt + args.new,
        num_layers=cfg.num_layers,
        num_kv_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim,
    )
    samplers = {
        "tunix": sampler_lib.Sampler(loaded.model, loaded.tokenizer, cache),
        "last_position": sampler_lib.Sampler(loaded.model, loaded.tokenizer, cache),
    }
    assert _compat.prefill_last_position(samplers["last_position"])
    compiled: dict = {}
    for kind, sampler in samplers.items():
        sampler.eos_ids = jax.numpy.array(loaded.eos_ids)
        state = sampler.init_sample_state(
            np.zeros((args.rows, args.prompt), np.int32) + 5,
            total_sampling_steps=args.prompt + args.new,
            include_logits=False,
            forbidden_token_ids=None,
            temperature=1.0,
            top_p=1.0,
            top_k=None,
            seed=jax.random.PRNGKey(0),
            beam_size=None,
            include_logprobs=True,
        )
        c = sampler._compiled_prefill_fn.lower(
            sampler._flattened_transformer_state, state, None, echo=False
        ).compile()
        compiled[kind] = {
            "prefill_gflops": c.cost_analysis()["flops"] / 1e9,
            "prefill_temp_mib": c.memory_analysis().temp_size_in_bytes / 2**20,
        }
        print(kind, compiled[kind], flush=True)
    outputs = {}

    def call(kind: str, _round: int = -1) -> float:
        t0 = time.perf_counter()
        out = samplers[kind](
            prompts,
            max_generation_steps=args.new,
            max_prompt_length=args.prompt,
            eos_tokens=loaded.eos_ids,
            temperature=1.0,
            top_p=1.0,
            seed=7,
            echo=False,
            return_logprobs=True,
        )
        outputs[kind] = out
        return time.perf_counter() - t0

    first = {kind: call(kind) for kind in samplers}  # compiles
    seconds = _repeats.interleaved(list(samplers), args.repeats, call)
    decided = _repeats.decide(seconds["last_position"], seconds["tunix"], target=TARGET)
    a, b = outputs["tunix"], outputs["last_position"]
    logprob_diff = float(
        np.abs(np.concatenate(a.logprobs) - np.concatenate(b.logprobs)).max() if a.logprobs else 0.0
    )
    result = {
        "model": "gemma-3-270m (real weights)",
        "machine": f"{_cpu()}, {os.cpu_count()} cores, "
        f"{jax.device_count()} {jax.default_backend()} device(s)",
        "date": time.strftime("%Y-%m-%d"),
        "rows": args.rows,
        "prompt_tokens": args.prompt,
        "new_tokens": args.new,
        "vocabulary": cfg.num_embed,
        "compiled": compiled,
        "first_call_s": first,
        "seconds": seconds,
        "identical_texts": a.text == b.text,
        "max_logprob_difference": logprob_diff,
        **decided,
    }
    print(_repeats.describe("last position / tunix, sampler call", decided))
    print(f"identical texts: {result['identical_texts']}, log-prob difference {logprob_diff:.1e}")
    pathlib.Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print("wrote", args.out)
    ok = result["identical_texts"] and logprob_diff < 1e-4
    return _repeats.EXIT[decided["verdict"]] if ok else 1


if __name__ == "__main__":
    sys.exit(main())
