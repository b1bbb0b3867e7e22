"""The watchdog's view of one server (the base of launcher.node.lifecycle.ServerProcess):
whether it answers its readiness probe and since when it has not, the engine processes
under its API server and those that ended, and its failure put together from these, its
exit and its log's fatal signal (launcher.node.server_fault). launcher.node.watchdog
probes from its thread; the node job's watch loop reads what was found. psutil reads
the process tree (imported when used, as in launcher.runtime.processes).
"""
from __future__ import annotations

import os
import time
from typing import Optional

from launcher.node.server_fault import (ENGINE_PROCESS, ProcessGone, ServerFault, Unanswered, fatal_signal_in_log,
                                        is_engine_process)
from launcher.node.net import http_get

FATAL_SCAN_BYTES = 4 << 20  # the part of a server's log searched for a fatal signal (its end)


class ServerWatch:
    """State and checks on top of a server process (``proc``, ``alive()``, ``poll()``,
    ``probe_host``/``port``, ``engine``, ``log_path``, ``label``, ``ready_unix``)."""

    def __init__(self) -> None:
        self.last_answer_unix: Optional[float] = None
        self.unanswered_since_unix: Optional[float] = None  # first probe without an answer since the last one
        self.last_probe_note = ""
        # a process whose health endpoint reports on others (the P/D router: 503 "Unhealthy
        # servers: [...]" while its health checker holds a server unhealthy) answers with any status
        self.any_status_answers = False
        self.last_health_report = ""  # what such an answer said, when it was not 200
        self.engines: dict[int, str] = {}  # pid -> title of the engine processes seen under it
        self.engine_gone: list[ProcessGone] = []

    @property
    def log_name(self) -> str:
        """The log as the user finds it in the job folder: logs/decode0.log."""
        return f"{self.log_path.parent.name}/{self.log_path.name}"

    def probe_answer(self, timeout_s: float) -> bool:
        """One readiness probe (the engine's health endpoint) for the watchdog; records the
        answer or its absence."""
        t = time.time()
        status, body = http_get(self.probe_host, self.port, self.engine.health_path, timeout_s)
        if status == 200 or (status is not None and self.any_status_answers):
            self.last_answer_unix, self.unanswered_since_unix, self.last_probe_note = time.time(), None, ""
            self.last_health_report = "" if status == 200 else \
                f"{status} {body.decode('utf-8', 'replace').strip()[:300]}"
            return True
        if self.unanswered_since_unix is None:
            self.unanswered_since_unix = t
        self.last_probe_note = f"GET {self.engine.health_path} " + (
            f"no answer within {timeout_s:g} s" if status is None else f"-> {status}")
        return False

    def note(self, message: str) -> None:
        """A line for the job log (the subclass has the log)."""

    def unanswered(self, now: Optional[float] = None) -> Optional[Unanswered]:
        """Since when the server has given no answer (None while it answers)."""
        if self.unanswered_since_unix is None:
            return None
        now = time.time() if now is None else now
        since = self.last_answer_unix or self.ready_unix or self.unanswered_since_unix
        return Unanswered(since, now - since, self.last_probe_note, self.process_state())

    def process_state(self) -> str:
        """The API server process's state as Linux has it ("stopped", "sleeping", ...)."""
        if not self.alive():
            return "exited"
        try:
            import psutil  # lazy: a bare python3 lacks it (run.sh --help loads the node side)
            return psutil.Process(self.proc.pid).status()
        except Exception:  # noqa: BLE001 - a description, never a failure
            return ""

    def check_engines(self) -> None:
        """Note the engine processes under the API server, and those that ended while it ran."""
        if not self.alive():
            return
        try:
            import psutil  # lazy: a bare python3 lacks it (run.sh --help loads the node side)
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        except Exception:  # noqa: BLE001
            return
        now, seen = time.time(), {}
        for k in kids:
            try:
                if k.status() == psutil.STATUS_ZOMBIE:
                    continue
                name, cmd = k.name(), " ".join(k.cmdline())
            except psutil.Error:
                continue
            if is_engine_process(name, cmd):
                seen[k.pid] = next((w for w in cmd.split() if ENGINE_PROCESS.search(w)), name)
        if not self.alive():  # the API server ended meanwhile: its children go with it
            return
        for pid, name in self.engines.items():
            if pid not in seen and all(g.pid != pid for g in self.engine_gone):
                self.engine_gone.append(ProcessGone(name, pid, now))
        self.engines.update(seen)

    def check_engine_pids(self) -> None:
        """The cheap check, every round of the node's watch loop: has an engine process seen
        before ended while the API server runs? (One /proc read per engine process.)"""
        if not self.engines or not self.alive():
            return
        import psutil  # lazy: a bare python3 lacks it (run.sh --help loads the node side)
        now = time.time()
        for pid, name in self.engines.items():
            if any(g.pid == pid for g in self.engine_gone):
                continue
            try:
                ended = psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                ended = True
            except psutil.Error:
                continue
            if ended and self.alive():
                self.engine_gone.append(ProcessGone(name, pid, now))

    def fault(self) -> ServerFault:
        """What is known of this server's failure now: its exit, its engines, its log's
        fatal signal, its silence."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(self._log_offset, f.tell() - FATAL_SCAN_BYTES))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            text = ""
        rc = self.poll()
        return ServerFault(label=self.label, log=self.log_name, rc=rc,
                                        engine_gone=tuple(self.engine_gone),
                                        log_fatal=fatal_signal_in_log(text),
                                        unanswered=self.unanswered() if rc is None else None)
