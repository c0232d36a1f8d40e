"""Where a GRPO step's time goes (tunixkit.profiling): tunix's perf tracer over a tiny GRPO run.

The trace of the first steps is written with every phase the learner names, its rows add up to
the step, and tracing stops after them; a run that ends before the traced steps are done writes
what it traced when :meth:`StepTrace.finish` is called.
"""

import json

import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent

from tunixkit import agentic, data, models, profiling, rewards, rl, runtime, testing, training


def grpo_run(tmp_path, trace_steps: int, steps: int):
    """A tiny GRPO run of ``steps`` steps (a KL term and two iterations: every phase) traced for
    ``trace_steps``; returns (its trace, its cluster)."""
    mesh = runtime.make_mesh()
    reference = models.load_model("tiny-gemma3-sft", mesh=mesh, verbose=False)
    actor = models.apply_lora(reference.model, rank=4, alpha=8.0, mesh=mesh, verbose=False)
    settings = rl.GRPOSettings(
        learning_rate=1e-3,
        beta=0.1,
        max_prompt_length=96,
        max_generation_steps=12,
        batch_size=2,
        num_generations=2,
        num_iterations=2,
        num_steps=steps * 2,  # optimizer steps: two a GRPO step
        checkpoint_every=10**6,
    )
    trace = profiling.StepTrace(tmp_path / "trace", trace_steps)
    learner, cluster = rl.build_grpo(
        actor,
        reference.model,
        reference.tokenizer,
        mesh=mesh,
        settings=settings,
        reward_fns=rewards.DEFAULT_REWARDS,
        output_dir=tmp_path,
        eos_ids=reference.eos_ids,
        vocab_size=reference.config.num_embed,
        trace=trace,
    )
    records, _ = data.to_records(testing.synthetic_gsm8k(16, seed=0), "synthetic", verbose=False)
    batches = data.grpo_dataset(records, batch_size=2, num_batches=steps)
    result = training.run(
        learner, batches, mesh=mesh, metrics_file=tmp_path / "metrics.jsonl", label="GRPO"
    )
    assert result.steps == steps
    return trace, cluster


def test_the_first_steps_are_traced_by_phase_then_tracing_stops(tmp_path):
    from tunix.perf.trace import NoopTracer

    trace, cluster = grpo_run(tmp_path, trace_steps=2, steps=3)
    assert trace.done and isinstance(cluster.perf, NoopTracer)  # the third step ran untraced
    assert isinstance(cluster.actor_trainer._perf_tracer, NoopTracer)
    assert len(trace.query().main().all_groups("global_step").get()) == 2
    events = json.loads((tmp_path / "trace" / "trace.json").read_text())["traceEvents"]
    names = {e["name"] for e in events if e["ph"] == "X"}
    # LoRA: no weight copy; no tool outside the agentic learner
    spans = {name for _, name, _ in profiling.PHASES} - {"weight_sync", "environment"}
    assert spans | {"global_step", "peft_train_step"} <= names
    assert {e["cat"] for e in events if e["ph"] == "X"} == {"group", "host", "device"}
    rows = json.loads((tmp_path / "trace" / "steps.json").read_text())
    assert rows == trace.rows and [r["step"] for r in rows] == [1, 2]
    for r in rows:  # every phase measured, and the phases fit in the step they belong to
        assert all(r[c] > 0 for c in ("rollout", "reference", "old policy", "rewards", "update"))
        parts = sum(r[c] for c, _, _ in profiling.PHASES)
        assert r["other"] == pytest.approx(r["seconds"] - parts) and parts <= r["seconds"] * 1.01
        # the device's own time of the parts with a device span (the first device's)
        assert all(r[f"device {c}"] > 0 for c in ("rollout", "reference", "old policy", "update"))
    assert rows[0]["seconds"] > rows[1]["seconds"]  # the first step compiles
    table = trace._repr_markdown_()  # what a notebook shows
    assert "| 1 (compiles) |" in table and "share after step 1" in table
    assert "On the device, a step after the first (mean): rollout" in table
    assert trace.plot(tmp_path / "step_time.png") is not None
    assert (tmp_path / "step_time.png").stat().st_size > 0


def test_a_run_that_ends_first_writes_what_it_traced(tmp_path):
    trace, cluster = grpo_run(tmp_path, trace_steps=5, steps=2)
    assert not trace.done and not (tmp_path / "trace" / "trace.json").exists()
    rows = trace.finish()  # after training, as the notebooks call it
    assert [r["step"] for r in rows] == [1, 2] and trace.done
    assert json.loads((tmp_path / "trace" / "steps.json").read_text()) == rows
    assert trace.finish() == rows  # once
    untraced = profiling.StepTrace(tmp_path / "none", 0)
    assert untraced.perf_config() is None  # 0: not traced
    assert untraced.plot(tmp_path / "none.png") is None and not (tmp_path / "none.png").exists()
    assert "no GRPO step was traced" in untraced._repr_markdown_()
    # the notebooks' check: as many rows as steps trained (up to 5), each with its phases timed
    assert trace.complete and trace.trained == 0  # finish() without the count: nothing to check
    trace.trained = 2
    assert trace.complete
    trace.trained = 3  # a step trained but never exported
    assert not trace.complete
    trace.trained, trace.rows = 2, [dict(r, update=0.0) for r in rows]
    assert not trace.complete


def test_agentic_grpo_is_traced_through_tunix_s_second_tracer(tmp_path):
    """07's learner exports only tunix's second tracer: its first steps are traced by phase from
    it, written as a Chrome trace, then both tracers stop."""
    import resume_job
    from tunix.perf.experimental.tracer import NoopTracer

    mesh = agentic.training_mesh(runtime.make_mesh())  # as agentic.stage trains
    trace = profiling.StepTrace(tmp_path / "trace", 2)
    learner, batches, _, _ = resume_job.agentic_grpo(tmp_path, mesh, trace=trace)
    cluster = learner.rl_cluster
    metrics = tmp_path / "metrics.jsonl"
    result = training.run(learner, batches, mesh=mesh, metrics_file=metrics, label="GRPO")
    assert result.steps == resume_job.STEPS > 2
    assert trace.done and isinstance(cluster.perf_v2, NoopTracer)  # later steps untraced
    assert isinstance(cluster.actor_trainer._perf_tracer_v2, NoopTracer)
    rows = json.loads((tmp_path / "trace" / "steps.json").read_text())
    assert [r["step"] for r in rows] == [1, 2] and rows == trace.rows
    for r in rows:
        assert r["seconds"] > 0 and r["rollout"] > 0 and r["reference"] > 0, r
        assert r["other"] >= 0, r
        assert all(r[c] <= r["seconds"] + 1e-6 for c, _, _ in profiling.PHASES), r
    # a device span lands in the step committed after it began (the update's can be the next one)
    assert sum(r["device update"] for r in rows) > 0 and rows[0]["device rollout"] > 0, rows
    assert trace.finish(result.trained) == rows and trace.trained == resume_job.STEPS
    # the trace is tunix's own Perfetto file: every named phase is a slice in it, of both steps
    (written,) = (tmp_path / "trace").glob("perfetto_trace_v2_*.pb")
    assert not (tmp_path / "trace" / "trace.json").exists()
    packets = perfetto_trace_pb2.Trace.FromString(written.read_bytes()).packet
    begun = TrackEvent.Type.TYPE_SLICE_BEGIN
    names = [p.track_event.name for p in packets if p.track_event.type == begun]
    for phase in ("rollout", "reference_inference", "advantage_computation", "peft_train"):
        assert any(n.startswith(f"{phase} (step=1") for n in names), (phase, sorted(set(names)))
    tracks = {p.track_descriptor.name for p in packets if p.HasField("track_descriptor")}
    assert "Host - Main threads" in tracks and any(t.endswith("Cluster") for t in tracks), tracks
    assert "| share after step 1 |" in trace._repr_markdown_()
