"""What a speculative point measured of each request's parts, per repeat: the prefill (median
time to first token), the time per output token after the first (median TPOT), the server's
AL and the throughput speedup over the baseline's same repeat, and the output length. The
cost model that holds across ALs (launcher.speedup.al_model) is made of them.

From ``repeats.json`` of both sides (repeat i over the baseline's repeat i, as
launcher.speedup.analysis pairs them); a point without repeats gives its one run's figures from
its files (TTFT and end-to-end medians, so TPOT = (E2E - TTFT) / (tokens - 1)).
"""
from __future__ import annotations

from typing import Optional

from launcher.results.job_dir import Point
from launcher.results.point import stat


def output_tokens(point: Optional[Point]) -> Optional[float]:
    """The mean output tokens of the point's requests (its files' repeat), None when unrecorded."""
    n = stat((point.timing or {}) if point else {}, "Number of Output Tokens", "mean")
    return float(n) if n else None


def _al(rep: dict, fallback: Optional[float]) -> Optional[float]:
    steps, acc = rep.get("num_spec_steps"), rep.get("num_accepted_draft_tokens")
    if isinstance(steps, (int, float)) and steps > 0 and isinstance(acc, (int, float)):
        return 1.0 + acc / steps
    return fallback


def from_repeats(rep_spec: Optional[dict], rep_base: Optional[dict], al: Optional[float]) -> list[dict]:
    """One entry per repeat both sides measured (repeat i with the baseline's repeat i)."""
    spec = [r for r in (rep_spec or {}).get("per_repeat") or [] if isinstance(r, dict)]
    base = [r for r in (rep_base or {}).get("per_repeat") or [] if isinstance(r, dict)]
    out = []
    for s, b in zip(spec, base):
        if s.get("Output TPS") and b.get("Output TPS"):
            out.append({"speedup": s["Output TPS"] / b["Output TPS"], "ttft_s": s.get("TTFT s"),
                        "tpot_s": s.get("TPOT s"), "al": _al(s, al)})
    return out


def one_run(point: Optional[Point], speedup: Optional[float], al: Optional[float]) -> list[dict]:
    """The point's one run as a single repeat (its files' medians)."""
    if point is None or point.result is None or not speedup:
        return []
    n, ttft = output_tokens(point), point.result.ttft_median_s
    e2e = stat(point.timing or {}, "E2E Request Time")
    if e2e is not None and point.result.legacy:
        e2e /= 1e3
    if not n or n < 2 or ttft is None or e2e is None or e2e <= ttft:
        return []
    return [{"speedup": speedup, "ttft_s": ttft, "tpot_s": (e2e - ttft) / (n - 1), "al": al}]


def request_parts(point: Optional[Point], rep_spec: Optional[dict], rep_base: Optional[dict],
                  speedup: Optional[float], al: Optional[float]) -> dict:
    """``{"output_tokens", "repeats": [{"speedup", "ttft_s", "tpot_s", "al"}, ...]}`` of one point."""
    reps = from_repeats(rep_spec, rep_base, al) or one_run(point, speedup, al)
    return {"output_tokens": output_tokens(point), "repeats": reps}
