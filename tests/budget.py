"""Gate 6 of ``scripts/test.sh``: reads the JUnit reports gates 4 and 5 wrote
(``$TUNIXKIT_CI_REPORTS``), prints the run's ten slowest items and fails when one test took longer
than its budget. Run only explicitly (``pytest tests/budget.py``), after those gates."""

import os
import pathlib
import xml.etree.ElementTree as ET

import pytest

BUDGET_S = 600.0  # no single test or notebook may take longer than this in CI


def read_times(folder: pathlib.Path) -> list[tuple[float, str]]:
    """(seconds, name) of every test case in the JUnit reports in ``folder``, slowest first."""
    out = []
    for report in sorted(folder.glob("*.xml")):
        for case in ET.parse(report).getroot().iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            out.append((float(case.get("time", 0.0)), name))
    return sorted(out, reverse=True)


def over_budget(times: list[tuple[float, str]], budget: float = BUDGET_S) -> list[str]:
    """The items of ``times`` that took longer than ``budget`` seconds.

    >>> over_budget([(601.0, "a"), (20.0, "b")])
    ['a: 601 s > 600 s']
    """
    return [f"{name}: {t:.0f} s > {budget:.0f} s" for t, name in times if t > budget]


def test_no_test_over_its_budget():
    folder = pathlib.Path(os.environ.get("TUNIXKIT_CI_REPORTS", ".ci-reports"))
    times = read_times(folder)
    if not times:
        pytest.fail(f"no JUnit report with test cases in {folder} (run scripts/test.sh)")
    print(f"\nthe ten slowest of {len(times)} items ({sum(t for t, _ in times):.0f} s in all):")
    for t, name in times[:10]:
        print(f"  {t:7.1f} s  {name}")
    assert not over_budget(times), over_budget(times)
