"""Whether a point's acceptance figures can be true, whatever engine counted them.

A verify step emits at most k + 1 tokens (k drafts and the bonus token), so every acceptance
length of a point (Server_AL, Average_AL, Prometheus_AL) lies in [1, k + 1]. Per-position
rates (P(the first i drafts are all accepted)) lie in [0, 1], never increase with i, and give
the AL they were counted with: 1 + their sum. A point whose figures break one of these rules
is *impossible*: its acceptance says what the counting did, not what the server did (a merged
stream chunk counted as one step, a counter read from another window). The benchmark writes
the reason into acceptance_rate.json's extension (``impossible``) and summary.json's row
(``acceptance_impossible``); the tables, the report and the verdicts mark it. Pure.
"""
from __future__ import annotations

from typing import Optional, Sequence

from launcher.results.per_position import STEP_SOURCE

# Slack for float arithmetic only: the rules are exact for counts.
EPS = 1e-6
# 1 + sum(rates) against the AL of the same counts: equal up to rounding of written files.
RATES_AL_TOL = 0.01
IMPOSSIBLE_FIELD = "impossible"


def impossible_acceptance(k: Optional[int], als: dict[str, Optional[float]],
                          per_position: Optional[dict] = None, al_of_rates: Optional[float] = None,
                          chunks_over_k_plus_1: int = 0) -> Optional[str]:
    """Why the figures cannot be true, in one line, or None. ``als``: figure name -> AL (None
    skipped); ``per_position``: {"rates": [...], "source": ...}; ``al_of_rates``: the AL the rates
    were counted with (the same counts); ``chunks_over_k_plus_1``: streamed chunks larger than a
    step can be (named as the likely cause)."""
    why = []
    if k:
        top = k + 1
        over = [f"{name} {v:.3g}" for name, v in als.items() if v is not None and v > top + EPS]
        if over:
            why.append(f"{', '.join(over)} above k + 1 = {top}")
    low = [f"{name} {v:.3g}" for name, v in als.items() if v is not None and v < 1.0 - EPS]
    if low:
        why.append(f"{', '.join(low)} below 1")
    rates = list((per_position or {}).get("rates") or [])
    if rates:
        # rates counted from streamed chunks cap each chunk at k accepted drafts: with chunks over k + 1
        # (merged steps, named by acceptance_exact) they cannot give the chunks' own AL, by construction
        source = (per_position or {}).get("source") or "per-position"
        capped = source == STEP_SOURCE and chunks_over_k_plus_1
        why += _rate_problems(rates, None if capped else al_of_rates, source)
    if not why:
        return None
    line = "; ".join(why)
    if chunks_over_k_plus_1:
        line += (f" ({chunks_over_k_plus_1} streamed chunks exceed k + 1 tokens: the server sent several verify "
                 "steps as one chunk)")
    return line


def _rate_problems(rates: Sequence[float], al: Optional[float], source: str) -> list[str]:
    out = []
    if any(r < -EPS or r > 1 + EPS for r in rates):
        out.append(f"{source} rates {_fmt(rates)} outside [0, 1]")
    if any(rates[i] > rates[i - 1] + EPS for i in range(1, len(rates))):
        out.append(f"{source} rates {_fmt(rates)} increase with the position")
    if al is not None:
        implied = 1.0 + sum(rates)
        if abs(implied - al) > RATES_AL_TOL * max(1.0, al):
            out.append(f"{source} rates {_fmt(rates)} give AL {implied:.3g}, the same counts' AL is {al:.3g}")
    return out


def _fmt(rates: Sequence[float]) -> str:
    return "[" + ", ".join(f"{r:.3g}" for r in rates) + "]"


def from_extension(ext: dict, average_al: Optional[float], k: Optional[int]) -> Optional[str]:
    """The rule applied to acceptance_rate.json's extension (our keys) and its Average_AL."""
    if not ext or not ext.get("speculative"):
        return None
    per_pos = ext.get("per_position")
    window = ext.get("prometheus_window") or {}
    reason = impossible_acceptance(
        k, {"Server_AL": ext.get("Server_AL"), "Average_AL": average_al, "Prometheus_AL": ext.get("Prometheus_AL"),
            "stream AL": ext.get("stream_AL")},
        per_position=per_pos, al_of_rates=_al_of(per_pos, ext),
        chunks_over_k_plus_1=int(ext.get("chunks_over_k_plus_1") or 0))
    win_pp = window.get("per_position")
    if reason is None and win_pp and ext.get("Prometheus_AL") is not None:
        reason = impossible_acceptance(k, {}, per_position=win_pp, al_of_rates=ext.get("Prometheus_AL"))
    return reason


def _al_of(per_pos: Optional[dict], ext: dict) -> Optional[float]:
    """The AL counted from the same steps as the rates: the steps the stream or the per-request
    stats gave (Server_AL where it comes from them; the chunk steps' own AL otherwise)."""
    if not per_pos:
        return None
    if ext.get("Server_AL_source") == "counters":
        return ext.get("stream_AL")
    return ext.get("Server_AL")


__all__ = ["impossible_acceptance", "from_extension", "IMPOSSIBLE_FIELD"]
