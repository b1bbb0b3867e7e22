"""One job on the node: start the server, wait until it is ready, run the
benchmark against it, stop the server, exit with the benchmark's status.

    python -m launcher.node.serve_and_bench --spec JOB_DIR/job.json
    python -m launcher.node.serve_and_bench [SERVER ARGS...] -- [BENCH ARGS...]

The first form is what jobs run: everything comes from the job spec
(launcher/spec.py) the launcher wrote; the matched baseline (sweep.baseline=true)
is its ``baseline`` section. The job runs as phases (start-up checks, server and
sweep, the second servers, the conclusion), with the signal handling and the
cleanup in ``NodeJob.run``. The second is run.sh's (the hand-use
wrapper): it builds the same spec from its arguments and the environment,
writes it to the job folder as job.json, and runs it:

    HF_MODEL_CKPT          the model to serve (required)
    SPECDEC_SERVER_CMD     the server command (default "vllm serve"); the model
                           goes after it (positional for `... serve`, else --model)
    SPECDEC_HOST           bind host (default 127.0.0.1; clusters use 0.0.0.0)
    SPECDEC_PORT           port (default: a free one, picked on the bind host)
    SPECDEC_READY_TIMEOUT  seconds to wait for readiness (default 1800)
    SPECDEC_JOB_DIR        the job's folder (default ./specdec_job_<timestamp>)
    SPECDEC_PYTHON         python for the benchmark (default: this interpreter)
    SPECDEC_BENCH_MODULE   the benchmark module (default launcher.bench: its arguments
                           are read by its own parser into the spec's bench section and
                           it runs as PYTHON -m launcher.bench --spec JOB.json --url URL;
                           another module runs as PYTHON -m MODULE [BENCH ARGS...] --url URL)
    SPECDEC_STOP_GRACE     seconds between SIGTERM and SIGKILL when stopping (default 10)
    SPECDEC_UNANSWERED_TIMEOUT  seconds a ready server may leave its readiness probe
                           (GET /health, every 2 s) unanswered before the job stops as
                           its failure (default 300)
    SPECDEC_KNOWN_ANSWER   1: after the sweep, restart the target as its own draft and
                           check that it accepts every draft at each sweep temperature
                           (launcher.bench.known_answer); the job fails when it does not,
                           unless SPECDEC_KNOWN_ANSWER_ALLOW_FAIL=1

It writes, in the job folder: logs/server.log (the server's output),
logs/job.log (lifecycle events), logs/error.txt (one line, on failure only),
server_ready.json (start-up time, url, argv, engine version; the benchmark
reads it) and gpu_telemetry.json.

Exit status: the benchmark's; 2 for a usage error; 3 when the server fails
(exits or is not ready in time before the benchmark, or exits during it);
128+N when stopped by signal N (SIGTERM: 143). Whatever the exit, the server's
whole process tree and the benchmark's are stopped first.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from launcher.common import apikey
from launcher.node import disagg as disagg_node
from launcher.node import outcome, server_fault, slurm_steps
from launcher.node.watchdog import Watchdog
from launcher.node.net import client_host, pick_free_port, port_is_free, subprocess_line  # noqa: F401 (re-exported)
from launcher.node.lifecycle import (
    DEFAULT_STOP_GRACE_S,
    Interrupted,
    ServerDiedError,
    ServerError,
    ServerProcess,
    ServerStartError,
    describe_returncode,
    log_tail,
    signal_name,
    spawn,
    terminate_trees,
)
from launcher.common.cpuinfo import cpu_flags
from launcher.common.processes import ProcessTag
from launcher.common.files import write_json_atomic
from launcher.results.job_end import finalize_job_dir
from launcher.results.status import clear_error, read_error, read_progress, write_error
from launcher.results.summary import has_summary
from launcher.engines import AcceptanceSource, get_engine, num_speculative_tokens
from launcher.engines.flags import (drop_flags, flag_value, has_flag, kv_cache_cap_bytes, pick_flags, served_name,
                                    speculative_config, split_at_separator)
from launcher.spec import (BENCH_MODULE, SPEC_FILE, TIME_LIMIT_SIGNAL, TIME_LIMIT_WARNING_S, JobSpec, KnownAnswerSpec,
                           LaunchSpec, SpecError)

EXIT_USAGE = 2
EXIT_SERVER_FAILED = 3
DEFAULT_SERVER_CMD = "vllm serve"
DEFAULT_BENCH_MODULE = BENCH_MODULE
DEFAULT_READY_TIMEOUT_S = 1800.0
DEFAULT_UNANSWERED_TIMEOUT_S = 300.0
WATCH_INTERVAL_S = 0.2
UNANSWERED_BLAME_S = 4.0  # a client that fails while a server has given no answer this long failed because of it
_NEVER = server_fault.Unanswered(0.0, 0.0)
PORT_RETRIES = 2  # new free port after "address already in use" (picked ports only)
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGINT", "SIGHUP", "SIGUSR2") if hasattr(signal, n))

USAGE = """usage: run.sh [SERVER ARGS...] -- [BENCH ARGS...]

Starts `$SPECDEC_SERVER_CMD $HF_MODEL_CKPT [SERVER ARGS...]` (default command
`vllm serve`), waits until it is ready, runs
`$SPECDEC_PYTHON -m $SPECDEC_BENCH_MODULE [BENCH ARGS...] --url http://HOST:PORT`,
stops the server and exits with the benchmark's status.
Environment: HF_MODEL_CKPT (required), SPECDEC_SERVER_CMD, SPECDEC_HOST,
SPECDEC_PORT, SPECDEC_READY_TIMEOUT, SPECDEC_JOB_DIR, SPECDEC_PYTHON,
SPECDEC_BENCH_MODULE, SPECDEC_STOP_GRACE."""


class UsageError(Exception):
    pass


# ---------------------------------------------------------------- pure helpers


def split_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split at the first `--`: (server args, bench args). The `--` is required."""
    parts = split_at_separator(argv)
    if parts is None:
        raise UsageError("missing `--` between the server's and the benchmark's arguments")
    return parts


def default_job_dir(now: Optional[float] = None) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    p = Path.cwd() / f"specdec_job_{stamp}"
    return p if not p.exists() else p.with_name(f"{p.name}-{os.getpid()}")


def repo_root() -> Path:
    """The folder holding the `launcher` package in use."""
    return Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- configuration


@dataclass
class NodeConfig:
    model: str
    server_cmd: str
    bind_host: str
    port: Optional[int]
    ready_timeout_s: float
    job_dir: Path
    python: str
    bench_module: str
    stop_grace_s: float = DEFAULT_STOP_GRACE_S
    unanswered_timeout_s: float = DEFAULT_UNANSWERED_TIMEOUT_S
    known_answer: bool = False
    known_answer_allow_fail: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "NodeConfig":
        model = env.get("HF_MODEL_CKPT", "").strip()
        if not model:
            raise UsageError("HF_MODEL_CKPT is not set: export the model (HF id or folder) to serve")
        port_s = env.get("SPECDEC_PORT", "").strip()
        try:
            port = int(port_s) if port_s else None
            if port is not None and not 0 < port < 65536:
                raise ValueError
        except ValueError:
            raise UsageError(f"SPECDEC_PORT={port_s!r} is not a port number") from None
        t_s = env.get("SPECDEC_READY_TIMEOUT", "").strip()
        try:
            timeout = float(t_s) if t_s else DEFAULT_READY_TIMEOUT_S
            if timeout <= 0:
                raise ValueError
        except ValueError:
            raise UsageError(f"SPECDEC_READY_TIMEOUT={t_s!r} is not a positive number of seconds") from None
        g_s = env.get("SPECDEC_STOP_GRACE", "").strip()
        try:
            grace = float(g_s) if g_s else DEFAULT_STOP_GRACE_S
            if grace < 0:
                raise ValueError
        except ValueError:
            raise UsageError(f"SPECDEC_STOP_GRACE={g_s!r} is not a number of seconds >= 0") from None
        u_s = env.get("SPECDEC_UNANSWERED_TIMEOUT", "").strip()
        try:
            unanswered = float(u_s) if u_s else DEFAULT_UNANSWERED_TIMEOUT_S
            if unanswered <= 0:
                raise ValueError
        except ValueError:
            raise UsageError(f"SPECDEC_UNANSWERED_TIMEOUT={u_s!r} is not a positive number of seconds") from None
        job_dir = env.get("SPECDEC_JOB_DIR", "").strip()
        return cls(
            model=model,
            server_cmd=env.get("SPECDEC_SERVER_CMD", "").strip() or DEFAULT_SERVER_CMD,
            bind_host=env.get("SPECDEC_HOST", "").strip() or "127.0.0.1",
            port=port,
            ready_timeout_s=timeout,
            job_dir=Path(job_dir).resolve() if job_dir else default_job_dir(),
            python=env.get("SPECDEC_PYTHON", "").strip() or sys.executable,
            bench_module=env.get("SPECDEC_BENCH_MODULE", "").strip() or DEFAULT_BENCH_MODULE,
            stop_grace_s=grace,
            unanswered_timeout_s=unanswered,
            known_answer=env.get("SPECDEC_KNOWN_ANSWER", "").strip() == "1",
            known_answer_allow_fail=env.get("SPECDEC_KNOWN_ANSWER_ALLOW_FAIL", "").strip() == "1",
        )

    def to_spec(self, server_args: list[str], bench_args: list[str]) -> JobSpec:
        """The job spec run.sh's arguments describe (one process server, on this node).
        The server arguments are the user's own and go to the server as given; what the
        node needs of them (served name, tokenizer, speculative config, KV-cache cap, TP)
        is read once, here, by launcher.engines.flags. Our benchmark's arguments are read
        by its own parser into the spec's bench section; another module's pass verbatim."""
        bench, points = None, []
        if self.bench_module == DEFAULT_BENCH_MODULE:
            import contextlib
            import io

            from launcher.bench.cli import spec_from_argv

            try:  # arguments that do not parse: the benchmark itself says so (exit 2), after the checks
                with contextlib.redirect_stderr(io.StringIO()):
                    bench, points = spec_from_argv(bench_args)
            except SystemExit:
                bench = None
        spec_cfg = speculative_config(server_args)
        if spec_cfg is None and has_flag(server_args, "--speculative-config"):
            raise UsageError("--speculative-config is not a JSON object")
        tp = int(flag_value(server_args, "--tensor-parallel-size") or 1)
        eng = get_engine("vllm")
        acceptance = pick_flags(server_args, eng.acceptance_flag_names())
        if spec_cfg and not acceptance:  # the per-request stats the benchmark counts
            acceptance = eng.acceptance_flags(AcceptanceSource.PER_REQUEST_STATS)
        return JobSpec(recipe="run.sh", server_id=self.job_dir.name, job_dir=str(self.job_dir), model=self.model,
                       served_name=served_name(server_args, self.model), server_command=self.server_cmd,
                       server_flags=drop_flags(server_args, eng.speculative_flag_names() | eng.acceptance_flag_names()),
                       acceptance_flags=acceptance if spec_cfg else [], bind_host=self.bind_host, port=self.port,
                       ready_timeout_s=self.ready_timeout_s, stop_grace_s=self.stop_grace_s,
                       unanswered_timeout_s=self.unanswered_timeout_s,
                       bench=bench, bench_args=[] if bench else list(bench_args), points=points,
                       tokenizer=flag_value(server_args, "--tokenizer"),
                       kv_cache_cap_bytes=kv_cache_cap_bytes(server_args), speculative_config=spec_cfg,
                       bench_module=self.bench_module, python=self.python, launch=LaunchSpec(server="process", tp=tp),
                       known_answer=KnownAnswerSpec(self.known_answer_allow_fail) if self.known_answer else None)


# ---------------------------------------------------------------- the job


class _UtcFormatter(logging.Formatter):
    converter = time.gmtime

    def formatTime(self, record, datefmt=None):  # noqa: N802 (logging's name)
        return time.strftime("%Y-%m-%dT%H:%M:%S", self.converter(record.created)) + f".{int(record.msecs):03d}Z"


class NodeJob:
    """Server + benchmark for one job; ``run()`` returns the exit status."""

    def __init__(self, spec: JobSpec, python: Optional[str] = None, spec_path: Optional[Path] = None):
        self.spec = spec
        self.spec_path = Path(spec_path or Path(spec.job_dir) / SPEC_FILE).resolve()  # what the benchmark reads
        self.stop_grace_s = spec.stop_grace_s
        self.job_dir = Path(spec.job_dir).resolve()
        self.logs = self.job_dir / "logs"
        self.python = python or spec.python or sys.executable
        self.server: Optional[ServerProcess] = None
        self.members: list[ServerProcess] = []  # topology=disagg: the prefill and decode servers (self.server: the router)
        self.workers: list = []  # multi-node: the other nodes' server steps (Popen of srun)
        self.bench = None
        self.bench_tag: Optional[ProcessTag] = None
        self._signal: Optional[int] = None
        self._signal_unix: Optional[float] = None  # when the first stop signal arrived (time.time())
        self.slurm_at_start: Optional[outcome.SlurmJobView] = None  # scontrol's view when the job began
        self._cleaning = False
        self._old_handlers: dict = {}
        self.api_key: Optional[str] = None  # never logged, never written
        self.phase = "start-up"  # what the job is doing: start-up, benchmark, lossless comparison
        self.end_cause: Optional[str] = None  # the job's end in words, for summary.json
        self.blamed_points: set[str] = set()  # points running while a server was failing (silent, engine gone)
        self.logger = logging.getLogger(f"specdec.node.{id(self)}")

    # -- logging and signals

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

    def fail(self, reason: str) -> None:
        """Record the one-line failure reason (launcher/job.py reads its first line)."""
        line = write_error(self.job_dir, reason)
        self.log(f"ERROR: {line}", logging.ERROR)

    # -- steps

    def _server_env(self) -> dict:
        env = dict(os.environ)
        env.update({k: str(v) for k, v in self.spec.env.items()})
        if self._cpu_server():
            env.update(get_engine(self.spec.engine).cpu_server_env(cpu_flags(), env))
        return env

    def _cpu_server(self) -> bool:
        """The server runs the engine's CPU build here (no GPUs asked, no container)."""
        return self.spec.launch.gpus_per_node == 0 and not self.spec.launch.container_image

    def _amx_permission_hook(self) -> bool:
        """Whether the server's processes ask for the AMX state at start (docs/disagg.md)."""
        return self._cpu_server() and bool(get_engine(self.spec.engine).cpu_server_env(cpu_flags(), {}))

    def _check(self) -> None:
        """Called while waiting and watching: a signal, or a worker node's server gone."""
        self.check_signal()
        # topology=disagg: a ready server's engine or API server ended (while the others start,
        # the first transfer runs, or a client runs), or one not ready yet exited
        self._check_servers([m for m in self.members if m.t_ready is not None],
                            "servers' start-up" if self.phase == "start-up" else self.phase)
        for m in self.members:
            if m.t_ready is None and m.poll() is not None:
                raise self.server_failure(m, "start-up")
        for i, w in enumerate(self.workers, start=1):
            rc = w.poll()
            if rc is not None:
                f = server_fault.ServerFault(label=f"server on node {i} (its srun step)", log=f"logs/server.node{i}.log",
                                             rc=rc, log_fatal=server_fault.fatal_signal_in_log(
                                                 log_tail(self.logs / f"server.node{i}.log", 2000)))
                self.end_cause = server_fault.fault_cause(f)
                raise ServerDiedError(server_fault.fault_message(f, self.phase), log_tail(self.logs / f"server.node{i}.log"),
                                      cause=self.end_cause, log=f.log)

    def serve(self, speculative_config: object = "spec", phase: str = "server") -> ServerProcess:
        """Start the server (speculating with ``speculative_config``, default the spec's;
        None: without speculation) and wait until it is ready: one server phase.
        Multi-node: one srun step per node, the head's API on this node. Stop it with
        ``stop_server()``."""
        sp, L = self.spec, self.spec.launch
        host = sp.bind_host
        probe = client_host(host)
        name = sp.served_name
        if L.server == "srun" and not slurm_steps.in_allocation():
            raise ServerStartError("the spec's launch.server is srun but this is not a Slurm allocation "
                                   "(SLURM_JOB_ID is unset); run it under sbatch/salloc or set launch.server=process")
        if L.nodes > 1 and L.server == "srun":
            nodes = slurm_steps.allocation_nodes()
            if len(nodes) < L.nodes:
                raise ServerStartError(f"the spec asks for {L.nodes} nodes but the allocation has {nodes}")
        else:  # child processes of this job: every rank on this host (one-host rehearsal of a multi-node launch)
            nodes = [None] * L.nodes
        if sp.port is not None and not port_is_free(host, sp.port):
            raise ServerStartError(f"port {sp.port} (SPECDEC_PORT or the spec's port) is already in use on {host}")
        attempts = 1 if sp.port is not None else 1 + PORT_RETRIES
        for attempt in range(attempts):
            port = sp.port if sp.port is not None else pick_free_port(host)
            rpc_port = pick_free_port(host) if L.nodes > 1 else None
            head = nodes[0] or probe  # process launch: the ranks meet on this host
            self.workers = []
            for rank in range(1, L.nodes):
                wargv = L.server_step_prefix(nodes[rank]) + sp.server_argv(host, port, rank, head, rpc_port,
                                                                           speculative_config)
                self.log(f"starting the {phase} on node {rank} ({nodes[rank] or 'this host'}): {subprocess_line(wargv)}")
                with open(self.logs / f"server.node{rank}.log", "ab") as f:
                    self.workers.append(spawn(wargv, stdout=f, env=self._server_env()))
            argv = L.server_step_prefix(nodes[0]) + sp.server_argv(host, port, 0, head, rpc_port, speculative_config)
            self.log(f"starting {phase} on {host}:{port}"
                     f"{' as a Slurm step' if L.server == 'srun' else ''}: {subprocess_line(argv)}")
            server = ServerProcess(argv, probe_host=probe, port=port, served_name=name,
                                   log_path=self.logs / "server.log", log=self.log,
                                   env=apikey.server_env(self.api_key, self._server_env()), api_key=self.api_key)
            server.label = "main server" if phase == "server" else phase
            self.server = server
            server.start()
            try:
                server.wait_ready(sp.ready_timeout_s, check=self._check)
                return server
            except ServerStartError as e:
                if attempt + 1 < attempts and "address already in use" in e.tail.lower():
                    self.log(f"port {port} was taken before the server bound it; trying another port")
                    self.stop_server()
                    continue
                raise
        raise AssertionError("unreachable")

    def stop_server(self, what: str = "server") -> None:
        """Stop the server phase: its processes (srun clients forward SIGTERM to their
        steps), then any server step still listed (scancel)."""
        procs = [w for w in self.workers] + [m.proc for m in self.members if m.proc is not None]
        if self.server is not None and self.server.proc is not None:
            procs.append(self.server.proc)
        left = terminate_trees(procs, self.stop_grace_s, self.log, what) if procs else set()
        if self.server is not None and self.server.proc is not None:
            self.log(f"{what} process ended (exit {describe_returncode(self.server.proc.returncode)})")
        if self.spec.launch.server == "srun" and slurm_steps.in_allocation():
            steps = slurm_steps.cancel_steps(os.environ["SLURM_JOB_ID"], slurm_steps.SERVER_STEP_NAME, self.log)
            if steps:
                self.log(f"WARNING: server step(s) still listed after scancel: {steps}", logging.ERROR)
        if left:
            self.log(f"WARNING: processes still running after SIGKILL: {sorted(left)}", logging.ERROR)
        self.workers = []
        self.members = []

    def _resolve_engine(self) -> Optional[str]:
        """The engine version and acceptance source this node runs (launcher.node.engine_check);
        a one-line problem when the version lacks what the job explicitly asks."""
        from launcher.node import engine_check

        try:
            res = engine_check.resolve(self.spec, self._server_env())
        except engine_check.EngineError as e:
            return str(e)
        self.spec = res.spec
        self.log(f"engine {self.spec.engine} {self.spec.engine_version or 'version unknown'} ({res.version_from}); "
                 f"per-request acceptance from {self.spec.acceptance_source}")
        if res.note:
            self.log(res.note)
        return None

    def _write_ready(self, server: ServerProcess) -> Path:
        info = server.ready_info(self.spec.bind_host)
        info.update({"engine": self.spec.engine, "acceptance_source": self.spec.acceptance_source,
                     "speculative_config": self.spec.speculative_config,
                     "engine_version": info.get("engine_version") or self.spec.engine_version,
                     "amx_permission_hook": self._amx_permission_hook()})
        if self.members:
            info.update(disagg_node.ready_info(self, server))
        return write_json_atomic(self.job_dir / "server_ready.json", info)

    def _bench_env(self, server: ServerProcess, ready_path: Path) -> dict:
        env = apikey.client_env(self.api_key, self._server_env())
        root = str(repo_root())
        pp = env.get("PYTHONPATH", "")
        if root not in pp.split(os.pathsep):
            env["PYTHONPATH"] = root + (os.pathsep + pp if pp else "")
        env.update({"SPECDEC_JOB_DIR": str(self.job_dir), "SPECDEC_SERVER_URL": server.url,
                    "SPECDEC_SERVER_READY_FILE": str(ready_path)})
        return env

    def bench_argv(self, url: str, role: str = "speculative") -> list[str]:
        """The benchmark's command: ours reads the job spec; another module gets its argv verbatim."""
        if self.spec.bench is not None and self.spec.bench_module == DEFAULT_BENCH_MODULE:
            return [self.python, "-m", DEFAULT_BENCH_MODULE, "--spec", str(self.spec_path),
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
        self.bench = spawn(argv, env=self.bench_tag.apply(self._bench_env(server, ready_path)), cwd=str(Path.cwd()))
        watched = [m for m in [server, *self.members] if isinstance(m, ServerProcess)]
        with Watchdog(watched):
            while True:
                rc = self.bench.poll()
                if rc is not None:
                    self.log(f"{what} finished with exit code {describe_returncode(rc)} "
                             f"after {time.monotonic() - t0:.1f} s")
                    if rc != 0:
                        self.check_signal()  # the job's own stop signal is the cause, not the benchmark's end
                        self._check_servers(watched, what, settle_s=3.0)  # a server failed first; the client noticed
                        silent = [m for m in watched if (m.unanswered() or _NEVER).for_s >= UNANSWERED_BLAME_S]
                        if silent:  # it failed while a server gave no answer: that is why
                            raise self.server_failure(silent[0], what)
                    if rc < 0 or rc >= 128:  # killed: the benchmark could not record its own end
                        self.end_cause = f"the {what} was killed by " + (
                            signal_name(-rc) if rc < 0 else signal_name(rc - 128))
                    return rc
                self._check()
                self._check_servers(watched, what)
                if any(m.unanswered() for m in watched):  # the points this silence hits
                    self._blame_running_points()
                for m in watched:
                    u = m.unanswered()
                    if u is not None and u.for_s >= self.spec.unanswered_timeout_s:
                        self.log(f"the {m.label} has not answered since {server_fault.clock(u.since_unix)} ({u.for_s:.0f} s, "
                                 f"server.unanswered_timeout_s={self.spec.unanswered_timeout_s:g}); "
                                 f"stopping the {what}")
                        raise self.server_failure(m, what)
                time.sleep(WATCH_INTERVAL_S)

    def _check_servers(self, watched: list[ServerProcess], what: str, settle_s: float = 0.0) -> None:
        """Raise for a server whose API server exited or whose engine process ended. An
        engine's death is followed by its API server's own end: wait up to ``settle_s``
        (3 s after an engine's death) for it, so the error says both."""
        for m in watched:
            m.check_engine_pids()
            if m.poll() is None and not m.engine_gone:
                continue
            self._blame_running_points()
            deadline = time.monotonic() + max(settle_s, 3.0 if m.engine_gone else 0.0)
            while m.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            if m.poll() is not None:
                self.log(f"the {m.label} exited (code {describe_returncode(m.poll())}) during the {what}")
            raise self.server_failure(m, what)

    def _blame_running_points(self) -> None:
        """Note the points the benchmark is running now (progress.json): a server is failing."""
        self.blamed_points.update(read_progress(self.job_dir).get("running") or [])

    def server_failure(self, server: ServerProcess, during: str) -> ServerDiedError:
        """The error for a server that failed after it was ready: which server, what ended
        (its API server, its engine, its answers), the signal, since when, and its log."""
        f = server.fault()
        self.end_cause = server_fault.fault_cause(f)
        return ServerDiedError(server_fault.fault_message(f, during), server.tail(), cause=self.end_cause,
                               log=server.log_name)

    def _restart_without_speculation(self, why: str) -> ServerProcess:
        """Stop the speculative server and start the same one without speculation:
        the lossless reference and the matched baseline share this one start."""
        self.log(f"restarting the server without speculation ({why})")
        self.stop_server("speculative server")
        return self.serve(speculative_config=None,
                          phase="baseline server" if "baseline" in why else "reference server")

    def _lossless_reference(self, server: ServerProcess, spec_outputs: Path) -> int:
        """The lossless check's second half: the server without speculation
        answers the same prompts; launcher.bench.lossless compares the outputs."""
        ready = self.job_dir / "lossless" / "reference_server_ready.json"
        ready.write_text(json.dumps(server.ready_info(self.spec.bind_host), indent=2) + "\n")
        argv = [self.python, "-m", "launcher.bench.lossless", "compare", "--url", server.url,
                "--model", server.served_name, "--spec", str(spec_outputs), "--save_dir", str(self.job_dir)]
        return self.run_client(argv, server, ready, "lossless comparison")

    def _baseline_bench(self, server: ServerProcess, baseline_dir: Path) -> int:
        """The matched baseline (sweep.baseline=true): the baseline's benchmark (this
        job spec's baseline section) against this server."""
        (baseline_dir / "logs").mkdir(parents=True, exist_ok=True)
        ready = write_json_atomic(baseline_dir / "server_ready.json", server.ready_info(self.spec.bind_host))
        return self.run_client(self.bench_argv(server.url, role="baseline"), server, ready, "baseline benchmark")

    def _write_speedups(self, results_dir: Path) -> None:
        """Speedups against the baseline, for whatever is complete now (never fails the job)."""
        argv = [self.python, "-m", "launcher.speedup", str(results_dir), "--job", str(self.job_dir)]
        self.log(f"writing speedups: {subprocess_line(argv)}")
        import subprocess
        try:
            p = subprocess.run(argv, env=self._bench_env(self.server, self.job_dir / "server_ready.json"),
                               capture_output=True, text=True, timeout=600)
            self.log(f"speedups: {(p.stdout + p.stderr).strip()[-2000:] or 'exit ' + str(p.returncode)}")
        except (OSError, subprocess.SubprocessError) as e:
            self.log(f"speedups not written: {e}", logging.ERROR)

    def _check_inputs(self) -> list[str]:
        """The inputs the server and the benchmark need, checked before the server starts."""
        from launcher.common.inputs import check_job_inputs

        sp, b = self.spec, self.spec.bench
        return check_job_inputs(model=sp.model, draft=(sp.speculative_config or {}).get("model"),
                                tokenizer=sp.tokenizer, env=os.environ,
                                bench=None if b is None or sp.bench_module != DEFAULT_BENCH_MODULE else b)

    def _finalize_summary(self, rc: int) -> None:
        """summary.json true after every end: each point from disk + what the job was doing."""
        if rc == 0 and self.end_cause is None:
            return  # the benchmark wrote the truth itself
        if self.spec.bench_module != DEFAULT_BENCH_MODULE and not has_summary(self.job_dir):
            return  # someone else's benchmark: its points are unknown
        reason = read_error(self.job_dir)
        cause = self.end_cause
        if cause is None and rc != 0 and reason is None:
            cause = outcome.end_cause(bench_rc=rc, phase=self.phase)
        try:
            s = finalize_job_dir(self.job_dir, rc=rc, cause=cause, reason=reason,
                                 points=[(p.dataset, p.temperature, p.concurrency) for p in self.spec.points],
                                 identity=self.spec.identity(), blamed=self.blamed_points)
            counts: dict[str, int] = {}
            for p in s["points"]:
                counts[p["status"]] = counts.get(p["status"], 0) + 1
            self.log("summary.json finalized: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
        except Exception as e:  # noqa: BLE001 - never hide the job's own status
            self.log(f"could not finalize summary.json: {type(e).__name__}: {e}", logging.ERROR)

    def _known_answer(self, keep_for_reference: bool) -> tuple[dict, Optional[ServerProcess]]:
        """Restart the target with itself as draft and probe it at each temperature
        of the sweep (launcher.bench.known_answer). Returns the verdict and, when
        ``keep_for_reference`` and the probe passed at T=0, the running server: its
        greedy outputs are the target's own, so the lossless check uses it as its
        reference instead of starting one more server."""
        from launcher.bench import known_answer as ka

        spec = self.spec.speculative_config
        k = num_speculative_tokens(spec)
        if not spec or not k:
            result = ka.skipped("the server has no speculative config with num_speculative_tokens")
            ka.record(self.job_dir, result)
            return result, None
        reason = ka.memory_skip_reason(self.spec.model, self.spec.launch.tp, ka.free_bytes_per_device())
        if reason:
            result = ka.skipped(reason)
            ka.record(self.job_dir, result)
            self.log(ka.one_line(result))
            return result, None
        self.log(f"known-answer probe: restarting the target as its own draft (draft_model, k={k})")
        self.stop_server("speculative server")
        probe_cfg = ka.self_draft_config(self.spec.model, int(k), self.spec.engine, self.spec.engine_version)
        sample_method = probe_cfg.get("draft_sample_method", "greedy")
        self.log(f"known-answer drafting: {sample_method}" + ("" if sample_method == "probabilistic" else
                 " (this engine version drafts greedily: the known answer holds only at T=0)"))
        try:
            server = self.serve(speculative_config=probe_cfg, phase="known-answer server")
        except ServerError as e:
            self.stop_server("known-answer server")
            result = ka.skipped(f"the target with itself as draft did not start: {e.reason}")
            ka.record(self.job_dir, result)
            self.log(ka.one_line(result))
            return result, None
        ready = self.job_dir / "known_answer_server_ready.json"
        ready.write_text(json.dumps(server.ready_info(self.spec.bind_host), indent=2) + "\n")
        temps = [f"{t:g}" for t in dict.fromkeys(p.temperature for p in self.spec.points)] or ["0"]
        argv = [self.python, "-m", "launcher.bench.known_answer", "--url", server.url,
                "--model", server.served_name, "--k", str(k),
                "--temperature", *temps, "--save_dir", str(self.job_dir),
                "--draft_sample_method", sample_method, "--acceptance_source", self.spec.acceptance_source,
                "--engine", self.spec.engine]
        try:
            self.run_client(argv, server, ready, "known-answer probe")
            result = json.loads((self.job_dir / "known_answer.json").read_text())
        except (ServerError, OSError, ValueError) as e:
            result = ka.skipped(f"the probe did not finish: {getattr(e, 'reason', e)}")
            ka.record(self.job_dir, result)
        self.log(ka.one_line(result))
        t0 = [e for e in result.get("temperatures", []) if e["temperature"] == 0.0]
        if keep_for_reference and t0 and t0[0]["passed"]:
            self.log("the known-answer server accepted every draft at T=0: it serves the lossless reference")
            return result, server
        self.stop_server("known-answer server")
        if keep_for_reference:
            self.log("known-answer probe did not pass at T=0: the lossless reference needs a server "
                     "without speculation")
        return result, None

    def _cleanup(self) -> None:
        self._cleaning = True
        if self.bench is not None:
            if self.bench.poll() is None:
                self.log("stopping the benchmark")
            left = terminate_trees([self.bench], self.stop_grace_s, self.log, "benchmark", tag=self.bench_tag)
            if left:
                self.log(f"WARNING: benchmark processes still running after SIGKILL: {sorted(left)}", logging.ERROR)
        if self.server is not None or self.workers or self.members:
            self.log("stopping the server")
            self.stop_server()
        self.log("no server or benchmark process left")

    # -- the job's phases: start-up checks, server + sweep, the second servers
    #    (known answer, lossless reference, matched baseline), the conclusion.
    #    run() holds the signal handling and the cleanup, in one place.

    def _start_telemetry(self):
        try:
            from launcher.telemetry import GpuMemorySampler
            sampler = GpuMemorySampler(interval_s=0.5, kv_cache_cap_bytes=self.spec.kv_cache_cap_bytes)
            sampler.start()
            return sampler
        except Exception as e:  # telemetry never breaks the job
            self.log(f"GPU telemetry unavailable: {type(e).__name__}: {e}")
            return None

    def _startup_checks(self) -> Optional[int]:
        """Before the server starts: the API-key rule, the inputs, the engine. The exit
        status when the job cannot go on, else None."""
        if apikey.api_key_in_args(self.spec.server_flags):
            self.end_cause = "the server arguments pass --api-key"
            self.fail(f"server arguments: --api-key on the command line is refused (fix: {apikey.FIX})")
            return EXIT_USAGE
        problems = self._check_inputs()
        self.check_signal()  # a stop signal during the checks (it also reaches their subprocesses) wins
        if problems:
            self.end_cause = f"input check failed: {problems[0]}"
            for line in problems[1:]:
                self.log(f"ERROR: {line}", logging.ERROR)
            self.fail(f"input check failed before the server started: {problems[0]}"
                      + (f" (and {len(problems) - 1} more in logs/job.log)" if len(problems) > 1 else ""))
            return EXIT_USAGE
        self.api_key = apikey.job_key(self.spec.bind_host, os.environ)
        self.log("server API key: " + (
            "from the environment (SPECDEC_API_KEY/VLLM_API_KEY)" if apikey.user_key(os.environ)
            else "generated for this job (server bound off loopback)" if self.api_key
            else "none (server bound to loopback)"))
        problem = self._resolve_engine()
        if problem:
            self.end_cause = f"engine check failed: {problem}"
            self.fail(f"engine check failed before the server started: {problem}")
            return EXIT_USAGE
        return None

    def _sweep(self) -> int:
        """The server and the benchmark's sweep against it; the benchmark's exit status."""
        disagg = self.spec.topology is not None and self.spec.topology.kind == "disagg"
        server = disagg_node.serve(self) if disagg else self.serve()
        rc = self._run_bench(server, self._write_ready(server))
        return 128 - rc if rc < 0 else rc  # killed by signal N: 128+N, as a shell reports it

    def _after_sweep(self, rc: int) -> int:
        """The second servers: the known-answer probe, then (one restart without
        speculation) the matched baseline and the lossless reference; the speedups."""
        if self.spec.topology is not None and self.spec.topology.parity is not None:
            rc = disagg_node.parity(self, rc)
        spec_outputs = self.job_dir / "lossless" / "spec_outputs.json"
        lossless = self.spec.bench is not None and self.spec.bench.lossless is not None and spec_outputs.exists()
        baseline = self.spec.baseline
        run_baseline = bool(baseline and baseline.run_here and baseline.bench)
        known, reference = None, None
        if self.spec.known_answer is not None:  # its server is the lossless reference when no baseline needs one
            known, reference = self._known_answer(keep_for_reference=lossless and not run_baseline)
        if reference is not None:
            rc = self._lossless_verdict(rc, self._lossless_reference(reference, spec_outputs))
        elif lossless or run_baseline:
            server = self._restart_without_speculation(
                " and ".join(w for w, on in (("matched baseline", run_baseline),
                                             ("lossless reference", lossless)) if on))
            if run_baseline:
                brc = self._baseline_bench(server, Path(baseline.job_dir))
                if rc == 0 and brc != 0:
                    rc = brc
                    self.fail(f"baseline benchmark failed (exit {describe_returncode(brc)}; "
                              f"see {Path(baseline.job_dir) / 'logs'})")
            if lossless:
                rc = self._lossless_verdict(rc, self._lossless_reference(server, spec_outputs))
        if known is not None and known.get("passed") is False and rc == 0 and not self.spec.known_answer.allow_fail:
            from launcher.bench.known_answer import defect_message

            bad = next(e for e in known["temperatures"] if not e["passed"])
            rc = 1
            self.fail(f"known-answer probe failed: {defect_message(bad)} (see known_answer.json; "
                      "set bench.known_answer_allow_fail=true to keep the job's status)")
        if baseline is not None:
            self._write_speedups(Path(baseline.job_dir).parent)
        return rc

    def _lossless_verdict(self, rc: int, lrc: int) -> int:
        if rc == 0 and lrc != 0:
            self.fail("lossless check failed: speculative and reference outputs differ (see lossless/result.json)")
            return lrc
        return rc

    def _conclude(self, rc: int) -> None:
        if rc != 0:
            err = read_error(self.job_dir)
            if err:  # the benchmark said why
                self.log(f"ERROR: {err}", logging.ERROR)
            else:
                self.fail(f"benchmark exited with code {describe_returncode(rc)} (see the job's stdout/stderr)")
        else:
            self.log("benchmark succeeded")

    def _note_slurm_deadline(self) -> None:
        """Under Slurm: read the job's start and time limit now, while scontrol surely
        answers, so a stop signal is judged against the deadline later (_slurm_stop_state)."""
        self.slurm_at_start = read_slurm_job(os.environ)
        v = self.slurm_at_start
        if v is not None and v.deadline_unix is not None:
            self.log(f"Slurm time limit {v.time_limit_s / 60:g} min: the job ends by "
                     f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(v.deadline_unix))} "
                     f"({TIME_LIMIT_SIGNAL} {TIME_LIMIT_WARNING_S} s ahead)")

    def _slurm_stop_state(self, signum: int) -> Optional[str]:
        """Slurm's reason for the stop signal ``signum`` (None outside Slurm): the signal's
        arrival against the job's deadline, whatever scontrol's state by now."""
        view = read_slurm_job(os.environ)
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

    def run(self) -> int:
        self.logs.mkdir(parents=True, exist_ok=True)
        clear_error(self.job_dir)  # from an earlier attempt (resume): no longer applies
        try:
            (self.job_dir / "server_ready.json").unlink()
        except FileNotFoundError:
            pass
        self._setup_logging()
        self._install_signals()
        sampler = None
        rc = 1
        try:
            self.log(f"job dir {self.job_dir}; model {self.spec.model}; host {os.uname().nodename}; "
                     f"SLURM_JOB_ID={os.environ.get('SLURM_JOB_ID', '-')}")
            self._note_slurm_deadline()
            sampler = self._start_telemetry()
            failed = self._startup_checks()
            if failed is not None:
                rc = failed
                return rc
            rc = self._sweep()
            rc = self._after_sweep(rc)
            self._conclude(rc)
        except Interrupted as e:
            rc = 128 + e.signum
            self.end_cause = outcome.end_cause(signum=e.signum, slurm_state=self._slurm_stop_state(e.signum))
            self.fail(f"interrupted by {signal_name(e.signum)}: {self.end_cause}")
            self._finalize_summary(rc)  # now too: Slurm's SIGKILL may follow within KillWait (default 30 s)
        except ServerError as e:
            rc = EXIT_SERVER_FAILED
            if self.end_cause is None:
                self.end_cause = e.cause or f"the server failed to start ({e.reason})"
            self.fail(e.reason if e.log is None or e.log in e.reason else f"{e.reason} (see {e.log})")
            if e.tail:
                self.log(f"last server log lines:\n{e.tail}", logging.ERROR)
        except Exception as e:
            rc = 1
            self.end_cause = self.end_cause or f"the job failed ({type(e).__name__}: {e})"
            self.log(traceback.format_exc(), logging.ERROR)
            self.fail(f"{type(e).__name__}: {e}")
        finally:
            try:
                self._cleanup()
                self._finalize_summary(rc)
            finally:
                if sampler is not None:
                    try:
                        sampler.stop()
                        sampler.write_report(self.job_dir / "gpu_telemetry.json")
                    except Exception as e:
                        self.log(f"could not write gpu_telemetry.json: {e}")
                if self._signal is not None and rc == 0:
                    self.log(f"{signal_name(self._signal)} arrived after the benchmark had finished; "
                             "keeping its status")
                self.log(f"job exits with status {rc}")
                self._restore_signals()
                self._teardown_logging()
        return rc


def slurm_job_id(env: Mapping[str, str]) -> Optional[str]:
    """This job's id as scontrol takes it (an array task's JOBID_TASK), None outside Slurm."""
    if env.get("SLURM_ARRAY_JOB_ID") and env.get("SLURM_ARRAY_TASK_ID"):
        return f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
    return env.get("SLURM_JOB_ID") or None


def read_slurm_job(env: Mapping[str, str]) -> Optional[outcome.SlurmJobView]:
    """What `scontrol -o show job` says of this job now; an empty view when it does not
    answer, None outside Slurm."""
    job_id = slurm_job_id(env)
    if not job_id:
        return None
    import subprocess
    try:
        r = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return outcome.SlurmJobView()
    return outcome.parse_scontrol_job(r.stdout.strip())


def _usage_error(msg: str, job_dir: str) -> int:
    print(f"run.sh: {msg}\n\n{USAGE}", file=sys.stderr)
    if job_dir:  # the launcher's job reads the reason from here
        try:
            write_error(job_dir, f"usage error: {msg}")
        except OSError:
            pass
    return EXIT_USAGE


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="python -m launcher.node.serve_and_bench", add_help=False, allow_abbrev=False)
    p.add_argument("--spec", help="the job spec (JOB_DIR/job.json)")
    p.add_argument("-h", "--help", action="store_true")
    known, rest = p.parse_known_args(argv)
    if known.help and not rest and known.spec is None:
        print(USAGE)
        return 0
    if known.spec is not None and not rest:
        path = known.spec
        try:
            spec = JobSpec.read(path)
        except SpecError as e:
            return _usage_error(str(e), "")
        return NodeJob(spec, python=os.environ.get("SPECDEC_PYTHON", "").strip() or None, spec_path=Path(path)).run()
    try:
        server_args, bench_args = split_args(argv)
        cfg = NodeConfig.from_env(os.environ)
        spec = cfg.to_spec(server_args, bench_args)
    except UsageError as e:
        return _usage_error(str(e), os.environ.get("SPECDEC_JOB_DIR", "").strip())
    spec_path = Path(spec.job_dir) / SPEC_FILE
    if spec_path.exists():  # the launcher's own spec stays; this run's goes next to it
        spec_path = Path(spec.job_dir) / "logs" / f"run_sh.{SPEC_FILE}"
    spec.write(spec_path)
    return NodeJob(spec, spec_path=spec_path).run()


if __name__ == "__main__":
    sys.exit(main())
