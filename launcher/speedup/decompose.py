"""A speedup split in two: what the server accepted and what a step cost.

A speculative step emits AL tokens (the server's 1 + accepted / steps) where a baseline step
emits one, and costs ``step_cost`` baseline steps, so

    speedup = AL / step_cost,   step_cost = AL / speedup.

A speedup below the AL the server measured is the step cost at work, not the acceptance: at
C=1 the recorded H100 DFlash server (forced AL 4, server AL 3.98) ran 3.07x, so one of its steps
cost 1.30 baseline steps (docs/speedup.md "Why a speedup is what it is"). Each repeat gives one
estimate (launcher.speedup.break_even.repeat_step_costs: AL over repeat i's speedup over the
baseline's repeat i); the step cost is their mean with its 95 % Student-t interval
(launcher.stats.repeats). Pure.
"""
from __future__ import annotations

from typing import Optional

from launcher.stats.repeats import summarize
from launcher.speedup.break_even import repeat_decode_step_costs, point_al, repeat_step_costs


def decomposition(row: dict) -> Optional[dict]:
    """``{"speedup", "al", "step_cost", "lo", "hi", "n", "decode_step_cost"}`` of one
    launcher.speedup point row; None without an AL or a speedup. ``lo``/``hi`` are None with one
    repeat. ``decode_step_cost`` (``{"mean", "lo", "hi", "n"}``, None without per-repeat TPOTs):
    the same step without the prefill's share (launcher.speedup.break_even.repeat_decode_step_costs)."""
    al, speedup = point_al(row), (row.get("speedup") or {}).get("throughput")
    s = summarize(repeat_step_costs(row))
    if al is None or not speedup or s is None:
        return None
    d = summarize(repeat_decode_step_costs(row))
    return {"speedup": speedup, "al": al, "step_cost": s.mean, "lo": s.lo, "hi": s.hi, "n": s.n,
            "decode_step_cost": {"mean": d.mean, "lo": d.lo, "hi": d.hi, "n": d.n} if d else None}


def cost_text(d: Optional[dict]) -> str:
    """``1.30 [1.28, 1.31]`` (``1.30`` with one repeat; ``–`` without a decomposition)."""
    if not d:
        return "–"
    return f"{d['step_cost']:.2f}" + (f" [{d['lo']:.2f}, {d['hi']:.2f}]" if d.get("lo") is not None else "")


def decode_cost_text(d: Optional[dict]) -> str:
    """The decode-only step cost as ``1.16 [1.16, 1.17]`` (``–`` without one)."""
    c = (d or {}).get("decode_step_cost")
    if not c:
        return "–"
    return f"{c['mean']:.2f}" + (f" [{c['lo']:.2f}, {c['hi']:.2f}]" if c.get("lo") is not None else "")


def sentence(d: Optional[dict]) -> str:
    """The decomposition in words, for the report."""
    if not d:
        return "no decomposition (no AL or no speedup)"
    return (f"speedup {d['speedup']:.2f}x = server AL {d['al']:.2f} / a step's cost of {cost_text(d)} baseline steps"
            + (f" (mean over {d['n']} repeats, 95 % interval)" if d.get("lo") is not None else " (one repeat)"))
