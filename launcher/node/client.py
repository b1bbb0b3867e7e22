"""The node job's client run: a client process (the benchmark, the lossless comparison,
the known-answer probe) while the servers are watched: every round, that they stay alive
and their engine processes too, and (launcher.node.watchdog, in its thread) that they
answer; its command and environment (the API key as SPECDEC_API_KEY, this checkout on
PYTHONPATH, where server_ready.json lies). On the server group (launcher.node.servers)."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

from launcher.contracts.job import BENCH_MODULE, SERVER_START_ENV, JobSpec
from launcher.node import server_fault
from launcher.node.lifecycle import ServerProcess, describe_returncode, signal_name, spawn
from launcher.node.net import subprocess_line
from launcher.node.servers import ServerGroup
from launcher.node.watchdog import Watchdog
from launcher.runtime import apikey
from launcher.runtime.files import REPO_ROOT
from launcher.runtime.processes import ProcessTag

WATCH_INTERVAL_S = 0.2
UNANSWERED_BLAME_S = 4.0  # a client that fails while a server has given no answer this long failed because of it
_NEVER = server_fault.Unanswered(0.0, 0.0)


class ClientRun(ServerGroup):
    """Runs a client against the servers; ``self.bench`` is the client running now."""

    def __init__(self, spec: JobSpec, python: Optional[str] = None, spec_path: Optional[Path] = None):
        super().__init__(spec, python, spec_path)
        self.bench = None
        self.server_start = 1  # which start of the server the client measures (sweep.server_starts)
        self.bench_tag: Optional[ProcessTag] = None

    def bench_env(self, server: ServerProcess, ready_path: Path) -> dict:
        env = apikey.client_env(self.api_key, self.server_env())
        root = str(REPO_ROOT)
        pp = env.get("PYTHONPATH", "")
        if root not in pp.split(os.pathsep):
            env["PYTHONPATH"] = root + (os.pathsep + pp if pp else "")
        env.update({"SPECDEC_JOB_DIR": str(self.job_dir), "SPECDEC_SERVER_URL": server.url,
                    "SPECDEC_SERVER_READY_FILE": str(ready_path), SERVER_START_ENV: str(self.server_start)})
        return env

    def bench_argv(self, url: str, role: str = "speculative") -> list[str]:
        """The benchmark's command: ours reads the job spec; another module gets its argv verbatim."""
        if self.spec.bench is not None and self.spec.bench_module == BENCH_MODULE:
            return [self.python, "-m", BENCH_MODULE, "--spec", str(self.spec_path),
                    *(["--role", role] if role != "speculative" else []), "--url", url]
        return [self.python, "-m", self.spec.bench_module, *self.spec.bench_args, "--url", url]

    def _run_bench(self, server: ServerProcess, ready_path: Path) -> int:
        return self.run_client(self.bench_argv(server.url), server, ready_path, "benchmark")

    def run_client(self, argv: list[str], server: ServerProcess, ready_path: Path, what: str) -> int:
        """Run a client process while the watchdog checks that every server stays alive
        and answering (every node's, multi-node; the router's and each disagg server's);
        returns its exit status."""
        self.phase = what
        self.log(f"starting {what}: {subprocess_line(argv)}")
        t0 = time.monotonic()
        self.bench_tag = ProcessTag()  # a SIGKILLed benchmark's AIPerf is re-parented, not ended: found by it
        self.bench = spawn(argv, env=self.bench_tag.apply(self.bench_env(server, ready_path)), cwd=str(Path.cwd()))
        watched = [m for m in [server, *self.members] if isinstance(m, ServerProcess)]
        with Watchdog(watched):
            while True:
                rc = self.bench.poll()
                if rc is not None:
                    self.log(f"{what} finished with exit code {describe_returncode(rc)} "
                             f"after {time.monotonic() - t0:.1f} s")
                    if rc != 0:
                        self._blame_failed_client(watched, what)
                    if rc < 0 or rc >= 128:  # killed: the benchmark could not record its own end
                        self.end_cause = f"the {what} was killed by " + (
                            signal_name(-rc) if rc < 0 else signal_name(rc - 128))
                    return rc
                self.check()
                self.check_servers(watched, what)
                self._check_answers(watched, what)
                time.sleep(WATCH_INTERVAL_S)

    def _blame_failed_client(self, watched: list[ServerProcess], what: str) -> None:
        """A client that failed: the job's own stop signal, or a server that failed first
        (the client only noticed), or one that gave no answer meanwhile, is the cause."""
        self.check_signal()
        self.check_servers(watched, what, settle_s=3.0)
        silent = [m for m in watched if (m.unanswered() or _NEVER).for_s >= UNANSWERED_BLAME_S]
        if silent:
            raise self.server_failure(silent[0], what)

    def _check_answers(self, watched: list[ServerProcess], what: str) -> None:
        """A server silent for server.unanswered_timeout_s has failed; the points running
        while any is silent are noted."""
        if any(m.unanswered() for m in watched):
            self.blame_running_points()
        for m in watched:
            u = m.unanswered()
            if u is not None and u.for_s >= self.spec.unanswered_timeout_s:
                self.log(f"the {m.label} has not answered since {server_fault.clock(u.since_unix)} ({u.for_s:.0f} s, "
                         f"server.unanswered_timeout_s={self.spec.unanswered_timeout_s:g}); stopping the {what}")
                raise self.server_failure(m, what)
