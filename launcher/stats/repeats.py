"""Statistics of a handful of repeated measurements. Pure, standard library only
(the node side computes them).

A point measured N times gives N values of each figure (Output TPS, TTFT, ...).
:func:`summarize` gives their mean, sample sd, the 95% Student-t interval of the
mean, the median, the MAD (median absolute deviation from the median, unscaled)
and the relative MAD (MAD / |median|), the spread rule vLLM's k tuner uses: a
point whose relative MAD exceeds ``noisy_rel_mad`` (0.1) is *noisy*. So is a point with one
repeat further than ``noisy_rel_mad`` from the median (``worst_rel_dev``): the MAD of three
values, two of them alike, is blind to the third (an H200 point measured 1,018.7 / 750.7 /
1,042.4 tok/s: relative MAD 0.023, the slow repeat 26 % below the figure the point reports).

:func:`difference` is the interval compare judges a change against: the two
runs' means differ by Δ, and Δ is flagged only when it exceeds the threshold
AND its 95% interval excludes zero. The interval's variance is

    sd_a²/n_a + sd_b²/n_b + (run_floor · mean_a)²

(Welch's, plus a between-run term; Welch–Satterthwaite's degrees of freedom of the sample part): repeats of one run share that run's server
process and machine state, so they scatter less than two runs do; ``run_floor``
is the relative sd of a run's mean that no number of repeats removes, measured
on the machine (docs/repeats.md has the figures).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import mean, median, stdev
from typing import Optional, Sequence

# The noisy rule's threshold (vLLM tune_speculative_k's rule; bench.gates.noisy_rel_mad's default): its one
# definition (launcher.contracts.compare_thresholds reads it from here).
NOISY_REL_MAD = 0.1

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


class Interval:
    """A difference with an optional 95% interval ``lo``..``hi`` (None: too few values)."""
    lo: Optional[float]
    hi: Optional[float]

    @property
    def has_interval(self) -> bool:
        return self.lo is not None

    @property
    def excludes_zero(self) -> bool:
        return self.has_interval and (self.lo > 0 or self.hi < 0)




@dataclass(frozen=True)
class Summary:
    """A figure over its repeats. ``lo``/``hi``: the 95% t-interval of the mean (None with one value)."""
    n: int
    mean: float
    sd: Optional[float]
    lo: Optional[float]
    hi: Optional[float]
    median: float
    mad: float
    rel_mad: Optional[float]
    noisy: bool
    worst_rel_dev: Optional[float] = None  # max |x - median| / |median|: the repeat furthest from the figure

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Optional["Summary"]:
        try:
            return cls(**{k: d.get(k) for k in cls.__dataclass_fields__})
        except TypeError:
            return None

    @property
    def score(self) -> float:
        """median − MAD: the spread-penalised figure the best k is chosen by."""
        return self.median - self.mad


def mad(xs: Sequence[float]) -> float:
    m = median(xs)
    return median(abs(x - m) for x in xs)


def summarize(values: Sequence[Optional[float]], noisy_rel_mad: float = NOISY_REL_MAD) -> Optional[Summary]:
    """The values' summary (None values dropped); None when there is none."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not xs:
        return None
    m, med, d = mean(xs), median(xs), mad(xs)
    rel = d / abs(med) if med else None
    if len(xs) < 2:
        return Summary(1, m, None, None, None, med, 0.0, rel, False, 0.0 if med else None)
    sd = stdev(xs)
    half = t_critical(len(xs) - 1) * sd / math.sqrt(len(xs))
    worst = max(abs(x - med) for x in xs) / abs(med) if med else None
    return Summary(len(xs), m, sd, m - half, m + half, med, d, rel, is_noisy(rel, worst, noisy_rel_mad), worst)


def is_noisy(rel_mad: Optional[float], worst_rel_dev: Optional[float], threshold: float = NOISY_REL_MAD) -> bool:
    """The noise rule: the repeats' relative MAD (vLLM tune_speculative_k's rule) or the
    repeat furthest from the median exceeds ``threshold``. Pure."""
    return any(v is not None and v > threshold for v in (rel_mad, worst_rel_dev))


@dataclass(frozen=True)
class Difference(Interval):
    """B's mean minus A's, with the 95% interval of the difference (None when a side has one value)."""
    delta: float
    rel: Optional[float]          # delta / A's mean
    lo: Optional[float]
    hi: Optional[float]
    df: Optional[float]


def difference(a: Summary, b: Summary, run_floor: float = 0.0) -> Difference:
    """Welch's interval of mean_b − mean_a, widened by a between-run term
    (``run_floor`` × mean_a as one more sd). The degrees of freedom are Welch–
    Satterthwaite's over the two sample variances only, df = (va + vb)² /
    (va²/(n_a − 1) + vb²/(n_b − 1)): the floor is an estimate from a few pairs, not
    a known variance, so it does not buy the narrower t of many degrees of freedom
    (counting it as known flagged more identical pairs, not fewer: docs/repeats.md)."""
    delta = b.mean - a.mean
    rel = delta / a.mean if a.mean else None
    if a.n < 2 or b.n < 2 or a.sd is None or b.sd is None:
        return Difference(delta, rel, None, None, None)
    va, vb = a.sd ** 2 / a.n, b.sd ** 2 / b.n
    vf = (run_floor * abs(a.mean)) ** 2
    se = math.sqrt(va + vb + vf)
    if va + vb > 0:
        df = (va + vb) ** 2 / (va ** 2 / (a.n - 1) + vb ** 2 / (b.n - 1))
    else:
        df = float(a.n + b.n - 2)
    df = max(1.0, df)
    half = t_critical(int(math.floor(df))) * se
    return Difference(delta, rel, delta - half, delta + half, df)


def intervals_separate(a: Summary, b: Summary) -> Optional[bool]:
    """b's interval lies wholly above a's (True), or not (False); None when a side has no interval."""
    if a.lo is None or b.lo is None:
        return None
    return b.lo > a.hi
