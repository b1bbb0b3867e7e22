"""Paired mean difference with a Student-t 95% interval, without scipy."""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import mean, stdev

from launcher.stats.repeats import Interval, t_critical


@dataclass
class Paired(Interval):
    """B minus A over the n paired values."""
    n: int
    mean_a: float
    mean_diff: float
    lo: float | None      # 95% interval of the mean difference (None when n < 2)
    hi: float | None


def paired_interval(a: list[float], b: list[float]) -> Paired | None:
    """Mean of b[i] - a[i] and its t interval; None when there is nothing to pair."""
    if len(a) != len(b):
        raise ValueError("paired samples must have the same length")
    if not a:
        return None
    diffs = [y - x for x, y in zip(a, b)]
    m = mean(diffs)
    if len(diffs) < 2:
        return Paired(1, a[0], m, None, None)
    half = t_critical(len(diffs) - 1) * stdev(diffs) / math.sqrt(len(diffs))
    return Paired(len(diffs), mean(a), m, m - half, m + half)
