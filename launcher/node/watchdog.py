"""The node's watchdog while a client (the benchmark, a probe) runs: every few seconds it
asks each server's readiness endpoint (GET /health) and looks at the engine processes
under each API server, in a thread of its own, so that a server that stops answering
(stopped, hung) is named with the time of its last answer, and an engine process that
dies is seen even while its API server lives on. The node job reads what it found
(ServerProcess.unanswered(), .engine_gone) in its watch loop and decides.
"""
from __future__ import annotations

import threading
from typing import Sequence

from launcher.node.lifecycle import ServerProcess

PROBE_INTERVAL_S = 2.0
PROBE_TIMEOUT_S = 5.0


class Watchdog:
    def __init__(self, servers: Sequence[ServerProcess], interval_s: float = PROBE_INTERVAL_S,
                 timeout_s: float = PROBE_TIMEOUT_S):
        self.servers = [s for s in servers if isinstance(s, ServerProcess)]
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> "Watchdog":
        for s in self.servers:  # one thread per server: a silent one never delays the others' probes
            t = threading.Thread(target=self._watch, args=(s,), daemon=True, name=f"watchdog-{s.label}")
            t.start()
            self._threads.append(t)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()  # a thread inside a probe of a silent server ends with it (daemon, at most timeout_s)
        for t in self._threads:
            t.join(timeout=0.2)

    def _watch(self, server: ServerProcess) -> None:
        while not self._stop.wait(self.interval_s):
            if not server.alive():
                return
            server.check_engines()
            said = server.last_health_report
            server.probe_answer(self.timeout_s)
            if server.last_health_report != said:  # the router's view of its servers, once per change
                server.note(f"the {server.label} reports: {server.last_health_report}" if server.last_health_report
                           else f"the {server.label} reports every server healthy again")
