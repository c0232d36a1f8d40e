"""Every notebook, run as it ships (its parameters cell untouched) on the smoke profile, asserts its
learning checks: its setup cell's recipe is the smoke preset itself, so ``Checks.for_run`` enforces.
A knob whose default differed from the preset would otherwise turn nbval's learning checks into
warnings without anyone noticing."""

import os
import pathlib

import papermill.inspection
import pytest

from tunixkit import evaluation

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("0*.py"))


def _cells(path: pathlib.Path) -> list[tuple[str, str]]:
    """(the ``# %%`` line's rest, the cell's source) of each py:percent cell."""
    return [tuple(c.partition("\n")[::2]) for c in path.read_text().split("\n# %%")[1:]]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_shipped_parameters_give_the_smoke_preset(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # OUTPUT_DIR's default is relative
    monkeypatch.setenv("TUNIXKIT_PROFILE", "smoke")
    scope: dict = {}
    environ = dict(os.environ)  # the cells set the session's start time: not for later tests
    try:
        for header, cell in _cells(ROOT / "notebooks" / name):
            if "[markdown]" in header:
                continue
            exec(compile(cell, name, "exec"), scope)  # the install, parameters and setup cells
            if "recipes.start(" in cell:
                break
        else:
            pytest.fail(f"{name} has no setup cell calling recipes.start")
    finally:
        os.environ.clear()
        os.environ.update(environ)
    assert scope["rt"].smoke and scope["recipe"] == type(scope["recipe"]).smoke()
    assert evaluation.Checks.for_run(scope["rt"], scope["recipe"]).enforce


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_papermill_reads_every_parameter(name, caplog):
    """``papermill --help-notebook`` and its parameter checks read each parameter's name, type and
    comment; a line it cannot parse (an ``=`` in the comment) is left out of them, with a warning."""
    notebook = ROOT / "notebooks" / name.replace(".py", ".ipynb")
    with caplog.at_level("WARNING"):
        found = papermill.inspection.inspect_notebook(str(notebook))
    assert "Unable to parse" not in caplog.text, caplog.text
    assert found and "PROFILE" in found
