"""One job on the node: start the server, wait until it is ready, run the
benchmark against it, stop the server, exit with the benchmark's status.

    python -m launcher.node.serve_and_bench --spec JOB_DIR/job.json
    python -m launcher.node.serve_and_bench [SERVER ARGS...] -- [BENCH ARGS...]

The first form is what jobs run: everything comes from the job spec
(launcher/contracts/job.py) the launcher wrote; the matched baseline (sweep.baseline=true)
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
import contextlib
import io
import logging
import os
import shutil
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from launcher.bench.cli import spec_from_argv
from launcher.bench.known_answer import defect_message
from launcher.contracts.job import BENCH_MODULE, JobSpec, KnownAnswerSpec, LaunchSpec, SPEC_FILE, SpecError
from launcher.contracts.server_ready import ready_path
from launcher.engines import default_engine, key_envs
from launcher.engines.flags import split_at_separator
from launcher.node import disagg as disagg_node, engine_check, outcome, phases
from launcher.node.client import ClientRun
from launcher.node.lifecycle import (DEFAULT_STOP_GRACE_S, describe_returncode, Interrupted, ServerError, signal_name,
                                     terminate_trees)
from launcher.node.net import client_host, pick_free_port, port_is_free, subprocess_line  # noqa: F401 (re-exported)
from launcher.results.job_end import finalize_job_dir
from launcher.results.status import clear_error, read_error, write_error
from launcher.results.summary import has_summary, point_rows
from launcher.runtime import apikey
from launcher.runtime.inputs import check_job_inputs
from launcher.runtime import machine
from launcher.runtime.telemetry import GpuMemorySampler

EXIT_USAGE = 2
EXIT_SERVER_FAILED = 3
DEFAULT_SERVER_CMD = default_engine().default_command
DEFAULT_BENCH_MODULE = BENCH_MODULE
DEFAULT_READY_TIMEOUT_S = 1800.0
DEFAULT_UNANSWERED_TIMEOUT_S = 300.0

USAGE = """usage: run.sh [SERVER ARGS...] -- [BENCH ARGS...]

Starts `$SPECDEC_SERVER_CMD $HF_MODEL_CKPT [SERVER ARGS...]` (default command
`{default_cmd}`), waits until it is ready, runs
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


            try:  # arguments that do not parse: the benchmark itself says so (exit 2), after the checks
                with contextlib.redirect_stderr(io.StringIO()):
                    bench, points = spec_from_argv(bench_args)
            except SystemExit:
                bench = None
        eng = default_engine()  # run.sh serves the default engine
        u = eng.read_user_args(server_args, self.model)
        if u.speculative_config_invalid:
            raise UsageError("the speculative config among the server arguments is not a JSON object")
        return JobSpec(recipe="run.sh", server_id=self.job_dir.name, job_dir=str(self.job_dir), model=self.model,
                       served_name=u.served_name, server_command=self.server_cmd, server_flags=u.flags,
                       acceptance_flags=u.acceptance, bind_host=self.bind_host, port=self.port,
                       ready_timeout_s=self.ready_timeout_s, stop_grace_s=self.stop_grace_s,
                       unanswered_timeout_s=self.unanswered_timeout_s,
                       bench=bench, bench_args=[] if bench else list(bench_args), points=points,
                       tokenizer=u.tokenizer, kv_cache_cap_bytes=u.kv_cache_cap_bytes,
                       speculative_config=u.speculative_config, engine=eng.name,
                       bench_module=self.bench_module, python=self.python, launch=LaunchSpec(server="process", tp=u.tp),
                       known_answer=KnownAnswerSpec(self.known_answer_allow_fail) if self.known_answer else None)


def usage() -> str:
    return USAGE.replace("{default_cmd}", DEFAULT_SERVER_CMD)


# ---------------------------------------------------------------- the job


class NodeJob(ClientRun):
    """Server + benchmark for one job; ``run()`` returns the exit status."""
    _machine: Optional[machine.MachineSampler] = None  # started with the job's telemetry


    # -- steps

    def _resolve_engine(self) -> Optional[str]:
        """The engine version and acceptance source this node runs (launcher.node.engine_check);
        a one-line problem when the version lacks what the job explicitly asks."""

        try:
            res = engine_check.resolve(self.spec, self.server_env())
        except engine_check.EngineError as e:
            return str(e)
        self.spec = res.spec
        self.log(f"engine {self.spec.engine} {self.spec.engine_version or 'version unknown'} ({res.version_from}); "
                 f"per-request acceptance from {self.spec.acceptance_source}")
        if res.note:
            self.log(res.note)
        return None

    def _check_inputs(self) -> list[str]:
        """The inputs the server and the benchmark need, checked before the server starts."""

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
            for p in point_rows(s):
                counts[p.status] = counts.get(p.status, 0) + 1
            self.log("summary.json finalized: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
        except Exception as e:  # noqa: BLE001 - never hide the job's own status
            self.log(f"could not finalize summary.json: {type(e).__name__}: {e}", logging.ERROR)

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
        if self._key_dir is not None:
            shutil.rmtree(self._key_dir, ignore_errors=True)
        self.log("no server or benchmark process left")

    # -- the job's phases: start-up checks, server + sweep, the second servers
    #    (known answer, lossless reference, matched baseline), the conclusion.
    #    run() holds the signal handling and the cleanup, in one place.

    def _start_telemetry(self):
        try:
            sampler = GpuMemorySampler(interval_s=0.5, kv_cache_cap_bytes=self.spec.kv_cache_cap_bytes)
            sampler.start()
        except Exception as e:  # telemetry never breaks the job
            self.log(f"GPU telemetry unavailable: {type(e).__name__}: {e}")
            sampler = None
        self._machine = _machine_sampler(self)
        return sampler

    def _startup_checks(self) -> Optional[int]:
        """Before the server starts: the API-key rule, the inputs, the engine. The exit
        status when the job cannot go on, else None."""
        if apikey.api_key_in_args(self.spec.server_flags, self.engine):
            self.end_cause = f"the server arguments pass {self.engine.key_flag}"
            self.fail(f"server arguments: {self.engine.key_flag} on the command line is refused "
                      f"(fix: {apikey.fix(self.engine)})")
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
            f"from the environment ({'/'.join((apikey.CLIENT_ENV, *key_envs()))})" if apikey.user_key(os.environ)
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
        starts = self._server_starts()
        while rc == 0 and not disagg and self.server_start < starts:  # sweep.server_starts
            self.server_start += 1
            self.log(f"server start {self.server_start}/{starts}: restarting the speculative server")
            self.stop_server("speculative server")
            server = self.serve(phase=f"server start {self.server_start}")
            rc = self._run_bench(server, self._write_ready(server))
        self.server_start = 1
        return 128 - rc if rc < 0 else rc  # killed by signal N: 128+N, as a shell reports it

    def _server_starts(self) -> int:
        return max(1, int(self.spec.bench.server_starts)) if self.spec.bench is not None else 1

    def _after_sweep(self, rc: int) -> int:
        """The second servers: with bench.disagg_parity the aggregated server's points, the
        known-answer probe, then the parity verdict (it sets aside temperatures whose known answer
        failed); then (one restart without speculation) the matched baseline and the lossless
        reference; the speedups."""
        parity = self.spec.topology is not None and self.spec.topology.parity is not None
        reference_rc = disagg_node.parity_reference(self) if parity else 0
        spec_outputs = self.job_dir / "lossless" / "spec_outputs.json"
        lossless = self.spec.bench is not None and self.spec.bench.lossless is not None and spec_outputs.exists()
        baseline = self.spec.baseline
        run_baseline = bool(baseline and baseline.run_here and baseline.bench)
        known, reference = None, None
        if self.spec.known_answer is not None:  # its server is the lossless reference when no baseline needs one
            known, reference = phases.known_answer(self, keep_for_reference=lossless and not run_baseline)
        if parity:
            rc = disagg_node.parity_verdict(self, rc, reference_rc)
        if reference is not None:
            rc = self._lossless_verdict(rc, phases.lossless_reference(self, reference, spec_outputs))
        elif lossless or run_baseline:
            server = phases.restart_without_speculation(self, 
                " and ".join(w for w, on in (("matched baseline", run_baseline),
                                             ("lossless reference", lossless)) if on))
            if run_baseline:
                server, brc = phases.baseline_starts(self, server, Path(baseline.job_dir), self._server_starts())
                if rc == 0 and brc != 0:
                    rc = brc
                    self.fail(f"baseline benchmark failed (exit {describe_returncode(brc)}; "
                              f"see {Path(baseline.job_dir) / 'logs'})")
            if lossless:
                rc = self._lossless_verdict(rc, phases.lossless_reference(self, server, spec_outputs))
        if known is not None and known.get("passed") is False and rc == 0 and not self.spec.known_answer.allow_fail:

            bad = next(e for e in known["temperatures"] if not e["passed"])
            rc = 1
            self.fail(f"known-answer probe failed: {defect_message(bad)} (see known_answer.json; "
                      "set bench.known_answer_allow_fail=true to keep the job's status)")
        if baseline is not None:
            phases.write_speedups(self, Path(baseline.job_dir).parent)
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

    def run(self) -> int:
        self.logs.mkdir(parents=True, exist_ok=True)
        clear_error(self.job_dir)  # from an earlier attempt (resume): no longer applies
        try:
            ready_path(self.job_dir).unlink()
        except FileNotFoundError:
            pass
        self._setup_logging()
        self._install_signals()
        sampler = None
        rc = 1
        try:
            self.log(f"job dir {self.job_dir}; model {self.spec.model}; host {os.uname().nodename}; "
                     f"SLURM_JOB_ID={os.environ.get('SLURM_JOB_ID', '-')}")
            self.note_slurm_deadline()
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
            self.end_cause = outcome.end_cause(signum=e.signum, slurm_state=self.slurm_stop_state(e.signum))
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
                if self._machine is not None:
                    self._machine.stop()
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


def _machine_sampler(job: NodeJob) -> Optional[machine.MachineSampler]:
    """Clocks, throttling, host CPU and the engine's CPU time, sampled for the points'
    configuration.json (launcher.runtime.machine); None when it cannot start."""
    def engine_pids() -> list[int]:  # the server now, or the disaggregated servers and router
        procs = ([job.server] if job.server is not None else []) + list(job.members)
        return [p.pid for p in procs if p.pid is not None]
    try:
        return machine.MachineSampler(machine.samples_path(job.job_dir), interval_s=0.5,
                                      engine_pids=engine_pids).start()
    except Exception as e:  # telemetry never breaks the job
        job.log(f"machine telemetry unavailable: {type(e).__name__}: {e}")
        return None


def _usage_error(msg: str, job_dir: str) -> int:
    print(f"run.sh: {msg}\n\n{usage()}", file=sys.stderr)
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
        print(usage())
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
