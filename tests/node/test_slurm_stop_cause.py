"""Why Slurm stopped the job, judged by the clock, whatever the order in which the
signal, submitit's own handler and the node's scontrol query happen (issue 27: the
time limit read `stopped by Slurm with SIGUSR2 (job state FAILED)` when submitit's
SIGUSR2 handler had ended the job's batch step before the node asked scontrol)."""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from launcher.node.point_status import (SlurmJobView, end_cause, parse_scontrol_job, slurm_stop_state,
                                   slurm_timestamp)
from launcher.contracts.job import TIME_LIMIT_WARNING_S

USR2, TERM = signal.SIGUSR2, signal.SIGTERM
START = 1_800_000_000.0
LIMIT = 3600.0  # a one-hour job
DEADLINE = START + LIMIT


def judged(state: str, signum: int, at: float, *, view: SlurmJobView | None = None, start_view=None) -> str:
    """end_cause for a stop by ``signum`` arriving at ``at``, scontrol showing ``state``."""
    v = view if view is not None else SlurmJobView(state=state, start_unix=START, time_limit_s=LIMIT)
    st = slurm_stop_state(v.filled_from(start_view), signum=signum, signal_unix=at, warning_signum=USR2,
                          warning_s=TIME_LIMIT_WARNING_S)
    return end_cause(signum=signum, slurm_state=st)


TIME_LIMIT = "the Slurm time limit was reached"
WARNED = DEADLINE - TIME_LIMIT_WARNING_S  # when Slurm sends --signal=USR2@120


@pytest.mark.parametrize("state_when_asked", [
    "RUNNING",      # the node asked first
    "COMPLETING",   # Slurm was already ending the job's steps
    "FAILED",       # submitit's handler ended its process and the batch step first (the flaky case)
    "COMPLETED",    # the batch step ended with status 0 first
    "TIMEOUT",      # the limit itself passed before the node asked
    "",             # scontrol did not answer
])
def test_the_time_limit_warning_is_the_time_limit_whatever_scontrol_says_by_then(state_when_asked):
    assert judged(state_when_asked, USR2, WARNED) == TIME_LIMIT
    assert judged(state_when_asked, USR2, WARNED + 30) == TIME_LIMIT  # the node was busy: handled later


def test_the_warning_judged_from_the_start_view_when_scontrol_no_longer_answers():
    at_start = SlurmJobView(state="RUNNING", start_unix=START, time_limit_s=LIMIT, run_s=1)
    assert judged("", USR2, WARNED, view=SlurmJobView(), start_view=at_start) == TIME_LIMIT
    # a limit raised after the start (scontrol update TimeLimit=...) counts: the view at the stop wins
    later = SlurmJobView(state="RUNNING", start_unix=START, time_limit_s=2 * LIMIT)
    assert judged("", USR2, WARNED, view=later, start_view=at_start).startswith("stopped by Slurm with SIGUSR2")


def test_sigterm_at_the_limit_is_the_limit_and_before_it_a_cancel():
    # without the warning (or after it was ignored) Slurm ends the job with SIGTERM at the limit
    for state in ("COMPLETING", "RUNNING", "FAILED", "TIMEOUT"):
        assert judged(state, TERM, DEADLINE) == TIME_LIMIT
    assert judged("COMPLETING", TERM, START + 600) == "cancelled by Slurm (scancel)"
    assert judged("CANCELLED", TERM, START + 600) == "cancelled by Slurm (scancel)"
    assert judged("CANCELLED", TERM, DEADLINE) == "cancelled by Slurm (scancel)"  # Slurm's own verdict stands
    assert judged("PREEMPTED", TERM, START + 600) == "preempted by Slurm"
    assert judged("FAILED", TERM, START + 600) == "stopped by Slurm with SIGTERM (job state FAILED)"


def test_sigterm_within_the_warning_lead_is_not_the_limit():
    """Only the warning signal carries the lead: a SIGTERM 100 s early is a cancel."""
    assert judged("COMPLETING", TERM, DEADLINE - 100) == "cancelled by Slurm (scancel)"


def test_the_warning_signal_well_before_the_limit_is_not_the_limit():
    early = WARNED - 15 - 1  # beyond the slack
    assert judged("RUNNING", USR2, early) == "stopped by Slurm with SIGUSR2 (job state RUNNING)"
    assert judged("FAILED", USR2, early) == "stopped by Slurm with SIGUSR2 (job state FAILED)"
    assert judged("PREEMPTED", USR2, early) == "preempted by Slurm"
    assert judged("RUNNING", USR2, WARNED - 10) == TIME_LIMIT  # within the slack


def test_a_job_shorter_than_the_warning_lead_is_warned_at_once():
    """cluster.time_min=1 (the e2e test): Slurm warns at the start, 120 s ahead of a 60 s limit."""
    v = SlurmJobView(state="FAILED", start_unix=START, time_limit_s=60)
    assert judged("", USR2, START + 2, view=v) == TIME_LIMIT


def test_no_start_time_falls_back_to_the_run_time_asked_now():
    v = parse_scontrol_job("JobId=5 JobState=COMPLETING RunTime=00:00:42 TimeLimit=00:01:00")
    assert v.start_unix is None
    assert slurm_stop_state(v, signum=TERM, signal_unix=None) == "CANCELLED"
    v = parse_scontrol_job("JobId=5 JobState=COMPLETING RunTime=00:01:01 TimeLimit=00:01:00")
    assert slurm_stop_state(v, signum=TERM, signal_unix=None) == "TIMEOUT"
    assert slurm_stop_state(SlurmJobView(), signum=TERM, signal_unix=time.time()) == ""
    assert end_cause(signum=TERM, slurm_state="") == "stopped by Slurm with SIGTERM (job state unknown)"


def test_scontrol_line_parsed():
    line = ("JobId=1 JobName=specdec-smoke UserId=root(0) JobState=FAILED Reason=NonZeroExitCode "
            "RunTime=00:00:27 TimeLimit=00:01:00 SubmitTime=2026-12-05T01:40:49 StartTime=2026-12-05T01:40:50 "
            "EndTime=2026-12-05T01:41:17 Partition=debug")
    v = parse_scontrol_job(line)
    assert (v.state, v.time_limit_s, v.run_s) == ("FAILED", 60, 27)
    assert v.start_unix == time.mktime((2026, 12, 5, 1, 40, 50, 0, 0, -1))
    assert v.deadline_unix == v.start_unix + 60
    assert parse_scontrol_job("JobId=1 StartTime=Unknown TimeLimit=UNLIMITED").deadline_unix is None
    assert slurm_timestamp("None") is None


FAKE_NODE = """
import signal, sys, time
from pathlib import Path
out = Path(sys.argv[1])
def got(signum, frame):
    out.write_text(f"{signum} {time.time()}")
signal.signal(signal.SIGUSR2, got)
signal.signal(signal.SIGTERM, got)
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGUSR2, signal.SIGTERM])  # as StopSignals.install
Path(sys.argv[2]).write_text("up")
while not out.exists():
    time.sleep(0.02)
time.sleep(1.0)  # the node stops its servers and records the end
Path(sys.argv[2]).write_text(f"ended {time.time()}")
sys.exit(128 + signal.SIGUSR2)
"""


class SubmititEnded(Exception):
    pass


def test_run_job_lets_the_node_end_the_job_before_submitit_handles_sigusr2(tmp_path, monkeypatch):
    """submitit's SIGUSR2 handler (installed before run_job runs) ended the job at once; now
    the node gets the signal, ends, and submitit's handler runs after it."""
    from launcher.node import job_entry as launcher_job

    got, state = tmp_path / "got", tmp_path / "state"
    monkeypatch.setattr(launcher_job, "node_command",
                        lambda spec_path: [sys.executable, "-c", FAKE_NODE, str(got), str(state)])
    (tmp_path / "job.json").write_text("{}")
    calls = []

    def submitit_handler(signum, frame):
        calls.append((signum, time.time()))
        raise SubmititEnded("Job not requeued because: timed-out and not checkpointable.")

    old = signal.signal(USR2, submitit_handler)
    try:
        def send():
            deadline = time.time() + 30
            while not state.exists() and time.time() < deadline:
                time.sleep(0.02)
            import os
            os.kill(os.getpid(), USR2)  # only this process: the node hears of it from run_job
        threading.Thread(target=send, daemon=True).start()
        with pytest.raises(SubmititEnded):
            launcher_job.run_job({"job_dir": str(tmp_path), "server_id": "x"})
    finally:
        signal.signal(USR2, old)
    assert got.read_text().split()[0] == str(int(USR2))  # the node got the warning
    ended = float(state.read_text().split()[1])
    assert len(calls) == 1 and calls[0][1] >= ended  # submitit's handler ran after the node ended
    assert signal.getsignal(USR2) is old


SLOW_NODE = """
import signal, sys, time
from pathlib import Path
time.sleep(float(sys.argv[2]))  # the node still importing: no handler yet
signal.signal(signal.SIGUSR2, lambda signum, frame: Path(sys.argv[1]).write_text(str(signum)))
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGUSR2])  # as StopSignals.install
time.sleep(0.2)
"""


def test_a_warning_before_the_node_has_its_handlers_waits_for_them(tmp_path, monkeypatch):
    """Slurm's SIGUSR2 reaches every process of the job. One that reached the node while it was
    still importing ended it by the signal's default action (exit -12, no summary.json): the node
    now starts with the stop signals blocked and takes them once its handlers are in place."""
    from launcher.node import job_entry as launcher_job

    got = tmp_path / "got"
    monkeypatch.setattr(launcher_job, "node_command",
                        lambda spec_path: [sys.executable, "-c", SLOW_NODE, str(got), "0.5"])
    real_popen = subprocess.Popen

    def popen_then_warn(*args, **kwargs):  # the warning at once, long before the node's handler
        proc = real_popen(*args, **kwargs)
        proc.send_signal(USR2)
        return proc

    monkeypatch.setattr(launcher_job.subprocess, "Popen", popen_then_warn)
    (tmp_path / "job.json").write_text("{}")
    result = launcher_job.run_job({"job_dir": str(tmp_path), "server_id": "x"})
    assert result["exit_code"] == 0  # not -12: the signal waited for the node's handler
    assert got.read_text() == str(int(USR2))
    assert not signal.pthread_sigmask(signal.SIG_BLOCK, [])  # run_job gave back its mask
