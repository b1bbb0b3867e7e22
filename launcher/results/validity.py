"""The one validity rule, used by the benchmark (before COMPLETE), the
summary, the report, compare and the uploader."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from launcher.results.point import PointResult


@dataclass(frozen=True)
class ValidityRule:
    max_failed_fraction: float = 0.05
    min_average_al: Optional[float] = None        # a recipe gate for this dataset
    gate_name: str = "min_acceptance_length"      # how the gate is named in errors (with its dataset)
    min_tokens_per_step: Optional[float] = None   # a recipe gate on Server_AL
    require_complete: bool = True


def failed_fraction(failed: int, succeeded: int) -> Optional[float]:
    """failed / (failed + succeeded): the one definition."""
    n = failed + succeeded
    return failed / n if n else None


def _too_many_failed(failed: int, succeeded: int, max_fraction: float) -> Optional[str]:
    """The failed-request line of the rule, or None within it."""
    frac = failed_fraction(failed, succeeded)
    if frac is None or frac <= max_fraction:
        return None
    return f"{failed} of {failed + succeeded} requests failed (> {max_fraction:.0%})"


def repeat_problems(per_repeat, max_failed_fraction: float) -> list[str]:
    """The failed-request rule over each repeat of a point (repeats.json's rows): the point's
    interval pools every repeat, so one that lost requests makes it invalid, not only the repeat
    whose files the point holds. Rows without the counts (written before they were kept) pass."""
    out = []
    for r in per_repeat:
        f, ok = r.get("failed_requests"), r.get("succeeded_requests")
        if isinstance(f, int) and isinstance(ok, int):
            line = _too_many_failed(f, ok, max_failed_fraction)
            if line:
                out.append(f"repeat {r.get('repeat')} ({r.get('phase')}): {line}")
    return out


def point_problems(p: PointResult, rule: ValidityRule = ValidityRule()) -> list[str]:
    """Why the point is not valid (empty list: valid): complete, gates passed,
    failed fraction within bounds, tokens generated, AL >= 1 when speculative."""
    out = list(p.errors)
    if rule.require_complete and not p.complete:
        out.append(f"not complete: {p.reason}" if p.reason else "not complete (no COMPLETE marker)")
    if p.status not in (None, "complete"):
        out.append(f"status {p.status}" + (f": {p.reason}" if p.reason else ""))
    if not p.timing:
        out.append("timing.json missing: cannot tell whether the run generated tokens")
    else:
        tokens = p.total_output_tokens
        if tokens is None:
            out.append("timing.json has no output token count")
        elif tokens <= 0:
            out.append("the run generated 0 tokens")
        line = _too_many_failed(p.failed_requests, p.succeeded_turns or 0, rule.max_failed_fraction)
        if line:
            out.append(line)
    if p.speculative:
        al = p.average_al
        if not p.acceptance:
            out.append("speculative run without acceptance_rate.json")
        elif al is None:
            out.append("acceptance_rate.json has no Average_AL")
        elif al < 1.0:
            out.append(f"Average_AL {al:g} is below 1")
        elif rule.min_average_al is not None and al < rule.min_average_al:
            out.append(f"Average_AL {al:.3f} is below the gate {rule.gate_name}={rule.min_average_al}")
        if rule.min_tokens_per_step is not None:
            s = p.server_al
            if s is None or s < rule.min_tokens_per_step:
                shown = "unknown" if s is None else f"{s:.3f}"
                out.append(f"tokens per verify step {shown} is below the gate min_tokens_per_step="
                           f"{rule.min_tokens_per_step}")
    return out


def thin_sample(count, total) -> bool:
    """A statistic rests on too few samples to be a headline: fewer than 5,
    or fewer than half of the requests it should cover."""
    if count is None:
        return False
    return count < 5 or (bool(total) and count < 0.5 * total)
