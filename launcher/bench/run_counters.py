"""The server-counter cross-check of one multi-point AIPerf run: its /metrics window must move
by exactly the verify steps and accepted drafts its points counted (docs/results-layout.md,
``prometheus_runs``). Counting helpers read each point's (and repeat's) own figures."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from launcher.bench import aiperf_runner as ar
from launcher.bench.bench_run import server_start
from launcher.bench.metrics import profiling_records, read_profile_export, RecordError
from launcher.results import read_point
from launcher.results.repeats import record as repeat_record


def sweep_prometheus_check(window: Optional[dict], steps: int, accepted: int,
                           stream_counted: bool = False) -> Optional[dict]:
    """The server-side cross-check over the whole multi-point run. Pure. A phase's own
    /metrics window can take a neighbouring phase's steps at a boundary scrape (its
    Prometheus_AL is then null); the run's window has no neighbour, so its counters must
    move by exactly the points' own per-request stats summed. Counted from stream
    chunks, the decode chunks must equal the server's verify steps (a merged chunk makes
    fewer), and the accepted drafts in chunks may only be fewer than the server's (drafts
    accepted past EOS or max_tokens never reach the stream)."""
    if window is None or not steps:
        return None
    if stream_counted:
        return {"num_drafts": window["num_drafts"], "num_accepted_tokens": window["num_accepted_tokens"],
                "num_spec_steps": steps, "num_accepted_draft_tokens": accepted, "counted_from": "stream_chunks",
                "Prometheus_AL": 1.0 + window["num_accepted_tokens"] / window["num_drafts"]
                if window["num_drafts"] else None,
                "Server_AL": 1.0 + accepted / steps,
                "matches": window["num_drafts"] == steps and accepted <= window["num_accepted_tokens"]}
    return {"num_drafts": window["num_drafts"], "num_accepted_tokens": window["num_accepted_tokens"],
            "num_spec_steps": steps, "num_accepted_draft_tokens": accepted,
            "Prometheus_AL": 1.0 + window["num_accepted_tokens"] / window["num_drafts"] if window["num_drafts"] else None,
            "Server_AL": 1.0 + accepted / steps,
            "matches": window["num_drafts"] == steps and window["num_accepted_tokens"] == accepted,
            # vLLM's per-position acceptance over the run's window (accepted at position i / drafts)
            "per_position_rates": ([c / window["num_drafts"] for c in window["accepted_per_position"]]
                                   if window.get("accepted_per_position") and window["num_drafts"] else None)}


def point_counts(save_dir: Path, o, why: Optional[str], repeats: bool) -> dict:
    """A complete point's verify steps and accepted drafts (over all its repeats on this server start)."""
    ext = read_point(save_dir / o.dir).acc_ext if why is None and o.status == "complete" else {}
    if repeats and ext:  # the run's window holds every repeat's steps of this start
        per = [r for r in (repeat_record.read(save_dir / o.dir) or {}).get("per_repeat") or []
               if int(r.get("server_start") or 1) == server_start()]
        counts = [(r.get("num_spec_steps"), r.get("num_accepted_draft_tokens")) for r in per]
        ext = ({"num_spec_steps": sum(c[0] for c in counts), "num_accepted_draft_tokens": sum(c[1] for c in counts)}
               if counts and all(c[0] is not None and c[1] is not None for c in counts) else {})
    return ext


def phase_steps(group_dir: Path, name: str) -> Optional[tuple[int, int]]:
    """(verify steps, accepted drafts) of one phase's successful requests, from its
    records; None when they cannot be read (or carry no stats)."""

    dst = group_dir / "points" / name
    if ar.collect_phase(group_dir, name, dst) is not None:
        return None
    try:
        ok = profiling_records(read_profile_export(dst / "profile_export.jsonl"))[0]
    except (RecordError, ValueError, OSError):
        return None
    if any(r.spec is None for r in ok):
        return None
    return sum(r.spec.steps for r in ok), sum(r.spec.accepted for r in ok)
