"""The break-even acceptance length of forced-acceptance runs: the AL at which a speculative
server's Output TPS equals its baseline's, per (dataset, T, C, k), with a 95 % interval.

Forced acceptance changes what a verify step accepts, not what it computes, so a step costs
the same in every forced level: ``cost`` baseline steps. A step then yields AL tokens where
the baseline's yields one, so the throughput speedup is AL / cost and the break-even AL is the
cost itself. Each measured repeat gives one estimate, server AL / that repeat's speedup
(repeat i over the baseline's repeat i); the break-even is their mean over every level and
repeat, with the 95 % Student-t interval (launcher.stats.repeats), and the spread of
the per-level means says whether the cost is indeed constant. Beside it, the straight-line
interpolation between the two measured levels that bracket 1x (None when none do), the
estimate docs/gpu.md used before. Pure.
"""
from __future__ import annotations

from statistics import mean
from typing import Optional

from launcher.results.identity import tag
from launcher.stats.repeats import summarize


def _key(r: dict) -> tuple:
    """One break-even per (dataset, T, C, k) and server configuration: two servers are never pooled."""
    conf = r.get("configuration") or {}
    return r["dataset"], r["temperature"], r["concurrency"], r["k"], conf.get("fingerprint"), conf.get("label") or ""


def point_al(r: dict) -> Optional[float]:
    """The AL a speedup row divides by: the server's (1 + accepted / steps), else the chunk-counted one."""
    al = r.get("server_al") or r.get("measured_al")
    return float(al) if al else None


def repeat_speedups(r: dict) -> list[float]:
    """The row's throughput speedup per repeat (repeat i over the baseline's repeat i), else its one figure."""
    return [s for s in (r.get("throughput_per_repeat") or [(r.get("speedup") or {}).get("throughput")]) if s]


def repeat_step_costs(r: dict) -> list[float]:
    """One step-cost estimate per repeat, in baseline steps: AL / that repeat's speedup ([] without an AL)."""
    al = point_al(r)
    return [al / s for s in repeat_speedups(r)] if al else []


def repeat_decode_step_costs(r: dict) -> list[float]:
    """One decode-only step-cost estimate per repeat, in baseline steps: AL x that repeat's time
    per output token after the first over the baseline's (TPOT, repeats.json). It leaves out the
    prefill that makes the first token, which the throughput's step cost spreads over the
    request's steps: fewer steps at a higher AL, so that cost rises with the AL by the prefill's
    share while this one does not. [] without an AL or per-repeat TPOTs on both sides."""
    al = point_al(r)
    return [al * x for x in r.get("tpot_ratio_per_repeat") or []] if al else []


def interpolated(levels: list[tuple[float, float]]) -> Optional[float]:
    """The AL where speedup crosses 1 between two measured (AL, speedup) levels, in AL order."""
    pts = sorted(levels)
    for (a1, s1), (a2, s2) in zip(pts, pts[1:]):
        if s1 < 1 <= s2 and s2 != s1:
            return a1 + (1 - s1) * (a2 - a1) / (s2 - s1)
    return None


def break_even(rows: list[dict]) -> list[dict]:
    """One row per (dataset, T, C, k) and server configuration with forced points: ``rows`` are
    launcher.speedup's point rows (``forced_acceptance``, ``server_al`` or ``measured_al``,
    ``speedup.throughput``, ``configuration`` (fingerprint and label) and, with repeats,
    ``throughput_per_repeat``)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get("forced_acceptance") and (r.get("server_al") or r.get("measured_al")):
            groups.setdefault(_key(r), []).append(r)
    out = []
    for (ds, t, c, k, fp, lab), rs in sorted(groups.items(), key=lambda kv: (
            str(kv[0][0]), float(kv[0][1]), int(kv[0][2]), kv[0][3] or 0, kv[0][5], str(kv[0][4]))):
        estimates, per_level, levels = [], [], []
        for r in rs:
            al, speedups, costs = point_al(r), repeat_speedups(r), repeat_step_costs(r)
            estimates += costs
            if costs:
                per_level.append({"forced": r["forced_acceptance"].get("length"), "al": al,
                                  "step_cost": mean(costs), "n": len(costs)})
                levels.append((al, mean(speedups)))
        s = summarize(estimates)
        out.append({"dataset": ds, "temperature": t, "concurrency": c, "k": k,
                    **({"configuration": {"fingerprint": fp, "label": lab}} if fp else {}),  # rows of earlier analyses have none
                    "break_even_al": s.mean if s else None, "lo": s.lo if s else None, "hi": s.hi if s else None,
                    "n": s.n if s else 0, "levels": sorted(per_level, key=lambda x: x["al"]),
                    "interpolated": interpolated(levels)})
    return out


def one_line(b: dict) -> str:
    who = f"{b['dataset']} T={b['temperature']:g} C={b['concurrency']} k={b['k']}" + tag(
        (b.get("configuration") or {}).get("label"))
    if b.get("break_even_al") is None:
        return f"{who}: break-even AL not measured"
    iv = f" [{b['lo']:.2f}, {b['hi']:.2f}]" if b.get("lo") is not None else " (one estimate: no interval)"
    interp = b.get("interpolated")
    return (f"{who}: break-even AL "
            f"{b['break_even_al']:.2f}{iv} over {b['n']} repeat(s) of {len(b['levels'])} level(s)"
            + (f"; interpolated {interp:.2f}" if interp is not None else ""))
