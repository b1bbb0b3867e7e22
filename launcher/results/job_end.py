"""The end of a job, recorded in its files: every point's final status in
``summary.json`` (and ``progress.json`` closed), however the job ended.

The benchmark keeps summary.json and progress.json up to date while it runs;
when the job ends abnormally those files still say what was true *before* the
end. The node job (and, if the node job itself was SIGKILLed, the launcher)
finalizes them from what is on disk (a point folder with its COMPLETE marker
is complete), what the benchmark recorded (a failed point keeps its reason)
and what the job was doing (the points running get the cause in words, the
points never started are ``not_run``). Standard library only.
"""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from launcher.contracts.job import IDENTITY_KEYS, point_dir_name
from launcher.results.layout import COMPLETE_FILE
from launcher.results.status import read_progress, write_progress
from launcher.results.summary import PointRow, as_row, change_summary, point_rows, row_dicts

DONE = ("complete", "skipped")


def finalize_points(points: Sequence[Mapping | PointRow], complete_dirs: Iterable[str], running: Iterable[str],
                    cause: Optional[str], blamed: Iterable[str] = ()) -> list[dict]:
    """Pure: the final status of every point.

    ``points`` are summary rows (at least ``dir``, ``status``, ``reason``);
    ``complete_dirs`` the point folders complete on disk; ``running`` the folders
    the benchmark was running when the job ended; ``cause`` the end in words, or
    None for a normal end (then only disk truth is applied); ``blamed`` the points that
    were running when the cause began (a server's engine died, it stopped answering): a
    failure the benchmark recorded for one of them is put on the cause, its own words kept
    after it ("results unreadable" is what happened to the files, the cause is why).
    """
    complete, running, blamed = set(complete_dirs), set(running), set(blamed)
    out = []
    for row in map(as_row, points):
        d, st = row.dir, row.status or "pending"
        if d in complete:
            if st not in DONE:
                row = _set_status(row, "complete", None)
        elif st in DONE:  # said complete, but the marker is gone
            row = _set_status(row, "failed", "results incomplete on disk (no COMPLETE marker)")
        elif st == "failed" and row.reason and d in blamed and cause:
            row = _set_status(row, "failed", f"{cause} during this point (the benchmark: {row.reason})")
        elif st == "failed" and row.reason:
            pass  # the benchmark's own verdict
        elif d in running:
            row = _set_status(row, "failed", f"{cause or 'the job ended'} during this point")
        elif cause is not None:
            row = _set_status(row, "not_run", f"{cause} before this point started")
        out.append(row)
    return row_dicts(out)


def _set_status(row: PointRow, status: str, reason: Optional[str]) -> PointRow:
    return replace(row, status=status, reason=reason, held=row.held | {"status", "reason"})


def end_reason(cause: Optional[str], points: Sequence[Mapping | PointRow], running: Iterable[str] = ()) -> str:
    """Pure: one sentence for the launcher's table, e.g. "server exited with SIGKILL
    during point mtbench/t0_c2; 1 of 4 points complete, 1 failed, 2 not run"."""
    rows = [as_row(p) for p in points]
    running = [r for r in running if any(p.dir == r for p in rows)]
    counts: dict[str, int] = {}
    for p in rows:
        counts[p.status or "pending"] = counts.get(p.status or "pending", 0) + 1
    done = counts.pop("complete", 0) + counts.pop("skipped", 0)
    head = cause or "the job ended"
    if running:
        head += f" during point{'s' if len(running) > 1 else ''} {', '.join(running)}"
    tail = f"{done} of {len(points)} points complete" + "".join(
        f", {n} {k.replace('_', ' ')}" for k, n in sorted(counts.items()))
    return f"{head}; {tail}"


def job_end_record(rc: int, cause: Optional[str], reason: Optional[str], detail: Optional[str] = None) -> dict:
    """summary.json's ``job_end``: how the job ended, in words."""
    return {"exit_code": rc, "status": "succeeded" if rc == 0 else "failed",
            "cause": cause, "reason": reason, "detail": detail,
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def planned_rows(points: Iterable[tuple[str, float, int]]) -> list[dict]:
    """Summary rows (status pending) for the job's planned points (dataset, temperature, concurrency)."""
    return row_dicts(PointRow.planned(ds, float(t), int(c), point_dir_name(ds, t, c)) for ds, t, c in points)


def finalize_job_dir(job_dir: Path, *, rc: int, cause: Optional[str], reason: Optional[str],
                     points: Iterable[tuple[str, float, int]] = (), identity: Optional[Mapping] = None,
                     blamed: Iterable[str] = ()) -> dict:
    """Make summary.json (and progress.json) true after the job ended; returns the
    summary written. ``cause`` None means a normal end; ``reason`` is the job's own
    error line (logs/error.txt), kept as ``job_end.detail``. ``points`` are the job
    spec's (used when the benchmark never wrote summary.json), ``identity`` its
    recipe, server_id, method and num_speculative_tokens; ``blamed`` as in finalize_points."""
    job_dir = Path(job_dir)
    progress = read_progress(job_dir)
    # finalizing twice is harmless: the second time, what ran is in running_at_end
    running = (progress.running or progress.running_at_end or []) if progress else []
    holder: dict = {}

    def ended(summary: Optional[dict]) -> dict:
        summary, holder["words"] = _ended(job_dir, summary, rc, cause, reason, points, identity, running,
                                           blamed)
        return summary

    summary = change_summary(job_dir, ended)
    words = holder["words"]
    if progress is not None:
        done = sum(1 for p in point_rows(summary) if p.done)
        write_progress(job_dir, replace(progress, running=[], running_at_end=running, current=words or "finished",
                                        points_done_total=done, finished=True), durable=True)
    return summary


def _ended(job_dir: Path, summary: Optional[dict], rc: int, cause, reason, points, identity,
           running: list, blamed: Iterable[str] = ()) -> tuple[dict, Optional[str]]:
    """The summary made true after the job ended, and the end in words."""
    if summary is None or not point_rows(summary):
        summary = {**(summary or {}), "schema_version": 1, "save_dir": str(job_dir),
                   "points": planned_rows(points)}
        for k in IDENTITY_KEYS:
            summary.setdefault(k, (identity or {}).get(k))
    complete = [p.dir for p in point_rows(summary) if p.dir and (job_dir / p.dir / COMPLETE_FILE).is_file()]
    point_cause = cause or (reason if rc != 0 else None)  # pending points of a failed job were not run
    summary["points"] = finalize_points(point_rows(summary), complete, running, point_cause, blamed)
    if cause:
        words = end_reason(cause, summary["points"], running)
    elif rc != 0:  # the benchmark ended on its own and said why
        words = reason or end_reason(None, summary["points"], running)
    else:
        words = None
    summary["job_end"] = job_end_record(rc, cause, words, reason)
    return summary, words
