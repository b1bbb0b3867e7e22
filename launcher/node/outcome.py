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

``end_cause`` is pure; the files are finalized by
``launcher.results.job_end.finalize_job_dir`` (the results package owns them).
Standard library only (the node side runs without the launcher's dependencies).
"""
from __future__ import annotations

import signal
from typing import Optional


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
