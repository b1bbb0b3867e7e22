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
import time
from dataclasses import dataclass, replace
from typing import Optional


def signal_words(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def returncode_words(rc: int) -> str:
    """`code 3` or `SIGKILL` for a process's return code (negative: a signal)."""
    return signal_words(-rc) if rc < 0 else f"code {rc}"


def end_cause(*, bench_rc: Optional[int] = None,
              signum: Optional[int] = None, slurm_state: Optional[str] = None,
              phase: str = "benchmark") -> str:
    """The job's end in words. First match wins: a stop signal (with Slurm's view of
    the job when known), the benchmark exiting. (A server's failure is put in words by
    launcher.node.server_fault, which names the server, its signal and its log.)"""
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


@dataclass(frozen=True)
class SlurmJobView:
    """What ``scontrol -o show job`` says of this job: its state, start, time limit and
    run time (None where it does not say: UNLIMITED, Unknown, no answer)."""
    state: str = ""
    start_unix: Optional[float] = None
    time_limit_s: Optional[float] = None
    run_s: Optional[float] = None

    @property
    def deadline_unix(self) -> Optional[float]:
        """When the time limit ends the job (StartTime + TimeLimit)."""
        if self.start_unix is None or self.time_limit_s is None:
            return None
        return self.start_unix + self.time_limit_s

    def filled_from(self, earlier: Optional["SlurmJobView"]) -> "SlurmJobView":
        """This view with the start and limit of ``earlier`` where this one lacks them
        (scontrol did not answer at the stop; the node read them when it started)."""
        if earlier is None:
            return self
        return replace(self, start_unix=self.start_unix if self.start_unix is not None else earlier.start_unix,
                       time_limit_s=self.time_limit_s if self.time_limit_s is not None else earlier.time_limit_s)


def slurm_timestamp(v: str) -> Optional[float]:
    """scontrol's ``2026-12-05T01:40:50`` (this host's local time, as scontrol prints it) as
    a unix time; None for Unknown/None/junk."""
    try:
        return time.mktime(time.strptime(v, "%Y-%m-%dT%H:%M:%S"))
    except (ValueError, OverflowError):
        return None


def parse_scontrol_job(line: str) -> SlurmJobView:
    """Pure: a ``scontrol -o show job`` line (or its multi-line form) as a SlurmJobView."""
    fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
    return SlurmJobView(state=fields.get("JobState", ""), start_unix=slurm_timestamp(fields.get("StartTime", "")),
                        time_limit_s=slurm_seconds(fields.get("TimeLimit", "")),
                        run_s=slurm_seconds(fields.get("RunTime", "")))


# Slurm's own word for why it stopped the job; anything else (RUNNING and COMPLETING,
# which the job itself sees while it is being stopped, FAILED or COMPLETED once the job's
# batch step ended first) says nothing about the stop, and the clock decides.
SLURM_STOP_VERDICTS = ("TIMEOUT", "DEADLINE", "CANCELLED", "PREEMPTED", "NODE_FAIL")


def slurm_stop_state(view: SlurmJobView, *, signum: int, signal_unix: Optional[float],
                     warning_signum: Optional[int] = None, warning_s: float = 0.0, slack_s: float = 15.0) -> str:
    """Pure: why Slurm stopped the job, in Slurm's state words (TIMEOUT, CANCELLED, ...),
    from the stop signal ``signum``, when it reached the job (``signal_unix``) and ``view``.

    The time limit is judged by the clock, never by the order in which the job's processes
    end: a signal at the deadline (StartTime + TimeLimit, less ``slack_s``), or the time-limit
    warning ``warning_signum`` within ``warning_s`` of it (Slurm sends it that far ahead:
    --signal=USR2@N), is TIMEOUT whatever state scontrol shows by the time it is asked
    (submitit's own SIGUSR2 handler ends its process at once, so the job may already read
    FAILED). Slurm's own verdicts (CANCELLED, PREEMPTED, ...) stand. Otherwise a stop
    while the job is RUNNING or COMPLETING is a cancel (scancel), unless it is the warning
    signal early (preemption or `scancel --signal`): then the state as it is."""
    st = view.state.upper()
    if st.startswith(SLURM_STOP_VERDICTS):
        return next(v for v in SLURM_STOP_VERDICTS if st.startswith(v))
    ahead = warning_s if warning_signum is not None and signum == warning_signum else 0.0
    deadline = view.deadline_unix
    if deadline is not None and signal_unix is not None:
        if signal_unix >= deadline - ahead - slack_s:
            return "TIMEOUT"
    elif view.run_s is not None and view.time_limit_s is not None and st in ("RUNNING", "COMPLETING"):
        if view.run_s >= view.time_limit_s - ahead - slack_s:  # no start time: the run time, asked now
            return "TIMEOUT"
    if st in ("RUNNING", "COMPLETING") and ahead == 0.0:
        return "CANCELLED"
    return view.state
