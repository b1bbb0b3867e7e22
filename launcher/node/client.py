"""The node job's client run: a client process (the benchmark, the lossless comparison,
the known-answer probe) with a watchdog that checks every round that the servers stay
alive; its command and environment (the API key as SPECDEC_API_KEY, this checkout on
PYTHONPATH, where server_ready.json lies). On the server group (launcher.node.servers)."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

from launcher.contracts.job import BENCH_MODULE, JobSpec
from launcher.node import outcome
from launcher.node.lifecycle import ServerDiedError, ServerProcess, describe_returncode, signal_name, spawn
from launcher.node.net import subprocess_line
from launcher.node.servers import ServerGroup
from launcher.runtime import apikey
from launcher.runtime.files import REPO_ROOT
from launcher.runtime.processes import ProcessTag

WATCH_INTERVAL_S = 0.2


class ClientRun(ServerGroup):
    """Runs a client against the servers; ``self.bench`` is the client running now."""

    def __init__(self, spec: JobSpec, python: Optional[str] = None, spec_path: Optional[Path] = None):
        super().__init__(spec, python, spec_path)
        self.bench = None
        self.bench_tag: Optional[ProcessTag] = None

    def bench_env(self, server: ServerProcess, ready_path: Path) -> dict:
        env = apikey.client_env(self.api_key, self.server_env())
        root = str(REPO_ROOT)
        pp = env.get("PYTHONPATH", "")
        if root not in pp.split(os.pathsep):
            env["PYTHONPATH"] = root + (os.pathsep + pp if pp else "")
        env.update({"SPECDEC_JOB_DIR": str(self.job_dir), "SPECDEC_SERVER_URL": server.url,
                    "SPECDEC_SERVER_READY_FILE": str(ready_path)})
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
        """Run a client process while a watchdog checks that the server stays alive
        (every node's, multi-node); returns its exit status."""
        self.phase = what
        self.log(f"starting {what}: {subprocess_line(argv)}")
        t0 = time.monotonic()
        self.bench_tag = ProcessTag()  # a SIGKILLed benchmark's AIPerf is re-parented, not ended: found by it
        self.bench = spawn(argv, env=self.bench_tag.apply(self.bench_env(server, ready_path)), cwd=str(Path.cwd()))
        while True:
            rc = self.bench.poll()
            if rc is not None:
                self.log(f"{what} finished with exit code {describe_returncode(rc)} "
                         f"after {time.monotonic() - t0:.1f} s")
                if rc != 0:
                    self.check_signal()  # the job's own stop signal is the cause, not the benchmark's end
                    src = server.poll()
                    if src is not None:  # the server died first; the client only noticed
                        self.end_cause = outcome.end_cause(server_rc=src)
                        raise ServerDiedError(f"server exited with code {describe_returncode(src)} during the "
                                              f"{what}", server.tail())
                if rc < 0 or rc >= 128:  # killed: the benchmark could not record its own end
                    self.end_cause = f"the {what} was killed by " + (
                        signal_name(-rc) if rc < 0 else signal_name(rc - 128))
                return rc
            self.check()
            src = server.poll()
            if src is not None:
                self.log(f"server exited (code {describe_returncode(src)}) during the {what}; "
                         f"stopping the {what}")
                self.end_cause = outcome.end_cause(server_rc=src)
                raise ServerDiedError(f"server exited with code {describe_returncode(src)} during the {what}",
                                      server.tail())
            time.sleep(WATCH_INTERVAL_S)
