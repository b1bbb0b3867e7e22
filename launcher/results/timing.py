"""``timing.json``'s object, computed as specdec_bench's ``Timing`` class
computes it (seconds; statistics as 4-decimal strings), plus our extension
(the sample count of each statistic)."""
from __future__ import annotations

import math
from typing import Optional, Sequence

from launcher.results.chunks import Turn
from launcher.results.layout import EXTENSION_KEY

QUANTILES = (0.25, 0.5, 0.75)


def _percentile(sorted_vals: Sequence[float], q: float) -> float:
    """numpy.percentile's default (linear) method."""
    n = len(sorted_vals)
    pos = (n - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    a, b = sorted_vals[lo], sorted_vals[hi]
    # numpy's lerp: a + (b - a) * t, computed from the far end when t >= 0.5
    diff = b - a
    return b - diff * (1 - frac) if frac >= 0.5 else a + diff * frac


def compute_statistics(data: Sequence[float], quantiles: Sequence[float] = QUANTILES) -> dict:
    """min, max, mean, std (population) and quantiles, each a 4-decimal string."""
    vals = [float(x) for x in data]
    if not vals:
        raise ValueError("compute_statistics needs at least one value")
    mean = math.fsum(vals) / len(vals)
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in vals) / len(vals))
    s = sorted(vals)
    return {
        "min": f"{s[0]:.4f}", "max": f"{s[-1]:.4f}", "mean": f"{mean:.4f}", "std": f"{std:.4f}",
        "quantiles": {f"{q}": f"{_percentile(s, q):.4f}" for q in quantiles},
    }


def timing_doc(turns: Sequence[Turn], tp_size: int, extension: Optional[dict] = None) -> dict:
    """The object for one run from the successful turns (each with times:
    [start, then one time a chunk])."""
    if not turns:
        raise ValueError("timing needs at least one successful turn")
    timed = [t for t in turns if t.times]
    start = min(t.times[0] for t in timed)
    end = max(t.times[-1] for t in timed)
    tokens = [t.tokens for t in timed]
    out: dict = {}
    out["Output TPS"] = sum(tokens) / (end - start)
    out["Output TPS/gpu"] = out["Output TPS"] / tp_size
    e2e, ttft, step, gen = [], [], [], []
    for n, t in zip(tokens, timed):
        times = t.times
        if len(times) > 1:
            e2e.append(times[-1] - times[0])
            ttft.append(times[1] - times[0])
        if len(times) > 2:
            if times[-1] > times[1]:  # over HTTP a burst of chunks can share one arrival time
                gen.append((n - 1) / (times[-1] - times[1]))
            step.extend(a - b for a, b in zip(times[1:], times[:-1]))
    counts = {}
    for key, vals in (("E2E Request Time", e2e), ("TTFT Time", ttft)):
        if vals:
            out[key] = compute_statistics(vals)
        counts[key] = len(vals)
    if step:
        out["Request Generation Step Time"] = compute_statistics(step)
    if gen:  # empty when every multi-chunk turn's chunks after the first arrived at one instant
        out["Request Generation Tokens Per Second"] = compute_statistics(gen)
    counts["Request Generation Step Time"] = len(step)
    counts["Request Generation Tokens Per Second"] = len(gen)
    out["Number of Output Tokens"] = compute_statistics(tokens)
    counts["Number of Output Tokens"] = len(tokens)
    ext = {"counts": counts}
    ext.update(extension or {})
    out[EXTENSION_KEY] = ext
    return out
