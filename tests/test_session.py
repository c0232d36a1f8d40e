"""The session: recipe.json guards, continuing from a read-only previous session, the clock, upload."""

import json
import stat
import sys
import time
import types

import pytest

from tunixkit import runtime, session

RECIPE = {
    "notebook": "SFT",
    "profile": "smoke",
    "recipe": {"steps": 150, "eval": {"batch_size": 32}},
    "inputs": {},
}


def _fake_run(folder, steps=(25, 50), recipe=RECIPE):
    """What a session leaves: recipe, metrics, stored evaluation, committed checkpoints, an export."""
    folder.mkdir(parents=True)
    (folder / "recipe.json").write_text(json.dumps(recipe))
    (folder / "metrics.jsonl").write_text('{"mode": "train", "step": 1, "loss": 2.0}\n')
    (folder / "predictions_before.jsonl").write_text('{"question": "q"}\n')
    for step in steps:
        (folder / "checkpoints" / str(step) / "model_params").mkdir(parents=True)
        (folder / "checkpoints" / str(step) / "commit_success.txt").write_text("ok")
    (
        folder / "checkpoints" / "75.orbax-checkpoint-tmp-1"
    ).mkdir()  # killed mid-save: not a checkpoint
    (folder / "export" / "hf").mkdir(parents=True)
    return folder


def _read_only(folder):
    for p in [folder, *folder.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def test_other_settings_in_output_dir_are_refused_naming_the_fields(tmp_path):
    out = _fake_run(tmp_path / "out")
    changed = json.loads(json.dumps(RECIPE))
    changed["recipe"]["steps"], changed["recipe"]["eval"]["batch_size"] = 300, 8
    with pytest.raises(session.RecipeMismatch) as e:
        session.prepare(out, changed)
    msg = str(e.value)
    assert (
        "recipe.steps: 150 -> 300" in msg
        and "recipe.eval.batch_size: 32 -> 8" in msg
        and "START_FRESH" in msg
    )
    assert session.prepare(out, RECIPE) == "continuing this output folder from step 50"
    said = session.prepare(out, changed, start_fresh=True)
    assert "moved to" in said and session.latest_checkpoint_step(out) is None
    kept = next((out / "previous").iterdir())
    assert session.latest_checkpoint_step(kept) == 50, "the earlier run was lost"
    assert json.loads((out / "recipe.json").read_text()) == changed


def test_resume_from_a_read_only_previous_session(tmp_path):
    previous = _fake_run(tmp_path / "input" / "run")
    _read_only(tmp_path / "input")
    out = tmp_path / "working" / "run"
    said = session.prepare(out, RECIPE, resume_from=str(previous))
    assert said == f"continuing from {previous} at step 50"
    assert session.latest_checkpoint_step(out) == 50
    assert not (out / "checkpoints" / "25").exists(), "only the newest checkpoint is needed"
    assert not (out / "checkpoints" / "75.orbax-checkpoint-tmp-1").exists()
    assert not (out / "export").exists(), "the export is made again at the end"
    assert (out / "predictions_before.jsonl").is_file() and (out / "metrics.jsonl").is_file()
    (out / "metrics.jsonl").write_text("")  # copied files are writable
    (out / "checkpoints" / "50" / "model_params" / "new").mkdir()
    again = session.prepare(out, RECIPE, resume_from=str(previous))  # a rerun in the same session
    assert again.startswith("continuing this output folder from step 50")


def test_resume_from_a_run_of_stages_carries_every_stage(tmp_path):
    """Notebook 06 keeps each stage's checkpoints in its own folder (``grpo/checkpoints/actor/20``):
    a session stopped in its GRPO stage is a previous session to continue from, like any other."""
    previous = tmp_path / "input" / "run"
    previous.mkdir(parents=True)
    (previous / "recipe.json").write_text(json.dumps(RECIPE))
    (previous / "stages.json").write_text(json.dumps({"sft": {"done": True, "export": "x"}}))
    (previous / "domains_sft.json").write_text("{}")
    (previous / "sft" / "export" / "hf").mkdir(parents=True)
    for folder in ("sft/checkpoints/300", "grpo/checkpoints/actor/20"):
        (previous / folder / "model_params").mkdir(parents=True)
        (previous / folder / "commit_success.txt").write_text("ok")
    (previous / "preference").mkdir()
    (previous / "preference" / "pairs.jsonl").write_text("{}\n")
    _read_only(tmp_path / "input")
    out = tmp_path / "working" / "run"
    said = session.prepare(out, RECIPE, resume_from=str(previous))
    assert said == f"continuing from {previous} (each stage continues from its own checkpoint)"
    for kept in (
        "stages.json",
        "domains_sft.json",
        "sft/export/hf",
        "preference/pairs.jsonl",
        "grpo/checkpoints/actor/20/commit_success.txt",
    ):
        assert (out / kept).exists(), kept
    (out / "grpo" / "checkpoints" / "actor" / "40" / "model_params").mkdir(parents=True)
    (out / "grpo" / "checkpoints" / "actor" / "40" / "commit_success.txt").write_text("ok")
    again = session.prepare(out, RECIPE, resume_from=str(previous))  # a rerun in the same session
    assert "which is not used" in again and session.latest_checkpoint_step(out) == 300


def test_resume_from_errors_say_what_to_do(tmp_path):
    empty = tmp_path / "nothing"
    empty.mkdir()
    with pytest.raises(session.ResumeError, match=r"holds no checkpoint .*/kaggle/input/"):
        session.prepare(tmp_path / "out", RECIPE, resume_from=str(empty))
    other = _fake_run(tmp_path / "other", recipe=dict(RECIPE, profile="full"))
    with pytest.raises(session.RecipeMismatch, match=r"profile: 'full' -> 'smoke'"):
        session.prepare(tmp_path / "out2", RECIPE, resume_from=str(other))


def test_clock_keeps_time_for_the_work_after_training(tmp_path, capsys, monkeypatch):
    now = time.time()
    monkeypatch.setattr(session.time, "time", lambda: now)  # the clock stands still: no pace
    clock = session.Session(tmp_path, hours=0.1, started=now - 300)  # 6 min session, 5 in
    clock.record("load", 5.0)
    clock.timings |= {"evaluation": 20.0, "evaluation_items": 100}
    # until measured: the export as 3 loads, the last checkpoint as one load
    assert clock.reserve() == pytest.approx(20 + 3 * 5 + 5 + clock.margin)
    assert 55 < clock.remaining() < 61 and clock.margin == pytest.approx(7.2)
    assert not clock.must_stop(next_step_seconds=1.0)
    assert clock.must_stop(next_step_seconds=15.0)
    assert clock.fit(100) == 100  # 0.2 s a question: all of them fit in the time left
    clock.timings["evaluation"] = 100.0  # 1 s a question: about 52 of them fit before the margin
    assert 45 <= clock.fit(100) <= 53 and "shrinks to" in capsys.readouterr().out
    clock.timings["evaluation"] = 20.0
    clock.record("export", 1.0)
    clock.record("checkpoint", 2.0)
    assert clock.reserve() == pytest.approx(20 + 1 + 2 + clock.margin)
    assert json.loads((tmp_path / "timings.json").read_text())["export"] == 1.0
    assert session.Session.start(tmp_path, None).timings["export"] == 1.0  # a rerun knows them
    unlimited = session.Session(tmp_path, hours=None, started=0.0)
    assert not unlimited.must_stop(1e9) and unlimited.fit(1319) == 1319


def test_upload_needs_a_handle_and_calls_kagglehub(tmp_path, monkeypatch):
    with pytest.raises(
        ValueError, match="KAGGLE_MODEL=None: set it to '<your Kaggle user>/<model name>/jax/"
    ):
        session.upload_to_kaggle(tmp_path, None)
    with pytest.raises(ValueError, match="KAGGLE_MODEL='me/model'"):
        session.upload_to_kaggle(tmp_path, "me/model")
    calls = []
    fake = types.SimpleNamespace(model_upload=lambda *a, **k: calls.append((a, k)))
    monkeypatch.setitem(sys.modules, "kagglehub", fake)
    monkeypatch.setattr(
        session, "_make_public", lambda owner, model: calls.append(owner) or "public"
    )
    monkeypatch.setenv("KAGGLE_API_TOKEN", "token")
    assert session.upload_to_kaggle(tmp_path, "me/model/jax/1b", notes="n") == "me/model/jax/1b"
    assert calls[0] == "me"  # made public before the upload
    assert calls[1][0] == ("me/model/jax/1b", str(tmp_path)) and calls[1][1]["version_notes"] == "n"
    session.upload_to_kaggle(tmp_path, "me/model/jax/1b", public=False)
    assert calls[2][0][0] == "me/model/jax/1b"  # not made public


class _FakeModels:
    """kagglehub's client, as far as creating a model goes: ``existing`` maps slugs to privacy."""

    def __init__(self, existing):
        self.existing, self.created = existing, []
        self.models = types.SimpleNamespace(model_api_client=self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def get_model(self, request):
        import requests

        if request.model_slug not in self.existing:
            response = requests.Response()
            response.status_code, response.url = 404, f"https://kaggle/{request.model_slug}"
            raise requests.HTTPError("404", response=response)
        return types.SimpleNamespace(is_private=self.existing[request.model_slug])

    def create_model(self, request):
        self.created.append((request.owner_slug, request.slug, request.is_private))
        return types.SimpleNamespace(to_dict=lambda: {})


def test_a_new_kaggle_model_is_created_public_an_existing_one_kept(monkeypatch):
    import kagglehub.clients

    fake = _FakeModels({"mine": True, "shared": False})
    monkeypatch.setattr(kagglehub.clients, "build_kaggle_client", lambda: fake)
    assert session._make_public("me", "new-model") == "public"
    assert fake.created == [("me", "new-model", False)]
    assert session._make_public("me", "mine") == "private"  # said, not changed
    assert session._make_public("me", "shared") == "public" and len(fake.created) == 1


def test_stop_file_stops_at_its_step_and_stays_behind(tmp_path):
    clock = session.Session(tmp_path / "run", hours=None, started=time.time())
    assert not clock.stop_requested(10**6)  # no file: only the clock stops a run
    clock.out_dir.mkdir()
    clock.stop_file.write_text("")
    assert clock.stop_requested(0)  # empty: stop now
    clock.stop_file.write_text("30\n")
    assert [clock.stop_requested(s) for s in (0, 29, 30, 31)] == [False, False, True, True]
    clock.stop_file.write_text("at noon")
    with pytest.raises(ValueError, match=r"run/STOP: expected an empty file or a step number"):
        clock.stop_requested(1)
    # a continuing session does not inherit the request
    previous = _fake_run(tmp_path / "input" / "run")
    (previous / "STOP").write_text("50")
    out = tmp_path / "working" / "run"
    session.prepare(out, RECIPE, resume_from=str(previous))
    assert (out / "metrics.jsonl").is_file() and not (out / "STOP").exists()


def test_the_clock_survives_a_kernel_restart_on_kaggle(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    first = time.time() - 3600
    monkeypatch.setenv(session.START_ENV, str(first))
    assert session.Session.start(tmp_path / "run").started == first
    monkeypatch.setenv(session.START_ENV, str(time.time()))  # the first cell after a restart
    clock = session.Session.start(tmp_path / "run")
    assert clock.started == first and clock.remaining() < 8 * 3600 + 1
    assert "counting from this session's first start 60 min ago" in capsys.readouterr().out
    monkeypatch.delenv("KAGGLE_KERNEL_RUN_TYPE")  # locally each run has its own clock
    assert session.Session.start(tmp_path / "run").started > first


def test_publish_gives_the_handle_or_none_with_the_reason(tmp_path, monkeypatch, capsys):
    assert session.publish(tmp_path, None) is None
    assert (
        "unrestricted_kaggle_model = None: not uploaded (set KAGGLE_MODEL"
        in capsys.readouterr().out
    )
    assert session.publish(None, "me/m/jax/1b") is None
    assert "no stage finished" in capsys.readouterr().out
    with pytest.raises(ValueError, match="KAGGLE_MODEL='me/m'"):  # a wrong handle: said at once
        session.publish(tmp_path, "me/m")

    def fail(*a, **k):
        raise ConnectionError("no route to www.kaggle.com")

    monkeypatch.setitem(sys.modules, "kagglehub", types.SimpleNamespace(model_upload=fail))
    monkeypatch.setattr(session, "_make_public", lambda owner, model: "public")  # no network
    monkeypatch.setenv("KAGGLE_API_TOKEN", "token")
    assert session.publish(tmp_path, "me/m/jax/1b") is None  # the run does not end red
    said = capsys.readouterr().out
    assert "the upload to me/m/jax/1b failed (ConnectionError: no route" in said
    assert f"Upload {tmp_path} later" in said
    calls = []
    monkeypatch.setitem(
        sys.modules,
        "kagglehub",
        types.SimpleNamespace(model_upload=lambda *a, **k: calls.append(k)),
    )
    assert session.publish(tmp_path, "me/m/jax/1b") == "me/m/jax/1b"
    assert "license_name" not in calls[0]  # Gemma's terms, not a licence of our choosing
    said = capsys.readouterr().out
    assert "https://www.kaggle.com/models/me/m (public; licence: Gemma's terms of use)" in said


def _rehearsed(tmp_path, hours):
    """A session clock whose rehearsal measured: load, an evaluation of 64 of 1,319 questions (two
    generation batches: the first 20 s with its compile, the second 2 s), 4 SFT steps of 930 (the
    first 12 s, then 1 s each), an export, the evaluation after."""
    clock = session.Session(tmp_path / "rehearsal", hours, time.time() - 100.0)
    clock.rehearsal = session.Rehearsal(report_dir=tmp_path, items=64)
    assert clock.sized(1319) == 64 and clock.rehearsal.planned == {"evaluation": 1319}
    assert clock.sized(128, label="scoring", batch=8) == 16  # two batches of a batched pass
    del clock.rehearsal.planned["scoring"]
    r = clock.rehearsal
    r.timed("evaluation", 5.0, 22.0, items=64, generate_calls=[[(32, 20.0), (32, 2.0)]])
    r.stage(
        "SFT",
        30.0,
        15.0,
        planned_steps=930,
        steps=4,
        step_seconds=[12.0, 1.0, 1.0],
        checkpoint_every=100,
        checkpoint_seconds=0.5,
    )
    r.timed("export", 50.0, 3.0, items=None, generate_calls=[])
    r.timed("evaluation", 60.0, 4.0, items=64, generate_calls=[[(32, 2.0), (32, 2.0)]])
    return clock


def test_rehearsal_projects_each_part_to_the_real_run(tmp_path, capsys):
    clock = _rehearsed(tmp_path, None)
    # each part is said and kept on disk as it is measured: a rehearsal cut short keeps them
    kept = (tmp_path / session.REHEARSAL_EVENTS).read_text().splitlines()
    assert [json.loads(line) for line in kept] == clock.rehearsal.events and len(kept) == 4
    assert "rehearsal: SFT took 15 s (11 s of it compiling); 946 s in the real run" in (
        capsys.readouterr().out
    )
    session.Rehearsal(report_dir=tmp_path)  # the next rehearsal starts its own
    assert not (tmp_path / session.REHEARSAL_EVENTS).exists()
    report = clock.rehearsal_report()
    ev_before, sft, export, ev_after = report["schedule"]
    # compile as measured, the rest per item: 18 s + 4 s * 1319 / 64
    assert ev_before["compile_seconds"] == 18.0
    assert ev_before["projected_seconds"] == pytest.approx(18 + 4 * 1319 / 64, abs=0.01)
    # the first steps' extra time as measured (15 - 4 x 1 s), then 1 s a step, and 9 checkpoints
    assert (sft["seconds_per_step"], sft["compile_seconds"]) == (1.0, 11.0)
    assert sft["projected_seconds"] == pytest.approx(11 + 930 + 9 * 0.5)
    assert export["projected_seconds"] == 3.0
    assert ev_after["projected_seconds"] == pytest.approx(4 * 1319 / 64, abs=0.01)
    # the timeline: each part starts later by what the parts before it grew
    grown = ev_before["projected_seconds"] - 22 + sft["projected_seconds"] - 15
    assert export["projected_end_s"] == pytest.approx(50 + grown + 3, abs=0.1)
    assert report["last_evaluation_ends_s"] == ev_after["projected_end_s"]
    assert report["stages"]["SFT"]["steps_that_fit"] == 930 and report["fits_session"]
    assert json.loads((tmp_path / "rehearsal.json").read_text())["stages"] == report["stages"]


def test_a_rehearsal_that_does_not_fit_the_session_says_how_many_steps_do(tmp_path, capsys):
    report = _rehearsed(tmp_path, 0.25).rehearsal_report()  # 900 s, less the 18 s margin
    assert not report["fits_session"] and report["projected_seconds"] > 900
    over = report["projected_seconds"] - (900 - 18)
    fit = report["stages"]["SFT"]["steps_that_fit"]
    assert fit == int(930 * (1 - over / 930)), fit
    assert 0 < fit < 930
    assert f"SFT {fit}" in report["advice"][0] and "SESSION_HOURS" in report["advice"][0]
    assert "does NOT fit" in capsys.readouterr().out


def test_a_rehearsal_trains_its_steps_only_and_is_never_carried(tmp_path):
    clock = session.Session(tmp_path, None, time.time())
    clock.rehearsal = session.Rehearsal(report_dir=tmp_path, steps=4)
    assert "REHEARSAL: 4 steps of every stage" in clock.describe()
    assert session.publish(tmp_path, "me/m/jax/1b", rehearsal=True) is None  # never uploaded
    run = _fake_run(tmp_path / "out", steps=(2,))
    (run / session.REHEARSAL_DIR / "checkpoints" / "4").mkdir(parents=True)
    (run / session.REHEARSAL_DIR / "checkpoints" / "4" / "commit_success.txt").write_text("ok")
    assert session.latest_checkpoint_step(run) == 2  # a rehearsal's checkpoint is no stage's


def test_a_rehearsal_without_training_that_does_not_fit_says_so(tmp_path):
    clock = session.Session(tmp_path / "rehearsal", 0.01, time.time() - 30.0)
    clock.rehearsal = session.Rehearsal(report_dir=tmp_path, items=8)
    clock.sized(1000)
    clock.rehearsal.timed("evaluation", 1.0, 8.0, items=8, generate_calls=[])
    report = clock.rehearsal_report()
    assert not report["fits_session"] and report["stages"] == {}
    assert "evaluate fewer questions" in report["advice"][0]


def test_a_timed_block_is_projected_to_the_items_it_names(tmp_path):
    clock = session.Session(tmp_path, None, time.time())
    clock.rehearsal = session.Rehearsal(report_dir=tmp_path, items=8)
    clock.rehearsal.timed("calibration", 0.0, 4.0, items=8, generate_calls=[], planned=300)
    clock.rehearsal.timed("judges' check", 4.0, 2.0, items=12, generate_calls=[])
    calibration, check = clock.rehearsal.events
    assert calibration["planned_items"] == 300 and calibration["projected_seconds"] == 150.0
    assert check["projected_seconds"] == 2.0  # a fixed-size block: as measured


def test_the_schedule_spans_the_steps_a_rehearsal_says_fit(tmp_path, capsys):
    clock = session.Session(tmp_path, 9.0, time.time())
    assert clock.schedule_steps(930, label="SFT") == 930  # no rehearsal: the plan
    report = {"stages": {"SFT": {"steps_that_fit": 700}}}
    (tmp_path / session.REHEARSAL_FILE).write_text(json.dumps(report))
    assert clock.schedule_steps(930, label="SFT") == 700
    assert "spans 700 of the 930 planned steps" in capsys.readouterr().out
    assert clock.schedule_steps(500, label="SFT") == 500  # fewer planned than fit
    assert clock.schedule_steps(930, label="GRPO") == 930  # a stage the rehearsal did not see
    clock.rehearsal = session.Rehearsal(report_dir=tmp_path)
    assert clock.schedule_steps(930, label="SFT") == 930  # a rehearsal measures the plan itself


def test_a_run_continues_only_with_the_release_that_wrote_it(tmp_path):
    old = _fake_run(tmp_path / "old", recipe=dict(RECIPE, tunixkit="0.2.0"))
    now = dict(RECIPE, tunixkit="0.3.0")
    with pytest.raises(session.RecipeMismatch, match=r"tunixkit 0\.2\.0; this is tunixkit 0\.3\.0"):
        session.prepare(tmp_path / "out", now, resume_from=str(old))
    with pytest.raises(session.RecipeMismatch, match=r"set TUNIXKIT_RELEASE .* to the commit"):
        session.prepare(old, now)  # the same folder, rerun after an upgrade
    # the library changed and its version did not: the code's digest tells them apart
    changed = _fake_run(tmp_path / "changed", recipe=dict(RECIPE, tunixkit="0.3.0+0123456789ab"))
    with pytest.raises(session.RecipeMismatch, match=r"0\.3\.0\+0123456789ab; this is tunixkit 0"):
        session.prepare(changed, dict(RECIPE, tunixkit=runtime.code_id()))
    said = session.prepare(old, now, start_fresh=True)  # a new run; the old one is kept
    assert "moved to" in said and list((old / "previous").iterdir())
    unrecorded = _fake_run(tmp_path / "unrecorded", recipe=RECIPE)  # written before versions were
    assert "continuing" in session.prepare(tmp_path / "out2", now, resume_from=str(unrecorded))


def test_on_kaggle_the_judged_model_goes_where_the_template_looks(tmp_path, monkeypatch):
    """On Kaggle the competition's template reads /kaggle/working/ckpts/actor/<step>: the judged
    model goes there whatever OUTPUT_DIR (inside /kaggle/working) is; elsewhere, and for a
    rehearsal (its folder is removed with what it wrote), it stays under OUTPUT_DIR."""
    from tunixkit import recipes

    working = tmp_path / "kaggle" / "working"
    monkeypatch.setattr(session, "KAGGLE_WORKING", working)
    monkeypatch.setattr(runtime, "detect_environment", lambda: "kaggle")
    monkeypatch.setattr(session, "_session_start", lambda started: started)
    clock = session.Session.start(working / "runs" / "06_multidomain_pipeline")
    assert clock.judged_dir() == working
    assert session.Session.start(tmp_path / "elsewhere").judged_dir() == tmp_path / "elsewhere"
    _, _, out, rehearsal = recipes.start(
        recipes.Quickstart, "smoke", working / "runs" / "00", rehearsal=True, verbose=False
    )
    assert rehearsal.judged_dir() == out and out.name == session.REHEARSAL_DIR
    monkeypatch.setattr(runtime, "detect_environment", lambda: "local")
    assert session.Session.start(working / "runs" / "x").judged_dir() == working / "runs" / "x"


def test_a_rehearsal_from_another_session_sizes_the_schedule(tmp_path, capsys):
    """Save & Run All starts with an empty OUTPUT_DIR: REHEARSAL_FROM points at a rehearsal's
    output (a Kaggle input), whose steps that fit size the learning-rate schedule; without one, a
    clocked run says that its schedule may not decay."""
    from tunixkit import recipes

    earlier = tmp_path / "input" / "rehearsal_run"
    earlier.mkdir(parents=True)
    report = {"stages": {"SFT": {"steps_that_fit": 700}}}
    (earlier / session.REHEARSAL_FILE).write_text(json.dumps(report))
    _, _, _, clock = recipes.start(
        recipes.SFT, "smoke", tmp_path / "out", rehearsal_from=str(earlier), verbose=False
    )
    assert clock.schedule_steps(930, label="SFT") == 700
    with pytest.raises(FileNotFoundError, match="REHEARSAL_FROM=.*expected a rehearsal's"):
        recipes.start(recipes.SFT, "smoke", tmp_path / "o2", rehearsal_from=str(tmp_path))
    capsys.readouterr()
    clocked = session.Session(tmp_path / "o3", hours=9.0, started=time.time())
    assert clocked.schedule_steps(930, label="SFT") == 930
    assert (
        "spans the 930 planned steps until the pace of the first steps" in capsys.readouterr().out
    )


def test_every_clock_training_takes_is_a_clock_by_its_own_members(tmp_path):
    """training.run takes a session.Clock: the session, a stage's slice of it and the tests'
    scripted stand-in each implement every member themselves (a stage's clock forwards none of
    them through __getattr__), and training asks nothing of a clock outside the protocol."""
    import ast
    import inspect

    from tunixkit import testing, training

    public = [n for n in dir(session.Clock) if not n.startswith("_")]
    members = sorted(set(public) | set(session.Clock.__annotations__))
    assert {"must_stop", "steps_that_fit", "stop_requested", "record", "timings"} <= set(members)
    clock = session.Session(tmp_path, 1.0, time.time())
    for c in (clock, clock.part(0.5), testing.ScriptedClock()):
        assert isinstance(c, session.Clock), type(c)
        for m in members:
            assert any(
                m in vars(k) or m in getattr(k, "__annotations__", {}) for k in type(c).__mro__
            ), (
                type(c).__name__,
                m,
            )
    asked = {
        node.attr
        for node in ast.walk(ast.parse(inspect.getsource(training)))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute | ast.Name)
        and getattr(node.value, "attr", getattr(node.value, "id", None)) == "session"
    }
    assert asked <= set(members), asked - set(members)


def test_the_steps_that_fit_are_the_time_left_less_the_reserve_over_the_pace(tmp_path):
    """What sizes the schedule from the first steps' pace: a session of 1 h keeps its 72 s margin
    (and the measured work after training); a stage's clock stops at its own deadline too."""
    clock = session.Session(tmp_path, 1.0, time.time())
    assert clock.steps_that_fit(10.0) == (3600 - 72) // 10  # 352 (milliseconds have passed)
    clock.record("evaluation", 528.0)  # the evaluation after training is kept free
    assert clock.steps_that_fit(10.0) == (3600 - 72 - 528) // 10 - 1  # 299, less a moment
    stage = session.StageClock(clock, time.time() + 100.0)
    assert stage.steps_that_fit(30.0) == 3  # 100 s to its deadline
    assert session.Session(tmp_path, None, time.time()).steps_that_fit(10.0) is None  # no limit


def test_a_timed_block_gets_the_batches_of_the_passes_inside_it_and_no_other(tmp_path):
    clock = session.Session(tmp_path, None, time.time())
    clock.rehearsal = session.Rehearsal(report_dir=tmp_path, items=8)
    session.pass_batches().extend([(4, 50.0), (4, 1.0)])  # outside any block: nobody's
    with clock.timed("evaluation", items=8):
        session.pass_batches().extend([(4, 5.0), (4, 1.0)])  # a pass: first batch compiles
        with clock.timed("judge", items=8):
            session.pass_batches().extend([(4, 3.0), (4, 1.0), (4, 1.0)])
    judge, evaluation = clock.rehearsal.events
    assert (judge["what"], judge["compile_seconds"]) == ("judge", 2.0)
    assert (evaluation["what"], evaluation["compile_seconds"]) == ("evaluation", 6.0)  # 4 + 2
    with clock.timed("export"):
        pass
    assert clock.rehearsal.events[-1]["compile_seconds"] == 0.0  # earlier passes are not its own
