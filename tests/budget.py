"""Gate 6 of ``scripts/test.sh``: reads the JUnit reports gates 4 and 5 wrote
(``$TUNIXKIT_CI_REPORTS``), prints the run's ten slowest items and fails when one test took longer
than its budget. Run only explicitly (``pytest tests/budget.py``), after those gates."""

import os
import pathlib
import xml.etree.ElementTree as ET

import pytest

BUDGET_SHARE = 0.15  # no single test or notebook cell may take more than this share of the run
# The budget is a share of the run's own summed item time, not seconds: CI's machines differ up to
# 3x in pace (02's GRPO cell took 197 s on a fast 2-core AMD EPYC, 2026-11-27, cold caches, and
# 597 s on a slower one, 2026-11-26, where it failed the 500 s budget of the time). Shares measured:
# the largest item 8.2% of 2,647 s (06's full-profile rehearsal, fast machine); 02's GRPO cell about
# 12.5% on the slow one (597 s of about 4,700). An item that needs more gets its own cap here (a
# share), with why.
OVER_BUDGET: dict[str, float] = {}
REPORTS = ("unit.xml", "notebooks.xml")  # the shares are of a whole run: both streams


def read_times(folder: pathlib.Path) -> list[tuple[float, str]]:
    """(seconds, name) of every test case in the JUnit reports in ``folder``, slowest first."""
    out = []
    for report in sorted(folder.glob("*.xml")):
        for case in ET.parse(report).getroot().iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            out.append((float(case.get("time", 0.0)), name))
    return sorted(out, reverse=True)


def over_budget(
    times: list[tuple[float, str]],
    share: float = BUDGET_SHARE,
    caps: dict[str, float] | None = None,
) -> list[str]:
    """The items of ``times`` that took a larger share of all of ``times`` than their cap
    (``caps``, default :data:`OVER_BUDGET`) or, without one, than ``share``.

    >>> times = [(30.0, "a"), (50.0, "b"), (20.0, "c")]
    >>> over_budget(times, share=0.25, caps={"b": 0.5})
    ['a: 30 s, 30% of 100 s > 25%']
    >>> over_budget(times, share=0.25, caps={"b": 0.4})
    ['b: 50 s, 50% of 100 s > 40%', 'a: 30 s, 30% of 100 s > 25%']
    """
    caps = OVER_BUDGET if caps is None else caps
    total = sum(t for t, _ in times)
    return [
        f"{name}: {t:.0f} s, {t / total:.0%} of {total:.0f} s > {caps.get(name, share):.0%}"
        for t, name in sorted(times, reverse=True)
        if t > caps.get(name, share) * total
    ]


def test_no_test_over_its_budget():
    folder = pathlib.Path(os.environ.get("TUNIXKIT_CI_REPORTS", ".ci-reports"))
    missing = [r for r in REPORTS if not (folder / r).is_file()]
    if missing:
        pytest.fail(f"no {', '.join(missing)} in {folder}: run scripts/test.sh (both streams)")
    times = read_times(folder)
    total = sum(t for t, _ in times)
    print(f"\nthe ten slowest of {len(times)} items ({total:.0f} s in all):")
    for t, name in times[:10]:
        print(f"  {t:7.1f} s  {t / total:4.0%}  {name}")
    assert not over_budget(times), over_budget(times)


def test_every_full_profile_case_ran_once():
    """Every case of tests/test_full_profile.py ran, once (scripts/test.sh runs most in the unit
    tests' stream, 06's in the notebooks'; a deselected or doubled case fails here)."""
    import test_full_profile as full

    folder = pathlib.Path(os.environ.get("TUNIXKIT_CI_REPORTS", ".ci-reports"))
    ran = [n for _, n in read_times(folder) if n.startswith("tests.test_full_profile::")]
    expected = [
        f"tests.test_full_profile::{test.__name__}[{name}]"
        for test, cases in (
            (full.test_full_profile_runs_end_to_end_on_a_tiny_model, full.CASES),
            (full.test_rehearsal_times_every_stage_then_stops_before_the_long_run, full.REHEARSALS),
        )
        for name in cases
    ]
    assert sorted(ran) == sorted(expected), (sorted(ran), sorted(expected))


def test_nbval_ran_every_cell_of_every_notebook():
    """Gate 5 ran every code cell of every ``notebooks/NN_*.ipynb``, none skipped: a renamed,
    deselected or uncollected notebook (its checks silently gone) fails here."""
    import json

    root = pathlib.Path(__file__).resolve().parents[1]
    folder = pathlib.Path(os.environ.get("TUNIXKIT_CI_REPORTS", ".ci-reports"))
    report = folder / "notebooks.xml"
    if not report.is_file():
        pytest.fail(f"no {report}: run scripts/test.sh (both streams)")
    ran: dict[str, int] = {}
    skipped = []
    for case in ET.parse(report).getroot().iter("testcase"):
        if not case.get("classname", "").startswith("notebooks."):
            continue  # a test the stream also runs (06's full profile on the default mix)
        name = case.get("classname", "").removeprefix("notebooks.")
        ran[name] = ran.get(name, 0) + 1
        if case.find("skipped") is not None:
            skipped.append(f"{name}::{case.get('name')}")
    expected = {}
    for nb in sorted((root / "notebooks").glob("[0-9]*.ipynb")):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        expected[nb.name] = sum(c["cell_type"] == "code" for c in cells)
    assert ran == expected, f"cells run per notebook {ran}, code cells {expected}"
    assert skipped == [], skipped
