"""Per-request ratios between a speculative run and its baseline, paired by
question (conversation id and turn), with their spread across requests.

Pure: plain per-request records in, plain numbers out.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import mean, median, stdev
from typing import Callable, Iterable, Optional

from launcher.stats.paired import t_critical


@dataclass(frozen=True)
class RequestTiming:
    """One successful turn of one request, in seconds.

    ``spec_steps`` / ``histogram`` are vLLM's per-request verify steps and
    acceptance histogram (accepted drafts j -> steps); None on a baseline.
    """
    key: tuple[str, int]            # (question / conversation id, turn index)
    ttft_s: Optional[float]
    e2e_s: Optional[float]
    output_tokens: Optional[int]
    spec_steps: Optional[int] = None
    histogram: Optional[dict] = None

    @property
    def decode_s(self) -> Optional[float]:
        """Time from the first token to the last."""
        if self.e2e_s is None or self.ttft_s is None:
            return None
        return self.e2e_s - self.ttft_s

    @property
    def decode_tps(self) -> Optional[float]:
        """Per-user decode speed: (tokens - 1) / decode time; None below 2 tokens."""
        d = self.decode_s
        if self.output_tokens is None or self.output_tokens < 2 or d is None or d <= 0:
            return None
        return (self.output_tokens - 1) / d


@dataclass(frozen=True)
class RatioStats:
    """Spread of per-request ratios x_spec / x_base (or their inverse).

    ``geomean`` with its 95% t-interval ``lo``..``hi`` (computed on the log
    ratios; None with fewer than 2 pairs); quartiles of the ratios.
    ``paired`` is False when no question was in both runs: then ``geomean`` is
    the ratio of the two runs' medians and there is no interval.
    """
    n: int
    paired: bool
    geomean: Optional[float]
    lo: Optional[float]
    hi: Optional[float]
    p25: Optional[float]
    p50: Optional[float]
    p75: Optional[float]

    def to_dict(self) -> dict:
        return asdict(self)


def _quartiles(xs: list[float]) -> tuple[float, float, float]:
    """Linear-interpolated 25/50/75th percentiles (numpy's default)."""
    s = sorted(xs)

    def q(p: float) -> float:
        pos = p * (len(s) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    return q(0.25), q(0.5), q(0.75)


def ratio_stats(pairs: Iterable[tuple[float, float]]) -> Optional[RatioStats]:
    """Stats of num/den over (num, den) pairs; pairs with a non-positive side are dropped."""
    ratios = [a / b for a, b in pairs if a is not None and b is not None and a > 0 and b > 0]
    if not ratios:
        return None
    logs = [math.log(r) for r in ratios]
    g = math.exp(mean(logs))
    lo = hi = None
    if len(logs) >= 2:
        half = t_critical(len(logs) - 1) * stdev(logs) / math.sqrt(len(logs))
        lo, hi = math.exp(mean(logs) - half), math.exp(mean(logs) + half)
    p25, p50, p75 = _quartiles(ratios)
    return RatioStats(len(ratios), True, g, lo, hi, p25, p50, p75)


def paired_ratio(spec: list[RequestTiming], base: list[RequestTiming],
                 value: Callable[[RequestTiming], Optional[float]], invert: bool = False) -> Optional[RatioStats]:
    """value(spec) / value(base) per question present in both runs (base / spec
    with ``invert``). With no common question: the ratio of the medians, unpaired."""
    by_base = {r.key: value(r) for r in base}
    pairs = []
    for r in spec:
        if r.key in by_base:
            a, b = value(r), by_base[r.key]
            pairs.append((b, a) if invert else (a, b))
    st = ratio_stats(pairs)
    if st is not None:
        return st
    vs = [v for v in (value(r) for r in spec) if v is not None and v > 0]
    vb = [v for v in (value(r) for r in base) if v is not None and v > 0]
    if not vs or not vb:
        return None
    r = (median(vb) / median(vs)) if invert else (median(vs) / median(vb))
    return RatioStats(min(len(vs), len(vb)), False, r, None, None, None, None, None)


def point_speedup(spec: list[RequestTiming], base: list[RequestTiming],
                  spec_tps: Optional[float], base_tps: Optional[float]) -> dict:
    """The speedup figures of one (dataset, T, C) point (speedup.json's ``speedup``):

    * ``throughput``: Output TPS speculative / baseline (one figure per run, no spread);
    * ``decode``: per-user decode speed speculative / baseline, per request;
    * ``ttft_ratio``: TTFT speculative / baseline, per request (> 1: slower first token);
    * ``e2e_ratio``: end-to-end latency speculative / baseline, per request (< 1: faster);
    * ``e2e_speedup``: baseline / speculative end-to-end latency (the inverse, for the noise test).
    """
    thr = (spec_tps / base_tps) if spec_tps and base_tps else None
    stats = {
        "decode": paired_ratio(spec, base, lambda r: r.decode_tps),
        "ttft_ratio": paired_ratio(spec, base, lambda r: r.ttft_s),
        "e2e_ratio": paired_ratio(spec, base, lambda r: r.e2e_s),
        "e2e_speedup": paired_ratio(spec, base, lambda r: r.e2e_s, invert=True),
    }
    common = len({r.key for r in spec} & {r.key for r in base})
    return {"throughput": thr, "spec_output_tps": spec_tps, "base_output_tps": base_tps,
            "paired_requests": common, "spec_requests": len(spec), "base_requests": len(base),
            **{k: (v.to_dict() if v else None) for k, v in stats.items()}}


def beats_baseline(speedup: dict, spec_tps: Optional[dict] = None, base_tps: Optional[dict] = None) -> Optional[bool]:
    """Whether a point beats its baseline beyond the noise. With repeats on both sides
    (``spec_tps``/``base_tps``: launcher.results.repeats summaries of Output TPS): the 95%
    intervals separate, the speculative one wholly above. Otherwise: the throughput
    speedup is above 1 AND the 95% interval of the paired per-request end-to-end
    speedup lies above 1. None when there is no interval (fewer than 2 paired
    requests) to judge the noise by."""
    if spec_tps and base_tps and spec_tps.get("lo") is not None and base_tps.get("hi") is not None:
        return spec_tps["lo"] > base_tps["hi"]
    thr = speedup.get("throughput")
    e2e = speedup.get("e2e_speedup") or {}
    if thr is None or e2e.get("lo") is None:
        return None
    return thr > 1.0 and e2e["lo"] > 1.0
