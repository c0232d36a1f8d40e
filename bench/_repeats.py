"""Decide a benchmark on repeats: run the compared variants interleaved, several rounds, and judge
the median of the per-round ratios by an interval, not one ratio that noise can flip.

- :func:`interleaved`: ``repeats`` rounds; round ``r`` runs the variants in their order rotated by
  ``r``, so a machine that slows down or warms up during the run shifts every variant alike;
- :func:`decide`: per-round ratios ``variant / baseline``, their median, a distribution-free
  interval for the median (order statistics; its coverage, from the binomial distribution, is
  reported: 94% with 5 rounds, 98% with 7), and a verdict against the target: ``met`` (the whole
  interval on the good side), ``missed`` (the whole interval on the bad side) or ``undecided``;
- :data:`EXIT`: the exit code for each verdict (0 met, 1 missed, 2 undecided).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

EXIT = {"met": 0, "missed": 1, "undecided": 2}


def order(variants: Sequence[str], round_: int) -> list[str]:
    """The variants in the order round ``round_`` runs them.

    >>> [order("abc", r) for r in range(4)]
    [['a', 'b', 'c'], ['b', 'c', 'a'], ['c', 'a', 'b'], ['a', 'b', 'c']]
    """
    k = round_ % len(variants)
    return list(variants[k:]) + list(variants[:k])


def interleaved(
    variants: Sequence[str], repeats: int, run: Callable[[str, int], float]
) -> dict[str, list[float]]:
    """``{variant: [measurement of round 0, 1, ...]}``, calling ``run(variant, round)`` in the
    interleaved order of :func:`order`."""
    out: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(repeats):
        for v in order(variants, r):
            out[v].append(run(v, r))
    return out


def median_interval(values: Sequence[float], coverage: float = 0.9) -> tuple[float, float, float]:
    """(low, high, achieved coverage): the narrowest order-statistic interval
    ``[x_(k), x_(n+1-k)]`` that holds the median with at least ``coverage`` (or, with too few
    values, the whole range and the coverage it has).

    >>> median_interval([1.0, 5.0, 2.0, 4.0, 3.0])
    (1.0, 5.0, 0.9375)
    >>> low, high, cov = median_interval(list(range(1, 12)))
    >>> (low, high, round(cov, 3))
    (3, 9, 0.935)
    """
    xs, n = sorted(values), len(values)
    best = (xs[0], xs[-1], 1 - 2 * 0.5**n)
    for k in range(1, n // 2 + 1):
        # P(x_(k) <= median <= x_(n+1-k)) = 1 - 2 P(Binomial(n, 1/2) <= k - 1)
        cov = 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n
        if cov < coverage:
            break
        best = (xs[k - 1], xs[n - k], cov)
    return best


def decide(
    measured: Sequence[float],
    baseline: Sequence[float],
    *,
    target: float,
    lower_is_better: bool = True,
    coverage: float = 0.9,
) -> dict[str, Any]:
    """Per-round ratios ``measured / baseline``, their median and interval, and the verdict
    against ``target`` (a ratio at most ``target`` is good when ``lower_is_better``).

    >>> d = decide([1.00, 1.02, 0.99, 1.01, 1.00], [1.0] * 5, target=1.05)
    >>> d["verdict"], round(d["median"], 3)
    ('met', 1.0)
    >>> decide([1.00, 1.10, 0.98, 1.07, 1.03], [1.0] * 5, target=1.05)["verdict"]
    'undecided'
    >>> decide([1.2, 1.3, 1.1, 1.25, 1.15], [1.0] * 5, target=1.05)["verdict"]
    'missed'
    """
    if len(measured) != len(baseline) or not measured:
        raise ValueError(f"need one baseline per round: {len(measured)} vs {len(baseline)}")
    ratios = [m / b for m, b in zip(measured, baseline, strict=True)]
    low, high, cov = median_interval(ratios, coverage)
    good = (lambda x: x <= target) if lower_is_better else (lambda x: x >= target)
    verdict = (
        "met"
        if good(low) and good(high)
        else "missed"
        if not (good(low) or good(high))
        else "undecided"
    )
    return {
        "ratios": ratios,
        "median": statistics.median(ratios),
        "interval": [low, high],
        "coverage": cov,
        "target": target,
        "lower_is_better": lower_is_better,
        "verdict": verdict,
    }


def describe(name: str, d: dict[str, Any]) -> str:
    """One line: the median, its interval and coverage, the target and the verdict."""
    side = "<=" if d["lower_is_better"] else ">="
    rounds = ", ".join(f"{r:.3f}" for r in d["ratios"])
    return (
        f"{name}: median {d['median']:.3f} ({d['interval'][0]:.3f}-{d['interval'][1]:.3f}, "
        f"{d['coverage']:.0%} interval over {len(d['ratios'])} rounds: {rounds}); target "
        f"{side} {d['target']}: {d['verdict'].upper()}"
    )
