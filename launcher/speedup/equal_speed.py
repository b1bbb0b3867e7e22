"""Throughput per GPU at a per-user speed, read off a server's measured curve (docs/fleet.md). Pure.

A server measured at several concurrencies gives a curve: at each C, the per-user decode speed
(tok/s each user sees) and the output throughput per GPU. A fleet promises its users a speed and
asks what a GPU then serves. At a promised speed x the curve gives the most throughput per GPU of:

- every measured point at least as fast per user as x (it keeps the promise), and
- the straight line between two points adjacent in C whose speeds lie either side of x, read at x
  (throughput and power alike, with the same weight).

So on a curve whose speed falls as C rises (the usual one) this is the straight-line interpolation
at x. Never past the measured points: faster than the fastest point the server cannot be read
(None); slower than the slowest point, its slowest point's figure is a lower bound
(``at_least``): more concurrency was not measured.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence


@dataclass(frozen=True)
class CurvePoint:
    """One measured point of a server (one repeat): its concurrency, per-user decode speed,
    output tokens/s per GPU and mean power per GPU (W; None where none was recorded)."""
    concurrency: int
    per_user_tps: float
    tps_per_gpu: float
    watts_per_gpu: Optional[float] = None


@dataclass(frozen=True)
class Reading:
    """A curve read at a per-user speed: the throughput per GPU, the power per GPU with it, whether
    it is only a lower bound (the speed is below the slowest measured point), and the concurrencies
    it comes from (one point, or the two a line runs between)."""
    tps_per_gpu: float
    watts_per_gpu: Optional[float]
    at_least: bool
    from_concurrency: tuple[int, ...]

    @property
    def joules_per_token(self) -> Optional[float]:
        return None if self.watts_per_gpu is None or self.tps_per_gpu <= 0 else self.watts_per_gpu / self.tps_per_gpu


def _mix(a: Optional[float], b: Optional[float], w: float) -> Optional[float]:
    return None if a is None or b is None else a + (b - a) * w


def read_at(curve: Sequence[CurvePoint], x: float) -> Optional[Reading]:
    """The curve (points in any order; lines run between points adjacent in C) read at per-user
    speed ``x`` (see the module doc); None when ``x`` is faster than every measured point."""
    pts = sorted(curve, key=lambda p: p.concurrency)
    if not pts or x > max(p.per_user_tps for p in pts):
        return None
    cands = [Reading(p.tps_per_gpu, p.watts_per_gpu, False, (p.concurrency,)) for p in pts if p.per_user_tps >= x]
    for a, b in zip(pts, pts[1:]):
        lo, hi = sorted((a.per_user_tps, b.per_user_tps))
        if lo <= x <= hi and hi > lo:
            w = (x - a.per_user_tps) / (b.per_user_tps - a.per_user_tps)
            cands.append(Reading(a.tps_per_gpu + (b.tps_per_gpu - a.tps_per_gpu) * w,
                                 _mix(a.watts_per_gpu, b.watts_per_gpu, w), False, (a.concurrency, b.concurrency)))
    best = max(cands, key=lambda r: r.tps_per_gpu)
    below = x < min(p.per_user_tps for p in pts)
    return Reading(best.tps_per_gpu, best.watts_per_gpu, below, best.from_concurrency)


def reach(curve: Sequence[CurvePoint]) -> dict:
    """The speeds a curve spans: its fastest and slowest point (per-user speed and C)."""
    fast = max(curve, key=lambda p: p.per_user_tps)
    slow = min(curve, key=lambda p: p.per_user_tps)
    return {"fastest": {"per_user_tps": fast.per_user_tps, "concurrency": fast.concurrency},
            "slowest": {"per_user_tps": slow.per_user_tps, "concurrency": slow.concurrency}}


def usd_per_million(tps_per_gpu: float, gpu_hour_price: float) -> float:
    """Dollars per million output tokens on a GPU that costs ``gpu_hour_price`` an hour and serves
    ``tps_per_gpu`` output tokens a second."""
    return gpu_hour_price * 1e6 / (3600.0 * tps_per_gpu)
