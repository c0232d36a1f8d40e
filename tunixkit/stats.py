"""Statistics, in one place: the intervals and tests every evaluation reports.

- :func:`wilson_interval`: a 95% interval for a rate (GSM8K accuracy, notebooks 00-05);
- :func:`mcnemar_p`: McNemar's exact test for two models on the same questions;
- :func:`clustered_mean_interval`: a 95% interval for a mean score whose values come in clusters
  (the judged scores of notebook 06, and their paired changes between stages).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["clustered_mean_interval", "wilson_interval"]


def wilson_interval(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval for k successes in n trials.

    >>> [round(x, 3) for x in wilson_interval(50, 100)]
    [0.404, 0.596]
    """
    if n == 0:
        return (0.0, 0.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def mcnemar_p(only_a: int, only_b: int) -> float:
    """Two-sided p-value of McNemar's exact test: ``only_a`` questions only the first model got
    right, ``only_b`` only the second; small means the difference is unlikely to be chance.

    >>> round(mcnemar_p(0, 10), 4), mcnemar_p(0, 0)
    (0.002, 1.0)
    """
    n, k = only_a + only_b, min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n if n else 1.0
    return min(1.0, 2 * tail)


def clustered_mean_interval(
    clusters: Sequence[str], values: Sequence[float]
) -> tuple[float, float, int]:
    """(mean of ``values``, half-width of its 95% interval, distinct clusters). Values of one
    cluster are one draw, not several (greedy answers to a repeated prompt: a held-out set may
    repeat a prompt), so the interval is cluster-robust over the distinct clusters, with
    Student's t for their number (NaN for one). The judged scores of notebook 06 use it.

    >>> [round(x, 3) for x in clustered_mean_interval(["a", "b", "c", "d"], [0, 1, 0, 1])]
    [0.5, 0.919, 4]
    >>> [round(x, 3) for x in clustered_mean_interval(["a"] * 10 + ["b"] * 10, [0] * 10 + [1] * 10)]
    [0.5, 6.353, 2]
    >>> clustered_mean_interval(["a", "a"], [0.2, 0.4])[1]
    nan
    """
    from scipy import stats as scipy_stats

    mean = sum(values) / len(values)
    by_prompt: dict[str, float] = {}
    for p, x in zip(clusters, values, strict=True):
        by_prompt[p] = by_prompt.get(p, 0.0) + x - mean
    c = len(by_prompt)
    if c < 2:
        return mean, math.nan, c
    se = math.sqrt(sum(v * v for v in by_prompt.values()) * c / (c - 1)) / len(values)
    return mean, float(scipy_stats.t.ppf(0.975, c - 1)) * se, c
