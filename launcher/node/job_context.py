"""The node job's context: what every part of the job shares. Its spec and the engine
resolved from it once, its paths (launcher.contracts.job_paths), the Python its clients
run under, the job's API key, what it is doing (its phase) and why it ended, its log, its
failure line, and the stop signals it turns into Interrupted, judged against the Slurm
job's deadline. The job's parts hold it: the server group (launcher.node.servers), the
client run (launcher.node.client) and the phases (launcher.node.phases)."""
from __future__ import annotations

import logging
import os
import signal
import sys
import time
from functools import cached_property
from pathlib import Path
from typing import Optional

from launcher.contracts.job import NODE_HELD_SIGNALS, TIME_LIMIT_SIGNAL, TIME_LIMIT_WARNING_S, JobSpec
from launcher.contracts.job_paths import JobPaths
from launcher.engines import Engine, get_engine
from launcher.node import point_status, slurm_steps
from launcher.node.lifecycle import Interrupted, signal_name
from launcher.results.status import write_error

STOP_SIGNALS = tuple(getattr(signal, n) for n in NODE_HELD_SIGNALS if hasattr(signal, n))


class _UtcFormatter(logging.Formatter):
    converter = time.gmtime

    def formatTime(self, record, datefmt=None):  # noqa: N802 (logging's name)
        return time.strftime("%Y-%m-%dT%H:%M:%S", self.converter(record.created)) + f".{int(record.msecs):03d}Z"


class StopSignals:
    """The job's stop signals: the first one and when it came. While the job is stopping
    its processes (``cleaning``) a signal no longer interrupts it."""

    def __init__(self) -> None:
        self.received: Optional[int] = None
        self.received_unix: Optional[float] = None  # when the first one arrived (time.time())
        self.cleaning = False
        self._old_handlers: dict = {}

    def _on_signal(self, signum, _frame) -> None:
        if self.received is None:
            self.received = signum
            self.received_unix = time.time()
        # Logging from a handler can deadlock on the handler's lock: write directly.
        try:
            os.write(2, f"[specdec-node] received {signal_name(signum)}"
                        f"{' (already stopping)' if self.cleaning else ''}\n".encode())
        except OSError:
            pass

    def check(self) -> None:
        if self.received is not None and not self.cleaning:
            raise Interrupted(self.received)

    def install(self) -> None:
        """Our handlers, then the stop signals unblocked: job_entry starts the node with them
        blocked, so one that came while the node was importing is delivered here, to us."""
        for s in STOP_SIGNALS:
            try:
                self._old_handlers[s] = signal.signal(s, self._on_signal)
            except (ValueError, OSError):  # not the main thread
                pass
        if self._old_handlers:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    def restore(self) -> None:
        for s, h in self._old_handlers.items():
            try:
                signal.signal(s, h)
            except (ValueError, OSError):
                pass


class JobContext:
    """The spec (and its engine), the job's paths, its log (logs/job.log and stderr), its
    failure line (logs/error.txt) and its stop signals."""

    def __init__(self, spec: JobSpec, python: Optional[str] = None, spec_path: Optional[Path] = None):
        self._spec = spec
        self.paths = JobPaths(Path(spec.job_dir).resolve())
        self.spec_path = Path(spec_path or self.paths.spec).resolve()  # what the benchmark reads
        self.python = python or spec.python or sys.executable
        self.api_key: Optional[str] = None  # the job's key (start-up checks); never logged, never written
        self.phase = "start-up"  # what the job is doing: start-up, benchmark, lossless comparison
        self.end_cause: Optional[str] = None  # the job's end in words, for summary.json
        self.signals = StopSignals()
        self.slurm_at_start: Optional[point_status.SlurmJobView] = None  # scontrol's view when the job began
        self.logger = logging.getLogger(f"specdec.node.{id(self)}")

    @property
    def spec(self) -> JobSpec:
        return self._spec

    @spec.setter
    def spec(self, spec: JobSpec) -> None:
        """The spec the job runs from now on (its engine version resolved, or the parity
        server's launch): the same engine, resolved once."""
        if spec.engine != self._spec.engine:
            raise ValueError(f"the job's engine is {self._spec.engine}, not {spec.engine}")
        self._spec = spec

    @cached_property
    def engine(self) -> Engine:
        """The spec's engine, looked up once (on first use: an unknown name fails the job's start-up)."""
        return get_engine(self._spec.engine)

    @property
    def job_dir(self) -> Path:
        return self.paths.folder

    @property
    def disagg(self) -> bool:
        """topology=disagg: prefill and decode servers behind a router (launcher.node.disagg)."""
        return self.spec.topology is not None and self.spec.topology.kind == "disagg"

    # -- the job's log and its failure line

    def log(self, msg: str, level: int = logging.INFO) -> None:
        self.logger.log(level, msg)

    def open_log(self) -> None:
        self.logger.setLevel(logging.INFO)
        self.logger.propagate = False
        fmt = _UtcFormatter("%(asctime)s [specdec-node] %(message)s")
        for h in (logging.FileHandler(self.paths.job_log), logging.StreamHandler(sys.stderr)):
            h.setFormatter(fmt)
            self.logger.addHandler(h)

    def close_log(self) -> None:
        for h in list(self.logger.handlers):
            self.logger.removeHandler(h)
            h.close()

    def fail(self, reason: str) -> None:
        """Record the one-line failure reason (launcher/node/job_entry.py reads its first line)."""
        line = write_error(self.job_dir, reason)
        self.log(f"ERROR: {line}", logging.ERROR)

    # -- stop signals and Slurm's deadline

    def check_signal(self) -> None:
        """Raise Interrupted once a stop signal has arrived (not while the job stops its processes)."""
        self.signals.check()

    def note_slurm_deadline(self) -> None:
        """Under Slurm: read the job's start and time limit now, while scontrol surely
        answers, so a stop signal is judged against the deadline later (slurm_stop_state)."""
        self.slurm_at_start = slurm_steps.read_slurm_job(os.environ)
        v = self.slurm_at_start
        if v is not None and v.deadline_unix is not None:
            self.log(f"Slurm time limit {v.time_limit_s / 60:g} min: the job ends by "
                     f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(v.deadline_unix))} "
                     f"({TIME_LIMIT_SIGNAL} {TIME_LIMIT_WARNING_S} s ahead)")

    def slurm_stop_state(self, signum: int) -> Optional[str]:
        """Slurm's reason for the stop signal ``signum`` (None outside Slurm): the signal's
        arrival against the job's deadline, whatever scontrol's state by now."""
        view = slurm_steps.read_slurm_job(os.environ)
        if view is None:
            return None
        view = view.filled_from(self.slurm_at_start)
        arrived = self.signals.received_unix
        state = point_status.slurm_stop_state(view, signum=signum, signal_unix=arrived,
                                         warning_signum=getattr(signal, TIME_LIMIT_SIGNAL, None),
                                         warning_s=TIME_LIMIT_WARNING_S)
        deadline = view.deadline_unix
        self.log(f"{signal_name(signum)} arrived " + (
            f"{deadline - arrived:.0f} s before the Slurm deadline"
            if deadline is not None and arrived is not None else "(Slurm deadline unknown)")
            + f"; scontrol says {view.state or 'nothing'}: judged {state or 'unknown'}")
        return state
