"""The answer-checking corpus: well formed, tunixkit agrees with the human verdicts, and the committed
comparison table (docs/answer_checking.md) is what scripts/compare_checkers.py produces today."""

import importlib.util
import json
import pathlib

import pytest

from tunixkit.answers import is_correct

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "answer_corpus.jsonl"
LATEX_CORPUS = ROOT / "tests" / "data" / "latex_corpus.jsonl"


def rows(path=CORPUS):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_corpus_is_well_formed():
    data = rows()
    assert len(data) >= 100
    assert len({r["id"] for r in data}) == len(data)
    for r in data:
        assert set(r) == {"id", "completion", "gold", "correct", "case"}, r
        assert isinstance(r["correct"], bool) and r["case"], r
    assert (
        0.15 < sum(not r["correct"] for r in data) / len(data) < 0.5
    )  # both verdicts well represented


def test_tunixkit_agrees_with_human_verdicts():
    data = rows()
    agree = sum(is_correct(r["completion"], r["gold"]) == r["correct"] for r in data)
    assert agree / len(data) >= 0.92, f"tunixkit agrees on only {agree}/{len(data)}"
    false_accepts = [r["id"] for r in data if is_correct(r["completion"], r["gold"]) > r["correct"]]
    assert not false_accepts, f"tunixkit accepts what the human rejects: ids {false_accepts}"


def test_latex_checker_never_accepts_what_the_human_rejects():
    """MATH-style answers: no false accept on the LaTeX corpus (its hedges and ranges are the
    cases math-verify alone accepts), and a known false reject at most per 20 rows."""
    from tunixkit.answers import latex_correct

    data = rows(LATEX_CORPUS)
    assert len({r["id"] for r in data}) == len(data) >= 40
    said = {r["id"]: latex_correct(r["completion"], r["gold"]) for r in data}
    assert not [r["id"] for r in data if said[r["id"]] and not r["correct"]]
    assert sum(r["correct"] and not said[r["id"]] for r in data) <= len(data) / 20


@pytest.mark.skipif(
    importlib.util.find_spec("math_verify") is None or importlib.util.find_spec("lm_eval") is None,
    reason="math-verify / lm-eval are test extras (setup_notebook_tpu_single_host.sh --test installs them)",
)
def test_committed_comparison_table_is_current():
    spec = importlib.util.spec_from_file_location(
        "compare_checkers", ROOT / "scripts" / "compare_checkers.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = (ROOT / "docs" / "answer_checking.md").read_text(encoding="utf-8")
    assert module.render() == committed, "rerun: .venv/bin/python scripts/compare_checkers.py"
