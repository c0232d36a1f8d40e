"""The judges' check (``tunixkit/tools/judges_check.py``, run by notebooks 02 and 06) on the
judged model.

The check loads ``OUTPUT_DIR/ckpts/actor/<step>/model_params`` (:func:`checkpoints.write_judged`)
with tunix's own classes and Orbax alone (what the competition's judges run), so it cannot call
tunixkit: here its file runs with ``import tunixkit`` made impossible, from its own source, so the
code a user copies into a submission is the code that was tested, for both families the
competition allows. Notebook 06's own judged model is checked by its full-profile test.
"""

import ast
import json
import pathlib
import sys

import numpy as np
import pytest

from tunixkit import checkpoints, models, testing
from tunixkit.tools import judges_check

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def run_judges_check(root: pathlib.Path, argv: list[str]) -> dict:
    """Run the check's file as a script (``python judges_check.py ARGV``) with tunixkit
    unimportable; returns its module's variables."""
    source = pathlib.Path(judges_check.__file__).read_text(encoding="utf-8")
    scope = {"__name__": "judges_check_copy"}  # as a copied file: its functions, not its main
    saved = {k: v for k, v in sys.modules.items() if k == "tunixkit" or k.startswith("tunixkit.")}
    sys.modules.update({k: None for k in saved})  # `import tunixkit...` raises ImportError
    try:
        exec(compile(source, "judges_check.py", "exec"), scope)
        assert scope["main"]([str(root), *argv]) == 0
    finally:
        sys.modules.update(saved)
    return scope


def test_the_check_imports_no_tunixkit_and_02_and_06_run_it():
    source = pathlib.Path(judges_check.__file__).read_text(encoding="utf-8")
    imported = [
        a.name if isinstance(n, ast.Import) else n.module
        for n in ast.walk(ast.parse(source))
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    ]
    assert [m for m in imported if m.split(".")[0] == "tunixkit"] == []
    calls = {  # with the prompt the notebook asked its questions with (02: its data set's)
        "02_grpo_gsm8k.py": "judges_check.check(judged_root, eval_config.system_prompt)",
        "06_multidomain_pipeline.py": "judges_check.check(clock.judged_dir(), recipe.eval.system_prompt)",
    }
    for notebook, call in calls.items():
        assert call in (NOTEBOOKS / notebook).read_text(encoding="utf-8"), notebook


@pytest.mark.parametrize("model_id", ["tiny-gemma3", "tiny-gemma2"])
def test_the_judges_check_loads_the_judged_model_with_tunix_alone(tmp_path, model_id, capsys):
    base = models.load_model(model_id, verbose=False)
    testing.randomize_all(base.model, seed=3)
    exports = models.export(base.model, base, tmp_path / "export")
    checkpoints.write_judged(exports["orbax"], tmp_path, step=5)
    judged = checkpoints.write_judged(exports["orbax"], tmp_path, step=12)  # a later one
    assert judged == tmp_path / "ckpts" / "actor" / "12" / "model_params"
    assert [p.name for p in (tmp_path / "ckpts" / "actor").iterdir()] == ["12"]
    scope = run_judges_check(tmp_path, ["--system-prompt", "Answer in <reasoning>/<answer> form."])
    assert f"the judged model: {judged.resolve()}" in capsys.readouterr().out  # the later one
    judged, _ = scope["load_judged"](judged.parent)
    np.testing.assert_allclose(testing.logits(judged), testing.logits(base.model), atol=1e-5)
    rows = [json.loads(line) for line in (tmp_path / "judges_check.jsonl").read_text().splitlines()]
    # asked with the system prompt, then without one (the judges' own prompt may not carry it)
    domains = [domain for domain, _ in scope["JUDGED_PROMPTS"]]
    assert [(r["domain"], r["system_prompt"]) for r in rows] == [(d, True) for d in domains] + [
        (d, False) for d in domains
    ]
    assert {"creative writing", "summarization", "science", "math", "code"} <= {
        r["domain"] for r in rows
    }
    for r in rows:  # a random model rambles in no format, within the judges' 768 steps
        assert isinstance(r["answer"], str) and 0 < r["tokens"] <= 768
        assert r["format"] is False
    # 02's and 06's check: every judged prompt answered (a random model's blank lines are not)
    answered = [dict(r, answer="<reasoning>r</reasoning><answer>a</answer>") for r in rows]
    assert scope["answered"](answered) and not scope["answered"](answered[1:])
    assert not scope["answered"](rows) or all(r["answer"].strip() for r in rows)


def test_a_rerun_of_the_same_step_replaces_it_and_an_export_is_required(tmp_path):
    base = models.load_model("tiny-gemma3", verbose=False)
    exports = models.export(base.model, base, tmp_path / "export")
    first = checkpoints.write_judged(exports["orbax"], tmp_path, step=3)
    again = checkpoints.write_judged(exports["orbax"], tmp_path, step=3)
    assert first == again and again.is_dir()
    assert sorted(p.name for p in again.parent.parent.iterdir()) == ["3"]
    with pytest.raises(FileNotFoundError, match="no params"):
        checkpoints.write_judged(tmp_path / "export", tmp_path, step=4)


def test_a_continuing_session_keeps_the_judged_model_until_it_writes_its_own(tmp_path):
    """On Kaggle the judged model lies in /kaggle/working/ckpts, beside OUTPUT_DIR; the next
    session reads the earlier one's output under /kaggle/input/<notebook>/ and starts with an
    empty /kaggle/working. Until it finishes a stage of its own, the earlier judged model is
    copied to where the template looks; a session that has one keeps it."""
    earlier = tmp_path / "input" / "notebook"
    judged = earlier / "ckpts" / "actor" / "7" / "model_params"
    judged.mkdir(parents=True)
    (judged / "params").write_bytes(b"weights")
    (earlier / "ckpts" / "actor" / "3").mkdir()  # an older step: not the one taken
    working = tmp_path / "working"
    copied = checkpoints.carry_judged(earlier / "runs" / "06", working / "runs" / "06", working)
    assert copied == working / "ckpts" / "actor" / "7" / "model_params"
    assert (copied / "params").read_bytes() == b"weights"
    (copied / "params").write_bytes(b"newer")  # this session's own, from now on
    checkpoints.carry_judged(earlier / "runs" / "06", working / "runs" / "06", working)
    assert (copied / "params").read_bytes() == b"newer"
    # elsewhere the judged model is inside OUTPUT_DIR, which RESUME_FROM carries already
    elsewhere = tmp_path / "elsewhere"
    assert checkpoints.carry_judged(tmp_path / "nothing", elsewhere, elsewhere) is None


def test_a_trained_model_worse_than_its_start_is_not_the_judged_one(tmp_path, capsys):
    """01-03 end with the better model: the trained export (``pipeline.export_judged``) stays
    judged unless it got fewer questions right than the start model with McNemar p < 0.05; then
    ``pipeline.finish`` writes the start model, exported once, as the judged model at the same
    step, prints the reason, and uploads the better model's Orbax export (not here: no handle)."""
    import time

    from tunixkit import evaluation, pipeline, session

    start = models.load_model("tiny-gemma3", verbose=False)
    trained = models.load_model("tiny-gemma3", verbose=False)
    testing.randomize_all(trained.model, seed=5)
    clock = session.Session(tmp_path, hours=None, started=time.time())
    export = pipeline.export_judged(trained.model, trained, clock, 8)
    trained_judged = tmp_path / "ckpts" / "actor" / "8" / "model_params"
    assert export.judged == trained_judged and (export.hf / "config.json").is_file()
    assert f"the judged model: {trained_judged}" in capsys.readouterr().out
    assert clock.timings["export"] > 0  # the session keeps the export's time in reserve
    row = {"question": "q", "category": "correct", "partial": True, "format": True}
    right = [dict(row, question=f"q{i}", num_tokens=9) for i in range(12)]
    wrong = [dict(r, category="wrong_number", partial=False) for r in right]
    before = evaluation.result_from("before", right)
    trained_orbax = tmp_path / "export" / "orbax"
    kw = dict(start=start, kaggle_model=None, notes="SFT, 8 steps")
    # a few questions lost: could be chance, the trained model stays
    after = evaluation.result_from("after", wrong[:3] + right[3:])
    kept = pipeline.finish(export, before, after, **kw)
    assert kept.adopted and kept.judged == trained_judged and "McNemar p = 0.25" in kept.why
    assert kept.orbax == trained_orbax  # what a Kaggle Model upload takes: the trained export
    assert kept.kaggle_model is None and "not uploaded" in capsys.readouterr().out
    assert not (tmp_path / "start").exists()
    # every question lost: the start model is judged again, where the trained one was
    lost = pipeline.finish(export, before, evaluation.result_from("after", wrong), **kw)
    assert not lost.adopted and lost.judged == trained_judged
    assert lost.orbax == tmp_path / "start" / "export" / "orbax"  # the start's, uploaded instead
    assert (lost.orbax / "params").is_dir()
    assert lost.report() == {"adopted": False, "why": lost.why, "judged": str(trained_judged)}
    assert "NOT adopted" in capsys.readouterr().out
    from tunixkit import runlog

    probe = models.load_model("tiny-gemma3", verbose=False)
    testing.randomize_all(probe.model, seed=9)  # neither start's weights nor trained's
    checkpoints.restore_state(probe.model, lost.judged)
    digest = runlog.digest(probe.model, trainable_only=False)
    assert digest == runlog.digest(start.model, trainable_only=False)
    assert digest != runlog.digest(trained.model, trainable_only=False)
