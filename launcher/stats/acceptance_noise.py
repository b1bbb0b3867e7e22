"""Sampling noise of acceptance figures counted over verify steps: the one definition
of the noise tolerance used by every check that compares a measured acceptance with
an expected one (the forced-acceptance known answer, the golden check; docs/golden.md).

Per verify step the number of accepted drafts A (0..k) has P(A >= i) = r_i, the
unconditional per-position rates. So:

* position i's rate is a proportion over the steps: variance r_i (1 - r_i) per step;
* the AL is 1 + the mean of A: variance per step E[A^2] - E[A]^2 with
  E[A] = sum(r_i) and E[A^2] = sum((2i - 1) r_i).

A figure counted over n steps has the standard error sqrt(variance / n); two independent
counts (a run against a reference counted over n_ref steps) differ with the standard error
sqrt(variance (1/n + 1/n_ref)). The tolerance is Z standard errors. Pure, standard library.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

# Z standard errors: a correct engine falls outside about once in 30,000 checks of one
# figure (normal approximation), so a check's "fail" is a finding, not noise.
Z = 4.0


def rate_variance(rate: float) -> float:
    """Per-step variance of a per-position rate (a proportion)."""
    r = min(1.0, max(0.0, float(rate)))
    return r * (1.0 - r)


def accepted_variance(rates: Sequence[float]) -> float:
    """Per-step variance of the accepted count A given its per-position rates."""
    mean = sum(float(r) for r in rates)
    second = sum((2 * i - 1) * float(r) for i, r in enumerate(rates, start=1))
    return max(0.0, second - mean * mean)


def standard_error(variance: float, n: float, n_ref: Optional[float] = None) -> float:
    """The standard error of a figure counted over ``n`` steps, or of its difference from
    a reference counted over ``n_ref`` steps (None: the reference is taken as exact)."""
    if not n or n <= 0:
        return math.inf
    inv = 1.0 / float(n) + (1.0 / float(n_ref) if n_ref else 0.0)
    return math.sqrt(max(0.0, variance) * inv)


def noise_tolerance(variance: float, n: float, n_ref: Optional[float] = None, floor: float = 0.0) -> float:
    """Z standard errors (at least ``floor``): how far a correct measurement may fall from
    what is expected by sampling alone."""
    return max(Z * standard_error(variance, n, n_ref), floor)
