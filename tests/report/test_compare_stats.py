"""The paired t-interval used by launcher.compare."""
import math
from statistics import mean, stdev

import pytest

from launcher.stats.paired import paired_interval, t_critical


def test_t_critical_table():
    assert t_critical(1) == 12.706
    assert t_critical(3) == 3.182
    assert t_critical(30) == 2.042
    assert t_critical(35) == 2.042          # between entries: the smaller df, conservative
    assert t_critical(10**6) == 1.962
    with pytest.raises(ValueError):
        t_critical(0)


def test_paired_interval_matches_the_formula():
    a = [2.0, 2.5, 1.5, 3.0, 2.2]
    b = [1.8, 2.1, 1.5, 2.6, 2.0]
    p = paired_interval(a, b)
    d = [y - x for x, y in zip(a, b)]
    half = 2.776 * stdev(d) / math.sqrt(5)
    assert p.n == 5 and p.mean_a == pytest.approx(mean(a))
    assert p.mean_diff == pytest.approx(mean(d))
    assert (p.lo, p.hi) == (pytest.approx(mean(d) - half), pytest.approx(mean(d) + half))
    assert p.excludes_zero


def test_identical_and_degenerate_samples():
    same = paired_interval([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert same.mean_diff == 0 and not same.excludes_zero
    one = paired_interval([2.0], [1.0])
    assert one.n == 1 and not one.has_interval and not one.excludes_zero
    assert paired_interval([], []) is None
    with pytest.raises(ValueError):
        paired_interval([1.0], [])
