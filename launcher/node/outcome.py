"""What each client point's status is after the job ended, however it ended.

The benchmark keeps summary.json and progress.json up to date while it runs;
when the job ends abnormally (the server died, the benchmark was killed, Slurm
cancelled the job or its time ran out) those files still say what was true
*before* the end. The node job (and, if the node job itself was SIGKILLed, the
launcher) finalizes them from three facts:

- what is on disk: a point folder with its COMPLETE marker is complete;
- what the benchmark recorded: a point it marked failed keeps its reason;
- what the job was doing: the points the benchmark was running
  (progress.json ``running``) get the cause of the end in words ("server
  exited with SIGKILL during this point"), the points never started are
  ``not_run``.

``finalize_points`` and ``end_cause`` are pure; ``finalize_job_dir`` reads and
writes the files. Standard library only (the node side runs without the
launcher's dependencies).
"""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

COMPLETE_MARKER = "COMPLETE"
DONE = ("complete", "skipped")


def signal_words(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def returncode_words(rc: int) -> str:
    """`code 3` or `SIGKILL` for a process's return code (negative: a signal)."""
    return signal_words(-rc) if rc < 0 else f"code {rc}"


def end_cause(*, server_rc: Optional[int] = None, bench_rc: Optional[int] = None,
              signum: Optional[int] = None, slurm_state: Optional[str] = None,
              phase: str = "benchmark") -> str:
    """The job's end in words. First match wins: a stop signal (with Slurm's view of
    the job when known), the server exiting, the benchmark exiting."""
    if signum is not None:
        st = (slurm_state or "").upper()
        if st.startswith("TIMEOUT"):
            return "the Slurm time limit was reached"
        if st.startswith("CANCELLED"):
            return "cancelled by Slurm (scancel)"
        if st.startswith("PREEMPTED"):
            return "preempted by Slurm"
        if slurm_state is not None:
            return f"stopped by Slurm with {signal_words(signum)} (job state {slurm_state or 'unknown'})"
        return f"stopped by {signal_words(signum)}"
    if server_rc is not None:
        return f"server exited with {returncode_words(server_rc)}"
    if bench_rc is not None:
        return f"the {phase} exited with {returncode_words(bench_rc)}"
    return "the job ended"


def slurm_seconds(v: str) -> Optional[float]:
    """Slurm's `[D-]HH:MM:SS` / `MM:SS` durations in seconds (None for UNLIMITED or junk)."""
    days = 0
    if "-" in v:
        d, v = v.split("-", 1)
        if not d.isdigit():
            return None
        days = int(d)
    parts = v.split(":")
    if not parts or not all(x.isdigit() for x in parts) or len(parts) > 3:
        return None
    secs = 0
    for x in parts:
        secs = secs * 60 + int(x)
    return days * 86400 + secs


def slurm_state_from_scontrol(line: str, slack_s: float = 15.0) -> str:
    """Pure: the state of a job from `scontrol -o show job` while it is being
    stopped. Slurm shows COMPLETING (not CANCELLED or TIMEOUT) to the job itself,
    so a run time at the time limit means TIMEOUT, anything else CANCELLED."""
    fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
    state = fields.get("JobState", "")
    if state and state not in ("COMPLETING", "RUNNING"):
        return state
    run, limit = slurm_seconds(fields.get("RunTime", "")), slurm_seconds(fields.get("TimeLimit", ""))
    if run is not None and limit is not None and run >= limit - slack_s:
        return "TIMEOUT"
    return "CANCELLED" if state else ""


def finalize_points(points: Sequence[Mapping], complete_dirs: Iterable[str], running: Iterable[str],
                    cause: Optional[str]) -> list[dict]:
    """Pure: the final status of every point.

    ``points`` are summary rows (at least ``dir``, ``status``, ``reason``);
    ``complete_dirs`` the point folders complete on disk; ``running`` the folders
    the benchmark was running when the job ended; ``cause`` the end in words, or
    None for a normal end (then only disk truth is applied).
    """
    complete, running = set(complete_dirs), set(running)
    out = []
    for p in points:
        row = dict(p)
        d, st = row.get("dir"), row.get("status") or "pending"
        if d in complete:
            if st not in DONE:
                row["status"], row["reason"] = "complete", None
        elif st in DONE:  # said complete, but the marker is gone
            row["status"], row["reason"] = "failed", "results incomplete on disk (no COMPLETE marker)"
        elif st == "failed" and row.get("reason"):
            pass  # the benchmark's own verdict
        elif d in running:
            row["status"] = "failed"
            row["reason"] = f"{cause or 'the job ended'} during this point"
        elif cause is not None:
            row["status"], row["reason"] = "not_run", f"{cause} before this point started"
        out.append(row)
    return out


def end_reason(cause: Optional[str], points: Sequence[Mapping], running: Iterable[str] = ()) -> str:
    """Pure: one sentence for the launcher's table, e.g. "server exited with SIGKILL
    during point mtbench/t0_c2; 1 of 4 points complete, 1 failed, 2 not run"."""
    running = [r for r in running if any(p.get("dir") == r for p in points)]
    counts: dict[str, int] = {}
    for p in points:
        counts[p.get("status") or "pending"] = counts.get(p.get("status") or "pending", 0) + 1
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


# ---------------------------------------------------------------- files


def _read_json(p: Path) -> Optional[dict]:
    try:
        v = json.loads(p.read_text())
        return v if isinstance(v, dict) else None
    except (OSError, ValueError):
        return None


def _write_json_atomic(p: Path, obj) -> None:
    tmp = p.with_name(f".{p.name}.tmp.{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=2) + "\n")
    os.replace(tmp, p)


def point_dir_name(dataset: str, temperature: float, concurrency: int) -> str:
    return f"{dataset}/t{float(temperature):g}_c{int(concurrency)}"


def _flag_values(args: Sequence[str], flag: str) -> list[str]:
    out: list[str] = []
    args = list(args)
    for i, a in enumerate(args):
        if a == flag:
            for v in args[i + 1:]:
                if v.startswith("--"):
                    break
                out.append(v)
        elif a.startswith(flag + "="):
            out.append(a.split("=", 1)[1])
    return out


def planned_points(bench_args: Sequence[str]) -> list[dict]:
    """The sweep's points from the benchmark's arguments (when the benchmark never
    wrote summary.json): datasets x temperatures x concurrencies, its order."""
    datasets = [n for n in ("mtbench", "specbench") if _flag_values(bench_args, f"--{n}")]
    datasets += [f"speed_{Path(v).stem}" for v in _flag_values(bench_args, "--speed")]
    temps = _flag_values(bench_args, "--temperature") or ["0"]
    concs = _flag_values(bench_args, "--concurrency") or ["1"]
    rows = []
    for ds in datasets:
        for t in temps:
            for c in concs:
                try:
                    d = point_dir_name(ds, float(t), int(c))
                except ValueError:
                    continue
                rows.append({"dataset": ds, "temperature": float(t), "concurrency": int(c), "dir": d,
                             "status": "pending", "reason": None})
    return rows


def finalize_job_dir(job_dir: Path, *, rc: int, cause: Optional[str], reason: Optional[str],
                     bench_args: Sequence[str] = ()) -> dict:
    """Make summary.json (and progress.json) true after the job ended; returns the
    summary written. ``cause`` None means a normal end; ``reason`` is the job's own
    error line (logs/error.txt), kept as ``job_end.detail``."""
    job_dir = Path(job_dir)
    summary = _read_json(job_dir / "summary.json")
    if summary is None or not summary.get("points"):
        job = _read_json(job_dir / "job.json") or {}
        points = planned_points(job.get("bench_args") or bench_args)
        summary = {**(summary or {}), "schema_version": 1, "save_dir": str(job_dir),
                   "points": points}
        for k in ("recipe", "server_id", "method", "num_speculative_tokens"):
            summary.setdefault(k, job.get(k))
    progress = _read_json(job_dir / "progress.json") or {}
    running = progress.get("running") or progress.get("running_at_end") or []  # finalizing twice is harmless
    complete = [p["dir"] for p in summary["points"]
                if p.get("dir") and (job_dir / p["dir"] / COMPLETE_MARKER).is_file()]
    point_cause = cause or (reason if rc != 0 else None)  # pending points of a failed job were not run
    summary["points"] = finalize_points(summary["points"], complete, running, point_cause)
    if cause:
        words = end_reason(cause, summary["points"], running)
    elif rc != 0:  # the benchmark ended on its own and said why
        words = reason or end_reason(None, summary["points"], running)
    else:
        words = None
    summary["job_end"] = job_end_record(rc, cause, words, reason)
    _write_json_atomic(job_dir / "summary.json", summary)
    if progress:
        done = sum(1 for p in summary["points"] if p["status"] in DONE)
        progress.update({"running": [], "running_at_end": running, "current": words or "finished",
                         "points_done_total": done,
                         "finished": True})
        _write_json_atomic(job_dir / "progress.json", progress)
    return summary
