"""Every notebook, run as it ships (its parameters cell untouched) on the smoke profile, asserts its
learning checks: its setup cell's recipe is the smoke preset itself, so ``Checks.for_run`` enforces.
A knob whose default differed from the preset would otherwise turn nbval's learning checks into
warnings without anyone noticing."""

import json
import os
import pathlib
import re

import papermill.inspection
import pytest

from tunixkit import evaluation, recipes
from tunixkit.recipes._base import SESSION_PARAMETERS

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
            if "recipes.start_notebook(" in cell:
                break
        else:
            pytest.fail(f"{name} has no setup cell calling recipes.start_notebook")
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


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_parameter_reaches_the_recipe_or_a_later_cell(name):
    """``recipes.start_notebook(preset, globals())`` reads the parameters its preset names
    (``PARAMETERS``) and the session's: each of them is in the parameters cell, and every other
    parameter is used by a later cell (none is dead)."""
    cells = _cells(ROOT / "notebooks" / name)
    (i, cell) = next((i, c) for i, (h, c) in enumerate(cells) if '"parameters"' in h)
    names = [
        n.strip()
        for line in cell.splitlines()
        if re.match(r"^[A-Z_0-9, ]+ =", line)
        for n in line.split(" =")[0].split(",")
    ]
    later = "\n".join(c for h, c in cells[i + 1 :] if "[markdown]" not in h)
    setup = re.search(r"recipes\.start_notebook\(recipes\.(\w+), globals\(\)\)", later)
    assert setup, f"{name}: no setup cell calling recipes.start_notebook(recipes.X, globals())"
    preset = getattr(recipes, setup.group(1))
    assert set(preset.PARAMETERS) - set(names) == set(), "PARAMETERS names a parameter not here"
    assert {"PROFILE", "OUTPUT_DIR"} <= set(names)
    mapped = set(preset.PARAMETERS) | set(SESSION_PARAMETERS)
    dead = [n for n in names if n not in mapped and not re.search(rf"\b{n}\b", later)]
    assert dead == []


def test_a_parameter_sets_each_field_it_names_and_inputs_are_recorded(tmp_path):
    cell = {
        "PROFILE": "smoke",
        "OUTPUT_DIR": str(tmp_path),
        "GENERATION_STEPS": 33,  # three fields
        "SFT_STEPS": "7",  # papermill's YAML may give a string
        "TRACE_FIELDS": ("q", "a"),
        "RECIPE_OVERRIDES": {"batch_size": 3},
        "UNRELATED": 1,  # not a parameter of the preset: not read
    }
    recipe = recipes.start_notebook(recipes.Pipeline, cell, verbose=False).recipe
    assert (recipe.eval.max_generation_steps, recipe.grpo.max_generation_steps) == (33, 33)
    assert recipe.max_response_length == 33 and recipe.sft_steps == 7 and recipe.batch_size == 3
    assert recipe.lora_rank == recipes.Pipeline.smoke().lora_rank  # absent: the preset's
    record = json.loads((tmp_path / "recipe.json").read_text())
    assert record["inputs"] == {"trace_fields": ["q", "a"]}
    with pytest.raises(KeyError, match="OUTPUT_DIR"):
        recipes.start_notebook(recipes.Pipeline, {"PROFILE": "smoke"}, verbose=False)
