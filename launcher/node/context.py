"""The node job's context: its spec and paths, its log, its failure line and the stop
signals, each judged against the Slurm job's deadline (JobContext, the base of launcher.node.serve_and_bench.NodeJob); and what a phase
may use of the job (NodeContext): that, plus the server group's start and stop, a
server's environment and API key, and the client run with its watchdog. Phases
(launcher.node.phases, launcher.node.disagg) receive it, never the job's private members."""
from __future__ import annotations

import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Optional, Protocol

from launcher.contracts.job import SPEC_FILE, TIME_LIMIT_SIGNAL, TIME_LIMIT_WARNING_S, JobSpec
from launcher.engines import Engine, ServerKey, get_engine
from launcher.node import outcome, slurm_steps
from launcher.node.lifecycle import Interrupted, ServerProcess, signal_name
from launcher.results.status import write_error

STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGINT", "SIGHUP", "SIGUSR2") if hasattr(signal, n))


class _UtcFormatter(logging.Formatter):
    converter = time.gmtime

    def formatTime(self, record, datefmt=None):  # noqa: N802 (logging's name)
        return time.strftime("%Y-%m-%dT%H:%M:%S", self.converter(record.created)) + f".{int(record.msecs):03d}Z"


class JobContext:
    """The spec, the job's paths, its log (logs/job.log and stderr), its failure line
    (logs/error.txt) and the stop signals it turns into Interrupted."""

    def __init__(self, spec: JobSpec, python: Optional[str] = None, spec_path: Optional[Path] = None):
        self.spec = spec
        self.spec_path = Path(spec_path or Path(spec.job_dir) / SPEC_FILE).resolve()  # what the benchmark reads
        self.job_dir = Path(spec.job_dir).resolve()
        self.logs = self.job_dir / "logs"
        self.python = python or spec.python or sys.executable
        self.phase = "start-up"  # what the job is doing: start-up, benchmark, lossless comparison
        self.end_cause: Optional[str] = None  # the job's end in words, for summary.json
        self._signal: Optional[int] = None
        self._signal_unix: Optional[float] = None  # when the first stop signal arrived (time.time())
        self.slurm_at_start: Optional[outcome.SlurmJobView] = None  # scontrol's view when the job began
        self._cleaning = False
        self._old_handlers: dict = {}
        self.logger = logging.getLogger(f"specdec.node.{id(self)}")

    @property
    def engine(self) -> Engine:
        return get_engine(self.spec.engine)

    def log(self, msg: str, level: int = logging.INFO) -> None:
        self.logger.log(level, msg)

    def _setup_logging(self) -> None:
        self.logger.setLevel(logging.INFO)
        self.logger.propagate = False
        fmt = _UtcFormatter("%(asctime)s [specdec-node] %(message)s")
        for h in (logging.FileHandler(self.logs / "job.log"), logging.StreamHandler(sys.stderr)):
            h.setFormatter(fmt)
            self.logger.addHandler(h)

    def _teardown_logging(self) -> None:
        for h in list(self.logger.handlers):
            self.logger.removeHandler(h)
            h.close()

    def _on_signal(self, signum, _frame) -> None:
        if self._signal is None:
            self._signal = signum
            self._signal_unix = time.time()
        # Logging from a handler can deadlock on the handler's lock: write directly.
        try:
            os.write(2, f"[specdec-node] received {signal_name(signum)}"
                        f"{' (already stopping)' if self._cleaning else ''}\n".encode())
        except OSError:
            pass

    def check_signal(self) -> None:
        if self._signal is not None and not self._cleaning:
            raise Interrupted(self._signal)

    def _install_signals(self) -> None:
        for s in STOP_SIGNALS:
            try:
                self._old_handlers[s] = signal.signal(s, self._on_signal)
            except (ValueError, OSError):  # not the main thread
                pass

    def _restore_signals(self) -> None:
        for s, h in self._old_handlers.items():
            try:
                signal.signal(s, h)
            except (ValueError, OSError):
                pass

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
        state = outcome.slurm_stop_state(view, signum=signum, signal_unix=self._signal_unix,
                                         warning_signum=getattr(signal, TIME_LIMIT_SIGNAL, None),
                                         warning_s=TIME_LIMIT_WARNING_S)
        deadline = view.deadline_unix
        self.log(f"{signal_name(signum)} arrived " + (
            f"{deadline - self._signal_unix:.0f} s before the Slurm deadline"
            if deadline is not None and self._signal_unix is not None else "(Slurm deadline unknown)")
            + f"; scontrol says {view.state or 'nothing'}: judged {state or 'unknown'}")
        return state

    def fail(self, reason: str) -> None:
        """Record the one-line failure reason (launcher/login/node_job.py reads its first line)."""
        line = write_error(self.job_dir, reason)
        self.log(f"ERROR: {line}", logging.ERROR)




class NodeContext(Protocol):
    spec: JobSpec
    spec_path: Path
    job_dir: Path
    logs: Path
    python: str
    api_key: Optional[str]
    server: Optional[ServerProcess]
    members: list
    idle_spinners: list  # topology=disagg, CPU build: the threads set to nice 19 (node/spinners.py)
    server_start: int  # which start of the server the client measures (sweep.server_starts)

    @property
    def engine(self) -> Engine: ...

    def log(self, msg: str, level: int = logging.INFO) -> None: ...

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
        state = outcome.slurm_stop_state(view, signum=signum, signal_unix=self._signal_unix,
                                         warning_signum=getattr(signal, TIME_LIMIT_SIGNAL, None),
                                         warning_s=TIME_LIMIT_WARNING_S)
        deadline = view.deadline_unix
        self.log(f"{signal_name(signum)} arrived " + (
            f"{deadline - self._signal_unix:.0f} s before the Slurm deadline"
            if deadline is not None and self._signal_unix is not None else "(Slurm deadline unknown)")
            + f"; scontrol says {view.state or 'nothing'}: judged {state or 'unknown'}")
        return state

    def fail(self, reason: str) -> None: ...

    def check(self) -> None: ...

    def server_env(self, extra_env: Optional[dict] = None) -> dict: ...

    def server_launch(self, extra_env: Optional[dict] = None) -> tuple[dict, ServerKey]: ...

    def serve(self, speculative_config: object = "spec", phase: str = "server") -> ServerProcess: ...

    def stop_server(self, what: str = "server") -> None: ...

    def run_client(self, argv: list[str], server: ServerProcess, ready_path: Path, what: str) -> int: ...
