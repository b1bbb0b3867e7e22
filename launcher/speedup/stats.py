"""Paired mean difference with a Student-t 95% interval, without scipy."""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import mean, stdev

# Two-sided 95% critical values of Student's t (the 0.975 quantile) by degrees
# of freedom. Between tabulated values the next smaller df is used, which gives
# a slightly larger (conservative) value.
T975 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
    10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
    18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
    26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042, 40: 2.021, 50: 2.009, 60: 2.000,
    80: 1.990, 100: 1.984, 120: 1.980, 200: 1.972, 500: 1.965, 1000: 1.962,
}


def t_critical(df: int) -> float:
    if df < 1:
        raise ValueError("degrees of freedom must be >= 1")
    return T975[max(k for k in T975 if k <= df)]


@dataclass
class Paired:
    """B minus A over the n paired values."""
    n: int
    mean_a: float
    mean_diff: float
    lo: float | None      # 95% interval of the mean difference (None when n < 2)
    hi: float | None

    @property
    def has_interval(self) -> bool:
        return self.lo is not None

    @property
    def excludes_zero(self) -> bool:
        return self.has_interval and (self.lo > 0 or self.hi < 0)


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
