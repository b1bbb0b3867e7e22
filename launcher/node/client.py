"""The node job's client run: a client process (the benchmark, the lossless comparison,
the known-answer probe) while the servers are watched: every round, that they stay alive
and their engine processes too, and (launcher.node.watchdog, in its thread) that they
answer; its command and environment (the API key as SPECDEC_API_KEY, this checkout on
PYTHONPATH, where server_ready.json lies). Held by the node job beside the server group
(launcher.node.servers) it watches."""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Optional

from launcher.contracts.job import BENCH_MODULE, SERVER_START_ENV
from launcher.node import server_fault
from launcher.node.job_context import JobContext
from launcher.node.lifecycle import ServerProcess, describe_returncode, signal_name, spawn, terminate_trees
from launcher.node.net import subprocess_line
from launcher.node.servers import ServerGroup
from launcher.node.watchdog import Watchdog
from launcher.runtime import apikey
from launcher.runtime.files import REPO_ROOT
from launcher.runtime.processes import ProcessTag

WATCH_INTERVAL_S = 0.2
UNANSWERED_BLAME_S = 4.0  # a client that fails while a server has given no answer this long failed because of it
_NEVER = server_fault.Unanswered(0.0, 0.0)


class ClientRun:
    """Runs a client against the job's servers; ``self.bench`` is the client running now."""

    def __init__(self, ctx: JobContext, servers: ServerGroup):
        self.ctx = ctx
        self.servers = servers
        self.bench = None
        self.server_start = 1  # which start of the server the client measures (sweep.server_starts)
        self.bench_tag: Optional[ProcessTag] = None

    def bench_env(self, server: ServerProcess, ready_path: Path) -> dict:
        env = apikey.client_env(self.ctx.api_key, self.servers.server_env())
        root = str(REPO_ROOT)
        pp = env.get("PYTHONPATH", "")
        if root not in pp.split(os.pathsep):
            env["PYTHONPATH"] = root + (os.pathsep + pp if pp else "")
        env.update({"SPECDEC_JOB_DIR": str(self.ctx.job_dir), "SPECDEC_SERVER_URL": server.url,
                    "SPECDEC_SERVER_READY_FILE": str(ready_path), SERVER_START_ENV: str(self.server_start)})
        return env

    def bench_argv(self, url: str, role: str = "speculative") -> list[str]:
        """The benchmark's command: ours reads the job spec; another module gets its argv verbatim."""
        sp, python = self.ctx.spec, self.ctx.python
        if sp.bench is not None and sp.bench_module == BENCH_MODULE:
            return [python, "-m", BENCH_MODULE, "--spec", str(self.ctx.spec_path),
                    *(["--role", role] if role != "speculative" else []), "--url", url]
        return [python, "-m", sp.bench_module, *sp.bench_args, "--url", url]

    def run_bench(self, server: ServerProcess, ready_path: Path) -> int:
        return self.run_client(self.bench_argv(server.url), server, ready_path, "benchmark")

    def run_client(self, argv: list[str], server: ServerProcess, ready_path: Path, what: str) -> int:
        """Run a client process while the watchdog checks that every server stays alive
        and answering (every node's, multi-node; the router's and each disagg server's);
        returns its exit status."""
        ctx, servers = self.ctx, self.servers
        ctx.phase = what
        ctx.log(f"starting {what}: {subprocess_line(argv)}")
        t0 = time.monotonic()
        self.bench_tag = ProcessTag()  # a SIGKILLed benchmark's AIPerf is re-parented, not ended: found by it
        self.bench = spawn(argv, env=self.bench_tag.apply(self.bench_env(server, ready_path)), cwd=str(Path.cwd()))
        watched = [m for m in [server, *servers.members] if isinstance(m, ServerProcess)]
        with Watchdog(watched):
            while True:
                rc = self.bench.poll()
                if rc is not None:
                    ctx.log(f"{what} finished with exit code {describe_returncode(rc)} "
                            f"after {time.monotonic() - t0:.1f} s")
                    if rc != 0:
                        self._blame_failed_client(watched, what)
                    if rc < 0 or rc >= 128:  # killed: the benchmark could not record its own end
                        ctx.end_cause = f"the {what} was killed by " + (
                            signal_name(-rc) if rc < 0 else signal_name(rc - 128))
                    return rc
                servers.check()
                servers.check_servers(watched, what)
                self._check_answers(watched, what)
                time.sleep(WATCH_INTERVAL_S)

    def _blame_failed_client(self, watched: list[ServerProcess], what: str) -> None:
        """A client that failed: the job's own stop signal, or a server that failed first
        (the client only noticed), or one that gave no answer meanwhile, is the cause."""
        self.ctx.check_signal()
        self.servers.check_servers(watched, what, settle_s=3.0)
        silent = [m for m in watched if (m.unanswered() or _NEVER).for_s >= UNANSWERED_BLAME_S]
        if silent:
            raise self.servers.server_failure(silent[0], what)

    def _check_answers(self, watched: list[ServerProcess], what: str) -> None:
        """A server silent for server.unanswered_timeout_s has failed; the points running
        while any is silent are noted."""
        if any(m.unanswered() for m in watched):
            self.servers.blame_running_points()
        timeout_s = self.ctx.spec.unanswered_timeout_s
        for m in watched:
            u = m.unanswered()
            if u is not None and u.for_s >= timeout_s:
                self.ctx.log(f"the {m.label} has not answered since {server_fault.clock(u.since_unix)} "
                             f"({u.for_s:.0f} s, server.unanswered_timeout_s={timeout_s:g}); stopping the {what}")
                raise self.servers.server_failure(m, what)

    def stop(self) -> None:
        """At the job's end: the client still running, and every process it started, stopped."""
        if self.bench is None:
            return
        if self.bench.poll() is None:
            self.ctx.log("stopping the benchmark")
        left = terminate_trees([self.bench], self.ctx.spec.stop_grace_s, self.ctx.log, "benchmark", tag=self.bench_tag)
        if left:
            self.ctx.log(f"WARNING: benchmark processes still running after SIGKILL: {sorted(left)}", logging.ERROR)
