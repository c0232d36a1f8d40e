"""The judges' check cell of notebooks 02 and 06, run as it is written, on the judged model.

The cell loads ``OUTPUT_DIR/ckpts/actor/<step>/model_params`` (:func:`checkpoints.write_judged`)
with tunix's own classes and Orbax alone (what the competition's judges run), so it cannot call
tunixkit: here it runs with ``import tunixkit`` made impossible, from the notebook's own source, so
the code a user copies into a submission is the code that was tested, for both families the
competition allows. Notebook 06's own judged model is checked by its full-profile test.
"""

import json
import pathlib
import sys
import types

import numpy as np
import pytest

from tunixkit import checkpoints, models, testing

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"


def judges_cell(notebook: str) -> str:
    """The source of ``notebook``'s judges' check code cell."""
    cells = (NOTEBOOKS / notebook).read_text(encoding="utf-8").split("# %%")
    start = next(i for i, c in enumerate(cells) if "## The judges' check" in c)
    return cells[start + 1]


def run_judges_cell(out_dir: pathlib.Path, system_prompt: str | None = None) -> dict:
    """Execute the judges' cell on ``out_dir`` with tunixkit unimportable; returns its variables."""
    source = judges_cell("02_grpo_gsm8k.py")
    recipe = types.SimpleNamespace(eval=types.SimpleNamespace(system_prompt=system_prompt))
    scope = {"out_dir": out_dir, "judged_root": out_dir, "recipe": recipe}
    saved = {k: v for k, v in sys.modules.items() if k == "tunixkit" or k.startswith("tunixkit.")}
    sys.modules.update({k: None for k in saved})  # `import tunixkit...` raises ImportError
    try:
        exec(compile(source, "judges_cell", "exec"), scope)
    finally:
        sys.modules.update(saved)
    return scope


def test_02_and_06_have_the_same_judges_cell_without_tunixkit():
    source = judges_cell("02_grpo_gsm8k.py")
    assert source == judges_cell("06_multidomain_pipeline.py")
    assert "tunixkit" not in source, "the judges' cell must not use tunixkit"


@pytest.mark.parametrize("model_id", ["tiny-gemma3", "tiny-gemma2"])
def test_the_judges_cell_loads_the_judged_model_with_tunix_alone(tmp_path, model_id):
    base = models.load_model(model_id, verbose=False)
    testing.randomize_all(base.model, seed=3)
    exports = models.export(base.model, base, tmp_path / "export")
    checkpoints.write_judged(exports["orbax"], tmp_path, step=5)
    judged = checkpoints.write_judged(exports["orbax"], tmp_path, step=12)  # a later one
    assert judged == tmp_path / "ckpts" / "actor" / "12" / "model_params"
    assert [p.name for p in (tmp_path / "ckpts" / "actor").iterdir()] == ["12"]
    scope = run_judges_cell(tmp_path, system_prompt="Answer in <reasoning>/<answer> form.")
    assert scope["judged_folder"].name == "12"
    judged, _ = scope["load_judged"](scope["judged_folder"])
    np.testing.assert_allclose(testing.logits(judged), testing.logits(base.model), atol=1e-5)
    rows = [json.loads(line) for line in (tmp_path / "judges_check.jsonl").read_text().splitlines()]
    assert rows == scope["judged_answers"]
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
    """01-03 end with the better model: the trained export stays judged unless it got fewer
    questions right than the start model with McNemar p < 0.05; then the start model, exported
    once, is written as the judged model at the same step, and the reason is printed."""
    from tunixkit import evaluation, pipeline

    start = models.load_model("tiny-gemma3", verbose=False)
    trained = models.load_model("tiny-gemma3", verbose=False)
    testing.randomize_all(trained.model, seed=5)
    trained_judged = checkpoints.write_judged(
        models.export(trained.model, trained, tmp_path / "export")["orbax"], tmp_path, step=8
    )
    row = {"question": "q", "category": "correct", "partial": True, "format": True}
    right = [dict(row, question=f"q{i}", num_tokens=9) for i in range(12)]
    wrong = [dict(r, category="wrong_number", partial=False) for r in right]
    before = evaluation.result_from("before", right)
    kw = dict(judged=trained_judged, start=start, out_dir=tmp_path, judged_dir=tmp_path, step=8)
    # a few questions lost: could be chance, the trained model stays
    kept = pipeline.keep_better(
        before, evaluation.result_from("after", wrong[:3] + right[3:]), **kw
    )
    assert kept.adopted and kept.judged == trained_judged and "McNemar p = 0.25" in kept.why
    assert not (tmp_path / "start").exists()
    # every question lost: the start model is judged again, where the trained one was
    lost = pipeline.keep_better(before, evaluation.result_from("after", wrong), **kw)
    assert not lost.adopted and lost.judged == trained_judged
    assert "NOT adopted" in capsys.readouterr().out
    from tunixkit import runlog

    probe = models.load_model("tiny-gemma3", verbose=False)
    testing.randomize_all(probe.model, seed=9)  # neither start's weights nor trained's
    checkpoints.restore_state(probe.model, lost.judged)
    digest = runlog.digest(probe.model, trainable_only=False)
    assert digest == runlog.digest(start.model, trainable_only=False)
    assert digest != runlog.digest(trained.model, trainable_only=False)
