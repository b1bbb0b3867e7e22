"""The inference server's lifecycle on the node: start, readiness, watch, stop.

One ``ServerProcess`` wraps one server (its engine's command) started in its own
process session, with stdout and stderr appended to a log file. Readiness is
three things at once: the engine's health endpoint answers 200, its models
endpoint lists the served name, and the process is still alive; the version
comes from the engine's version endpoint. A process that exits before it is
ready fails the wait at once (the poll runs every ``poll_interval_s``), with the
tail of its log in the error.

``stop()`` ends the whole process tree: SIGTERM to the server's process group
(and to any descendant that left the group), a grace period, then SIGKILL.
Zombies (exited, not yet reaped) do not count as running.

Processes are started through a tiny exec shim that asks Linux to send the
child SIGTERM when its parent dies (PR_SET_PDEATHSIG), so even a SIGKILLed job
does not leave a server running; on other systems the shim just execs.

While a client runs, the node's watchdog (launcher.node.watchdog) keeps asking the
engine's health endpoint and looks at the engine processes under the API server (the
server's view of it: launcher.node.server_watch.ServerWatch, its base); a failed server
is put in words by ``fault()`` and launcher.node.server_fault. Only the standard library
is used here, and psutil (as in launcher.runtime.processes) to read the process tree.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Callable, Optional

from launcher.contracts.server_ready import ServerReady
from launcher.engines import Engine, ServerKey
from launcher.node.server_fault import fault_message
from launcher.node.net import http_get  # noqa: F401 (re-exported)
from launcher.node.server_watch import ServerWatch
from launcher.runtime.processes import (  # noqa: F401 (re-exported for the node driver)
    DEFAULT_STOP_GRACE_S,
    TAIL_LINES,
    Interrupted,
    ProcessTag,
    describe_returncode,
    descendants,
    live_processes,
    log_tail,
    signal_name,
    spawn,
    terminate_trees,
    with_parent_death_signal,
)

DEFAULT_POLL_INTERVAL_S = 0.1


class ServerError(RuntimeError):
    """The server failed; ``reason`` is the one-line summary (it names the server and its
    log), ``tail`` its log's end, ``cause`` the end in a few words (summary.json) when known."""

    def __init__(self, reason: str, tail: str = "", cause: Optional[str] = None, log: Optional[str] = None):
        self.reason = reason
        self.tail = tail
        self.cause = cause
        self.log = log
        super().__init__(reason + (f"; last log lines:\n{tail}" if tail else ""))


class ServerStartError(ServerError):
    """The server exited, or did not become ready in time, before it was ready."""


class ServerAuthError(ServerStartError):
    """The server refused the readiness probe (401/403): it wants a different API key."""


class ServerDiedError(ServerError):
    """The server exited after it was ready (e.g. during the benchmark)."""


def url_host(host: str) -> str:
    """A host as it goes into a URL (IPv6 literals in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


# ---------------------------------------------------------------- the server


class ServerProcess(ServerWatch):
    """One inference server process and its readiness.

    ``argv`` is the complete server command line (JobSpec.server_argv's output);
    ``probe_host``/``port`` are where this node reaches it; ``served_name`` is
    what the engine's models endpoint must list before it counts as ready;
    ``key``'s files (Engine.server_key's) are removed once it is ready, or stopped;
    ``engine``: the engine that serves (its endpoints and counters), always the caller's.
    """

    def __init__(self, argv: list[str], *, probe_host: str, port: int, served_name: str,
                 log_path: str | os.PathLike[str], env: Optional[dict] = None,
                 log: Callable[[str], None] = lambda m: None, api_key: Optional[str] = None,
                 engine: Engine, key: Optional[ServerKey] = None):
        self.argv = list(argv)
        self.engine = engine
        self.key = key or ServerKey()
        self.probe_host = probe_host
        self.port = int(port)
        self.served_name = served_name
        self.log_path = Path(log_path)
        self.env = env
        self._log = log
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.proc: Optional[subprocess.Popen] = None
        self._log_offset = 0
        self.t_spawn: Optional[float] = None  # time.monotonic() at spawn
        self.spawn_unix: Optional[float] = None
        self.t_ready: Optional[float] = None
        self.ready_unix: Optional[float] = None
        self.engine_version: Optional[str] = None
        self.role = "server"  # topology=disagg: prefill0, decode0, ... (its log and error messages)
        self.label = "main server"  # how errors name it: "decode0 server", "router", "baseline server"
        ServerWatch.__init__(self)  # the watchdog's view: answers, and the engine processes under it
        self.side_channel_port: Optional[int] = None  # topology=disagg: the NIXL side channel
        self.cpu_cores: Optional[list] = None  # topology=disagg on CPU: its cores, one list per rank
        self.tag: Optional[ProcessTag] = None  # marks its processes (a Slurm step's too): its listening sockets
        self.metrics_port: Optional[int] = None  # a router's own metrics port
        self.node: Optional[str] = None  # topology=disagg as Slurm steps: the node it runs on
        self.address: Optional[str] = None  # ... and that node's address

    @property
    def url(self) -> str:
        return f"http://{url_host(self.probe_host)}:{self.port}"

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    @property
    def startup_s(self) -> Optional[float]:
        if self.t_ready is None or self.t_spawn is None:
            return None
        return self.t_ready - self.t_spawn

    def start(self) -> "ServerProcess":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as f:
            self._log_offset = f.tell()
            f.write(f"===== {time.strftime('%Y-%m-%dT%H:%M:%S%z')} starting: "
                    f"{subprocess.list2cmdline(self.argv)}\n".encode())
            f.flush()
            self.t_spawn = time.monotonic()
            self.spawn_unix = time.time()
            env = dict(os.environ if self.env is None else self.env)
            env.setdefault("PYTHONFAULTHANDLER", "1")  # a fatal signal in any of its processes is named in its log
            self.proc = spawn(self.argv, stdout=f, env=env)
        self._log(f"server started (pid {self.proc.pid}), log: {self.log_path}")
        return self

    def poll(self) -> Optional[int]:
        return self.proc.poll() if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def note(self, message: str) -> None:
        self._log(message)

    def tail(self, n: int = TAIL_LINES) -> str:
        return log_tail(self.log_path, n, self._log_offset)

    def probe(self, health_timeout_s: float = 1.0, models_timeout_s: float = 2.0) -> tuple[bool, str]:
        """One readiness check: (ready, what is missing)."""
        health, models = self.engine.health_path, self.engine.models_path
        status, _ = http_get(self.probe_host, self.port, health, health_timeout_s)
        if status != 200:
            return False, f"GET {health} " + ("no answer" if status is None else f"-> {status}")
        status, body = http_get(self.probe_host, self.port, models, models_timeout_s, self._headers)
        if status in (401, 403):
            how = ("with this job's API key" if self._headers else "without an API key")
            other = " or ".join([self.engine.key_flag] + ([f"a different {self.engine.key_env}"]
                                                          if self.engine.key_env else []))
            raise ServerAuthError(
                f"server refused the readiness probe: GET {models} -> {status} {how}; the server was started "
                f"with a different key (fix: give the key only through SPECDEC_API_KEY in the job's environment, "
                f"not {other})")
        if status != 200:
            return False, f"GET {models} " + ("no answer" if status is None else f"-> {status}")
        try:
            ids = [m.get("id") for m in json.loads(body).get("data", [])]
        except (ValueError, AttributeError):
            return False, f"GET {models}: not a model list"
        if self.served_name not in ids:
            return False, f"GET {models} lists {ids}, not {self.served_name!r}"
        if not self.alive():
            return False, "process exited"
        return True, ""

    def wait_ready(self, timeout_s: float, poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
                   check: Callable[[], None] = lambda: None) -> float:
        """Block until ready; returns the start-up time in seconds (spawn to ready).

        Raises ServerStartError if the process exits first or ``timeout_s``
        passes; ``check()`` is called every round (it may raise, e.g. on a signal).
        """
        assert self.proc is not None, "start() first"
        deadline = self.t_spawn + timeout_s
        last_note, t_note = "", 0.0
        while True:
            check()
            rc = self.proc.poll()
            if rc is not None:
                f = self.fault()
                raise ServerStartError(
                    fault_message(f, "start-up", f"{time.monotonic() - self.t_spawn:.1f} s after start"),
                    self.tail(), log=self.log_name)
            ready, note = self.probe()
            if ready:
                self.t_ready = time.monotonic()
                self.ready_unix = time.time()
                self.last_answer_unix = self.ready_unix
                self.check_engines()
                break
            now = time.monotonic()
            if now >= deadline:
                raise ServerStartError(
                    f"the {self.label} was not ready after {timeout_s:g} s (SPECDEC_READY_TIMEOUT); last check: "
                    f"{note} (see {self.log_name})", self.tail(), log=self.log_name)
            if note != last_note or now - t_note >= 60:
                if last_note:  # a change, or a minute without one
                    self._log(f"waiting for the server ({now - self.t_spawn:.0f} s): {note}")
                last_note, t_note = note, now
            time.sleep(max(0.0, min(poll_interval_s, deadline - now)))
        self.key.remove_files()  # the server has read its arguments
        status, body = http_get(self.probe_host, self.port, self.engine.version_path, 2.0, self._headers)
        if status == 200:
            self.engine_version = self.engine.version_from_response(body)
        self._log(f"{self.label} ready after {self.startup_s:.2f} s at {self.url} "
                  f"(engine version {self.engine_version or 'unknown'})")
        return self.startup_s

    def ready_info(self, bind_host: str) -> ServerReady:
        """What server_ready.json holds of this server."""
        return ServerReady(startup_s=None if self.startup_s is None else round(self.startup_s, 3), port=self.port,
                           url=self.url, bind_host=bind_host, served_model_name=self.served_name, argv=self.argv,
                           engine_version=self.engine_version, pid=self.pid, spawn_unix=self.spawn_unix,
                           ready_unix=self.ready_unix, log=str(self.log_path),
                           engine_chosen=self.engine.chosen_settings(log_tail(self.log_path, 1 << 20,
                                                                              self._log_offset)) or None)

    def stop(self, grace_s: float = DEFAULT_STOP_GRACE_S) -> set[int]:
        """Stop the server's whole process tree; returns pids left (should be empty)."""
        self.key.remove_files()
        if self.proc is None:
            return set()
        left = terminate_trees([self.proc], grace_s, self._log, "server")
        self._log(f"server stopped (exit {describe_returncode(self.proc.returncode)})"
                  + (f"; still running: {sorted(left)}" if left else ""))
        return left
