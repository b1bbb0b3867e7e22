"""launcher.results.repeats: the statistics of a few repeats, worked by hand."""
import math

import pytest

from launcher.results.repeats import record
from launcher.stats.repeats import difference, intervals_separate, summarize


def test_summary_of_three_repeats():
    s = summarize([10.0, 12.0, 11.0])
    assert s.n == 3 and s.mean == 11.0 and s.median == 11.0
    assert s.sd == pytest.approx(1.0)
    half = 4.303 * 1.0 / math.sqrt(3)          # t(0.975, df=2) = 4.303
    assert (s.lo, s.hi) == (pytest.approx(11 - half), pytest.approx(11 + half))
    assert s.mad == 1.0 and s.rel_mad == pytest.approx(1 / 11)   # |10-11|, |12-11|, 0 -> median 1
    assert not s.noisy                                            # 9.1% <= 10%
    assert summarize([10.0, 13.5, 11.0]).rel_mad == pytest.approx(1 / 11)  # deviations 1, 2.5, 0: MAD 1
    assert s.score == 10.0                                        # median - MAD


def test_noisy_is_relative_mad_above_the_threshold():
    assert summarize([100.0, 80.0, 125.0]).rel_mad == pytest.approx(0.2)
    assert summarize([100.0, 80.0, 125.0]).noisy
    assert not summarize([100.0, 80.0, 125.0], noisy_rel_mad=0.25).noisy


def test_one_value_has_no_interval_and_is_never_noisy():
    s = summarize([5.0, None])
    assert s.n == 1 and s.lo is None and s.sd is None and not s.noisy and s.mad == 0.0
    assert summarize([None]) is None


def test_difference_is_welch_plus_the_between_run_floor():
    a, b = summarize([100.0, 102.0, 98.0]), summarize([90.0, 92.0, 88.0])
    d = difference(a, b)
    se = math.sqrt(4 / 3 + 4 / 3)
    assert d.delta == -10.0 and d.rel == pytest.approx(-0.1) and d.df == pytest.approx(4.0)
    assert d.hi == pytest.approx(-10 + 2.776 * se) and d.excludes_zero
    wide = difference(a, b, run_floor=0.05)   # + (5% of 100)^2: se = sqrt(2.67 + 25), df stays 4
    assert wide.df == pytest.approx(4.0)
    assert wide.hi == pytest.approx(-10 + 2.776 * math.sqrt(8 / 3 + 25)) and not wide.excludes_zero
    assert difference(a, b, run_floor=0.02).excludes_zero      # 2.776 * sqrt(2.67 + 4) = 7.2 < 10
    assert not difference(summarize([100.0]), b).has_interval


def test_intervals_separate():
    lo, hi = summarize([10.0, 10.5, 9.5]), summarize([20.0, 20.5, 19.5])
    assert intervals_separate(lo, hi) is True and intervals_separate(hi, lo) is False
    assert intervals_separate(summarize([10.0]), hi) is None


def test_held_repeat_is_the_median_throughput():
    per = [{"repeat": 1, "Output TPS": 30.0}, {"repeat": 2, "Output TPS": 10.0}, {"repeat": 3, "Output TPS": 20.0}]
    assert record.held_repeat(per) == 2
    assert record.held_repeat(per[:2]) == 1            # even count: the lower median
    doc = record.build([dict(r, **{"Average_AL": 2.0}) for r in per], 2)
    assert doc["files_hold"]["repeat"] == 3 and doc["repeats"] == 3
    assert doc["stats"]["Output TPS"]["mean"] == 20.0 and doc["noisy"]   # rel MAD 10/20
    assert doc["stats"]["Average_AL"]["sd"] == 0.0 and doc["stats"]["TTFT s"] is None
