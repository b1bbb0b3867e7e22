"""Did the engine apply a dynamic k schedule? (docs/slo.md) Pure.

vLLM 0.32's ``SpeculativeConfig.num_speculative_tokens_per_batch_size`` gives k per
decode batch size: ``[[start, end, k], ...]`` (inclusive ranges; sizes past the last
range keep its k). A server that applies it never accepts more than k(b) drafts in a
step taken at batch size b. The batch size at a step is not recorded, so each request
is judged against the batch sizes it went through: the requests of the point in flight
over its lifetime (from AIPerf's start and end times) range from b_min to b_max, and
its verify steps may accept at most max k(b) over b in [b_min, b_max]. A request whose
longest step accepted more broke the schedule; so did a point whose per-position
acceptance counter moved beyond the largest k any of its requests was allowed. Such a
point is marked "schedule not applied by the engine" and is no measurement of the
schedule.
"""
from __future__ import annotations

import bisect
from typing import Optional, Sequence

NOT_APPLIED = "schedule not applied by the engine"


def k_for_batch(schedule: Sequence[Sequence[int]], b: int) -> int:
    """k the schedule gives batch size ``b``."""
    entries = sorted((int(s), int(e), int(k)) for s, e, k in schedule)
    k = entries[0][2]
    for s, e, kk in entries:
        if b >= s:
            k = kk
    return k


def allowed_k(schedule, b_min: int, b_max: int) -> int:
    return max(k_for_batch(schedule, b) for b in range(max(1, b_min), max(1, b_max) + 1))


def in_flight_counts(intervals: Sequence[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """(event times, requests in flight from each time to the next): a sweep over the
    starts and ends."""
    delta: dict[int, int] = {}
    for a, b in intervals:
        delta[a] = delta.get(a, 0) + 1
        delta[b] = delta.get(b, 0) - 1
    times = sorted(delta)
    counts, n = [], 0
    for t in times:
        n += delta[t]
        counts.append(n)
    return times, counts


def in_flight_range(intervals: Sequence[tuple[int, int]], i: int, sweep=None) -> tuple[int, int]:
    """(min, max) number of requests in flight (itself included) over request i's lifetime."""
    times, counts = sweep or in_flight_counts(intervals)
    s, e = intervals[i]
    lo, hi = bisect.bisect_left(times, s), bisect.bisect_left(times, e)
    window = counts[lo:hi] or [1]
    return max(1, min(window)), max(1, max(window))


def check_point(schedule, requests: Sequence[dict], per_position_counts: Optional[Sequence[float]] = None,
                tolerance_steps: int = 0, max_violating_share: float = 0.5) -> dict:
    """requests: {start_ns, end_ns, max_accepted (the most drafts one verify step accepted)}.

    The client's in-flight count is not the server's decode batch (a request in flight
    may be queued or in prefill, or finished on the server before its last bytes
    arrived), so one request over its allowed k proves nothing. The requests that tell
    are the *constrained* ones: allowed fewer drafts than the server's k (the schedule's
    largest). The schedule is not applied when more than ``max_violating_share`` of them
    accepted more than allowed (an engine that ignores it: nearly all do, measured), or
    the per-position counters moved beyond every request's allowed k; with no
    constrained request the point cannot tell (applied None).
    Returns {applied, constrained_requests, violating_requests, ..., note}."""
    ok = [r for r in requests if r.get("start_ns") is not None and r.get("end_ns") is not None
          and r.get("max_accepted") is not None]
    intervals = [(int(r["start_ns"]), int(r["end_ns"])) for r in ok]
    k_server = max(int(e[2]) for e in schedule)
    viol, constrained = [], 0
    largest = 0
    sweep = in_flight_counts(intervals)
    for i, r in enumerate(ok):
        lo, hi = in_flight_range(intervals, i, sweep)
        k = allowed_k(schedule, lo, hi)
        largest = max(largest, k)
        if k < k_server:
            constrained += 1
            if int(r["max_accepted"]) > k:
                viol.append({"request": r.get("id"), "in_flight": [lo, hi], "allowed_k": k,
                             "max_accepted": int(r["max_accepted"])})
    beyond = None
    if per_position_counts is not None and largest:
        beyond = float(sum(per_position_counts[largest:]))
    counter_broken = beyond is not None and beyond > tolerance_steps
    share = len(viol) / constrained if constrained else None
    if counter_broken or (share is not None and share > max_violating_share):
        applied = False
    elif share is None:
        applied = None
    else:
        applied = True
    note = NOT_APPLIED if applied is False else (
        "cannot tell: no request was always in a batch the schedule gives a smaller k" if applied is None and ok
        else None)
    return {"applied": applied, "requests_checked": len(ok), "constrained_requests": constrained,
            "violating_requests": len(viol), "violating_share": share, "violations": viol[:10],
            "largest_allowed_k": largest, "accepted_beyond_largest_allowed_position": beyond, "note": note}
