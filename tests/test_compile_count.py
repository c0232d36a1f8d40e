"""bench/compile_count.py: what a whole smoke run of 06 asks XLA to compile, and what building each
sampler once for the whole notebook could still save (its committed run)."""

import importlib.util
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("compile_count", ROOT / "bench" / "compile_count.py")
compile_count = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compile_count)


def test_requests_are_told_apart_as_compiles_and_cache_reads():
    rows = [
        ["jaxpr_trace_duration", "_decode_fn", 1.0, None],
        ["jaxpr_to_mlir_module_duration", "jit(_decode_fn)", 0.5, None],
        ["backend_compile_duration", "jit(_decode_fn)", 4.0, False],
        ["jaxpr_trace_duration", "_decode_fn", 1.0, None],
        ["jaxpr_to_mlir_module_duration", "jit(_decode_fn)", 0.5, None],
        ["backend_compile_duration", "jit(_decode_fn)", 0.2, True],
        ["backend_compile_duration", "jit(add)", 0.1, False],
    ]
    found = compile_count.summarize(rows)
    decode = found["programs"]["_decode_fn"]
    assert (decode["requests"], decode["compiles"], decode["cache_reads"]) == (2, 1, 1)
    assert (decode["compile_s"], decode["read_s"], decode["trace_s"]) == (4.0, 0.2, 2.0)
    assert found["total"]["requests"] == 3 and found["total"]["compiles"] == 2
    # the second decode request: its cache read and half of the program's tracing and lowering
    assert compile_count.repeated_cost(found["programs"]) == {"requests": 1, "seconds": 1.7}


def test_the_committed_06_run_reads_every_repeated_sampler_program_from_the_cache():
    """Each pass of 06 builds its own sampler; in the committed run (an empty cache at its start),
    every sampler program was compiled once per shape and read from the cache after that, so what
    one sampler per notebook could still save is a small share of the run (the README's bench
    table)."""
    found = json.loads((ROOT / "bench/results/compile_count_06.json").read_text())
    assert found["notebook"] == "06_multidomain_pipeline" and found["profile"] == "smoke"
    for name in ("_prefill_fn", "_decode_fn"):
        p = found["programs"][name]
        assert p["requests"] == p["compiles"] + p["cache_reads"] and p["cache_reads"] > 0, p
    assert found["repeated"]["seconds"] < 0.05 * found["run_seconds"], found["repeated"]
