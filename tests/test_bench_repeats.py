"""bench/_repeats.py: interleaved rounds, the median ratio's interval, and a verdict that uses it."""

import importlib.util
import pathlib

import pytest

path = pathlib.Path(__file__).resolve().parents[1] / "bench" / "_repeats.py"
spec = importlib.util.spec_from_file_location("_repeats", path)
repeats = importlib.util.module_from_spec(spec)
spec.loader.exec_module(repeats)


def test_rounds_interleave_and_rotate_the_variants():
    calls = []
    out = repeats.interleaved(
        ["plain", "ours", "upstream"], 3, lambda v, r: calls.append((r, v)) or r
    )
    assert calls == [
        (0, "plain"),
        (0, "ours"),
        (0, "upstream"),
        (1, "ours"),
        (1, "upstream"),
        (1, "plain"),
        (2, "upstream"),
        (2, "plain"),
        (2, "ours"),
    ]
    assert out == {"plain": [0, 1, 2], "ours": [0, 1, 2], "upstream": [0, 1, 2]}


def test_the_verdict_uses_the_interval_not_one_ratio():
    base = [2.0, 1.0, 4.0, 2.0, 1.0]  # the machine's pace varies by round; ratios are per round
    # the committed run (1.042) and a loaded machine's (1.071) are both in this noisy series
    noisy = repeats.decide(
        [b * x for b, x in zip(base, (1.042, 1.071, 0.99, 1.03, 1.06), strict=True)],
        base,
        target=1.05,
    )
    assert noisy["verdict"] == "undecided" and noisy["median"] == pytest.approx(1.042)
    assert noisy["interval"] == pytest.approx([0.99, 1.071]) and noisy["coverage"] == pytest.approx(
        0.9375
    )
    steady = repeats.decide([b * 1.01 for b in base], base, target=1.05)
    assert steady["verdict"] == "met" and steady["interval"] == pytest.approx([1.01, 1.01])
    slow = repeats.decide(
        [b * x for b, x in zip(base, (1.2, 1.1, 1.3, 1.06, 1.15), strict=True)], base, target=1.05
    )
    assert slow["verdict"] == "missed"
    faster = repeats.decide([3.0] * 3, [1.0] * 3, target=2.0, lower_is_better=False)
    assert faster["verdict"] == "met" and faster["coverage"] == pytest.approx(
        0.75
    )  # few rounds: said
    assert [repeats.EXIT[d["verdict"]] for d in (steady, slow, noisy)] == [0, 1, 2]
    with pytest.raises(ValueError, match="one baseline per round"):
        repeats.decide([1.0, 2.0], [1.0], target=1.0)


def test_the_interval_narrows_with_more_rounds_at_the_coverage_asked():
    values = list(range(1, 12))
    low, high, cov = repeats.median_interval(values, 0.9)
    assert (low, high) == (3, 9) and cov >= 0.9
    assert repeats.median_interval(values, 0.98)[:2] == (2, 10)
    assert "UNDECIDED" in repeats.describe("x", repeats.decide([1.0, 1.1], [1.0, 1.0], target=1.05))
