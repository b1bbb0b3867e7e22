"""Goodput against a latency SLO (docs/slo.md), from AIPerf 0.13's per-request records.

Pure functions. A request is *good* when it succeeded and meets every limit of the
SLO at once (AIPerf's `good_request_count`: DistServe's definition); a metric the
request has no value for (a 1-token answer has no inter-token latency) fails its
limit, as AIPerf counts it. Goodput is good requests (and their output tokens) over
AIPerf's observation window of the point (the denominator of its request_throughput and
its goodput; :func:`observation_window_s`).

A point *meets the SLO* when, for each limit, at least ``percentile`` % of its
requests (failed ones counted as outside every limit) are within it, i.e. the
point's percentile is within the limit, and, where ``good_share`` is set, at least
that share of its requests are good.

The limits map onto AIPerf's metric tags (:data:`AIPERF_TAGS`): ``itl_ms`` and
``tpot_ms`` are both AIPerf's ``inter_token_latency`` ((E2E − TTFT) / (tokens − 1)
per request, what specdec_bench and vLLM call TPOT); a recipe sets one of them.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

# Our SLO keys -> AIPerf 0.13's record metric tags (display unit: ms)
AIPERF_TAGS = {"ttft_ms": "time_to_first_token", "itl_ms": "inter_token_latency",
               "tpot_ms": "inter_token_latency", "e2e_ms": "request_latency"}
LIMIT_KEYS = tuple(AIPERF_TAGS)
_TO_MS = {"ms": 1.0, "ns": 1e-6, "us": 1e-3, "s": 1e3, "sec": 1e3}


@dataclass(frozen=True)
class Slo:
    """Limits in ms (key -> limit), the percentile each holds at, and the share of
    requests that must meet every limit at once (None: no such condition)."""
    limits: Mapping[str, float]
    percentiles: Mapping[str, float] = field(default_factory=dict)  # key -> percentile (default 90)
    good_share: Optional[float] = None

    def percentile(self, key: str) -> float:
        return float(self.percentiles.get(key, 90.0))

    def aiperf_slos(self) -> dict[str, float]:
        """AIPerf's goodput definition (`benchmark.slos` / `--goodput`): tag -> ms."""
        return {AIPERF_TAGS[k]: float(v) for k, v in sorted(self.limits.items())}

    def describe(self) -> str:
        parts = [f"p{self.percentile(k):g} {k[:-3].upper()} <= {v:g} ms" for k, v in sorted(self.limits.items())]
        if self.good_share is not None:
            parts.append(f">= {self.good_share:.0%} of requests good")
        return ", ".join(parts)

    def to_dict(self) -> dict:
        return {"limits": dict(self.limits), "percentiles": {k: self.percentile(k) for k in self.limits},
                "good_share": self.good_share, "aiperf_slos": self.aiperf_slos()}


def slo_from_dict(d: Optional[Mapping]) -> Optional[Slo]:
    """An Slo from the recipe's `sweep.slo` (or the job spec's copy): None when no limit is set."""
    if not d:
        return None
    if "limits" in d:  # Slo.to_dict's shape
        limits = {k: float(v) for k, v in (d.get("limits") or {}).items() if v is not None}
        pct = {k: float(v) for k, v in (d.get("percentiles") or {}).items()}
    else:
        limits = {k: float(d[k]) for k in LIMIT_KEYS if d.get(k) is not None}
        base = float(d.get("percentile", 90.0) if d.get("percentile") is not None else 90.0)
        over = d.get("percentiles") or {}
        pct = {k: float(over.get(k, base)) for k in limits}
    if not limits:
        return None
    gs = d.get("good_share")
    return Slo(limits, pct, None if gs is None else float(gs))


def aiperf_goodput_arg(slo: Slo) -> str:
    """The `aiperf profile --goodput` value: space-separated `tag:ms` pairs."""
    return " ".join(f"{t}:{v:g}" for t, v in slo.aiperf_slos().items())


# ----------------------------------------------------------------------------- records

@dataclass(frozen=True)
class RequestTimes:
    """What the SLO judges of one request (ms), and its output tokens."""
    ok: bool  # succeeded (no error, not cancelled)
    values: Mapping[str, Optional[float]]  # AIPerf tag -> ms (None: no value)
    tokens: Optional[int]  # the server's completion tokens, else AIPerf's output_sequence_length


def _ms(metric: object) -> Optional[float]:
    if not isinstance(metric, Mapping) or metric.get("value") is None:
        return None
    try:
        return float(metric["value"]) * _TO_MS.get(str(metric.get("unit") or "ms"), 1.0)
    except (TypeError, ValueError):
        return None


def request_times(obj: Mapping) -> Optional[RequestTimes]:
    """One profiling record of AIPerf's profile_export.jsonl; None for another phase's
    (warm-up) record."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    if meta.get("benchmark_phase", "profiling") != "profiling":
        return None
    metrics = obj.get("metrics") if isinstance(obj.get("metrics"), Mapping) else {}
    ok = not obj.get("error") and not meta.get("was_cancelled")
    values = {t: _ms(metrics.get(t)) for t in set(AIPERF_TAGS.values())}
    tok = None
    for name in ("usage_completion_tokens", "output_sequence_length"):
        m = metrics.get(name)
        if isinstance(m, Mapping) and m.get("value") is not None:
            tok = int(m["value"])
            break
    return RequestTimes(ok, values, tok)


def read_requests(path: Path | str) -> list[RequestTimes]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = request_times(json.loads(line))
                if r is not None:
                    out.append(r)
    return out


def within(r: RequestTimes, key: str, limit_ms: float) -> bool:
    """The request meets one limit (AIPerf's comparison: value <= threshold)."""
    v = r.values.get(AIPERF_TAGS[key])
    return r.ok and v is not None and v <= limit_ms


def is_good(r: RequestTimes, slo: Slo) -> bool:
    return r.ok and all(within(r, k, v) for k, v in slo.limits.items())


def share_within(reqs: Sequence[RequestTimes], key: str, limit_ms: float) -> Optional[float]:
    return sum(within(r, key, limit_ms) for r in reqs) / len(reqs) if reqs else None


def nearest_rank(values: Sequence[float], percentile: float) -> Optional[float]:
    """The p-th percentile by nearest rank: the smallest value with at least p % of the
    values at or below it (so "p-th percentile <= limit" iff "share within >= p %")."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, math.ceil(percentile / 100.0 * len(s)) - 1)]


def goodput(reqs: Sequence[RequestTimes], duration_s: Optional[float], slo: Slo) -> dict:
    """A point's goodput and whether it meets the SLO. ``duration_s``: AIPerf's
    benchmark_duration of the point (goodput's denominator)."""
    n = len(reqs)
    good = [r for r in reqs if is_good(r, slo)]
    good_tokens = sum(r.tokens or 0 for r in good)
    per_limit = {}
    meets = n > 0
    for key, limit in sorted(slo.limits.items()):
        p = slo.percentile(key)
        share = share_within(reqs, key, limit)
        # failed requests count as +inf: outside every limit
        vals = [(r.values.get(AIPERF_TAGS[key]) if r.ok else None) for r in reqs]
        vals = [math.inf if v is None else v for v in vals]
        pv = nearest_rank(vals, p)
        ok = share is not None and share >= p / 100.0 - 1e-12
        per_limit[key] = {"limit_ms": limit, "percentile": p, "value_ms": None if pv in (None, math.inf) else pv,
                          "share_within": share, "met": ok}
        meets = meets and ok
    frac = len(good) / n if n else None
    if slo.good_share is not None:
        meets = meets and frac is not None and frac >= slo.good_share - 1e-12
    rate = (lambda x: x / duration_s if duration_s else None)
    return {"slo": slo.describe(), "requests": n, "good_requests": len(good), "good_fraction": frac,
            "goodput_rps": rate(len(good)), "good_output_tokens": good_tokens,
            "good_output_tps": rate(good_tokens), "duration_s": duration_s, "limits": per_limit,
            "meets_slo": meets}


def aiperf_goodput(aggregate: Mapping) -> Optional[dict]:
    """AIPerf's own figures from its profile_export_aiperf.json, when it was given the SLO:
    good_request_count, goodput (requests/s), benchmark_duration (s)."""
    def avg(tag):
        m = aggregate.get(tag)
        return float(m["avg"]) if isinstance(m, Mapping) and m.get("avg") is not None else None
    good, gp = avg("good_request_count"), avg("goodput")
    if good is None and gp is None:
        return None
    cfg = aggregate.get("input_config") if isinstance(aggregate.get("input_config"), Mapping) else {}
    slos = cfg.get("slos") if isinstance(cfg.get("slos"), Mapping) else None
    return {"good_request_count": good, "goodput_rps": gp, "benchmark_duration_s": avg("benchmark_duration"),
            "slos": None if slos is None else {str(k): float(v) for k, v in slos.items()}}


def observation_window_s(aggregate: Mapping) -> Optional[float]:
    """The seconds AIPerf divides by for its rates, goodput included (the phase's observation
    window: request_count / request_throughput); benchmark_duration (first request to last
    response, a few ms shorter) where the rates are missing."""
    def avg(tag):
        m = aggregate.get(tag)
        return float(m["avg"]) if isinstance(m, Mapping) and m.get("avg") is not None else None
    n, rate = avg("request_count"), avg("request_throughput")
    if n and rate:
        return n / rate
    return avg("benchmark_duration")


def point_goodput(aiperf_dir: Path, slo: Slo) -> Optional[dict]:
    """Ours, AIPerf's and whether they agree, for a point's AIPerf folder; None without records."""
    export = Path(aiperf_dir) / "profile_export.jsonl"
    if not export.exists():
        return None
    try:
        agg = json.loads((Path(aiperf_dir) / "profile_export_aiperf.json").read_text())
    except (OSError, ValueError):
        agg = {}
    out = goodput(read_requests(export), observation_window_s(agg if isinstance(agg, Mapping) else {}), slo)
    theirs = aiperf_goodput(agg) if isinstance(agg, Mapping) else None
    if theirs is not None and theirs.get("slos") is not None and theirs["slos"] != slo.aiperf_slos():
        theirs = dict(theirs, note="AIPerf judged another SLO: not compared")
        out["aiperf"], out["agrees_with_aiperf"] = theirs, None
        return out
    out["aiperf"] = theirs
    out["agrees_with_aiperf"] = agreement(out, theirs)
    return out


def agreement(ours: Mapping, theirs: Optional[Mapping], rel: float = 1e-6) -> Optional[bool]:
    """Both count the same good requests and the same goodput (None: AIPerf gave none)."""
    if not theirs or theirs.get("good_request_count") is None:
        return None
    same_count = int(round(theirs["good_request_count"])) == ours["good_requests"]
    gp, mine = theirs.get("goodput_rps"), ours.get("goodput_rps")
    same_rate = gp is None or mine is None or math.isclose(gp, mine, rel_tol=rel, abs_tol=1e-9)
    return bool(same_count and same_rate)


def repeats_verdict(per_repeat_meets: Iterable[Optional[bool]]) -> Optional[str]:
    """A point's verdict over its repeats: "met" (every repeat), "failed" (none), "noisy"
    (the repeats disagree: the point is within the noise of the boundary), None (no data)."""
    v = [m for m in per_repeat_meets if m is not None]
    if not v:
        return None
    if all(v):
        return "met"
    if not any(v):
        return "failed"
    return "noisy"
