"""One job on the node: start the server, wait until it is ready, run the
benchmark against it, stop the server, exit with the benchmark's status.

    python -m launcher.node.serve_and_bench --spec JOB_DIR/job.json
    python -m launcher.node.serve_and_bench [SERVER ARGS...] -- [BENCH ARGS...]

The first form is what jobs run: everything comes from the job spec
(launcher/contracts/job.py) the launcher wrote; the matched baseline (sweep.baseline=true)
is its ``baseline`` section. The job runs as phases (start-up checks, server and
sweep, the second servers, the conclusion), with the signal handling and the
cleanup in ``NodeJob.run``; its parts are held, not inherited: the context
(launcher.node.job_context), the server group (launcher.node.servers), the client run
(launcher.node.client) and the phases (launcher.node.phases). The second is
run.sh's (the hand-use wrapper): it builds the same spec from its arguments and
the environment (launcher.node.run_sh), writes it to the job folder as job.json,
and runs it:

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
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Optional, Sequence

from launcher.bench import lossless
from launcher.bench.known_answer import defect_message
from launcher.contracts.job import JobSpec, SpecError
from launcher.contracts.job_paths import JobPaths
from launcher.node import disagg, point_status
from launcher.node.client import ClientRun
from launcher.node.job_context import JobContext
from launcher.node.lifecycle import describe_returncode, Interrupted, ServerError, signal_name
from launcher.node.net import client_host, pick_free_port, port_is_free  # noqa: F401 (re-exported)
from launcher.node.phases import Phases
from launcher.node.ready_file import write_ready
from launcher.node.run_sh import DEFAULT_BENCH_MODULE, NodeConfig, UsageError, split_args, usage
from launcher.node.servers import ServerGroup
from launcher.node.startup import startup_checks
from launcher.results.job_end import finalize_job_dir
from launcher.results.status import clear_error, read_error, write_error
from launcher.results.summary import has_summary, point_rows
from launcher.runtime import machine
from launcher.runtime.telemetry import GpuMemorySampler

EXIT_USAGE = 2
EXIT_SERVER_FAILED = 3


class NodeJob:
    """Server + benchmark for one job; ``run()`` returns the exit status. Its parts: the
    context (``ctx``), the server group (``servers``), the client run (``client``) and the
    phases after the sweep (``phases``)."""

    def __init__(self, spec: JobSpec, python: Optional[str] = None, spec_path: Optional[Path] = None):
        self.ctx = JobContext(spec, python, spec_path)
        self.servers = ServerGroup(self.ctx)
        self.client = ClientRun(self.ctx, self.servers)
        self.phases = Phases(self.ctx, self.servers, self.client)
        self._machine: Optional[machine.MachineSampler] = None  # started with the job's telemetry

    def _finalize_summary(self, rc: int) -> None:
        """summary.json true after every end: each point from disk + what the job was doing."""
        ctx = self.ctx
        if rc == 0 and ctx.end_cause is None:
            return  # the benchmark wrote the truth itself
        if ctx.spec.bench_module != DEFAULT_BENCH_MODULE and not has_summary(ctx.job_dir):
            return  # someone else's benchmark: its points are unknown
        reason = read_error(ctx.job_dir)
        cause = ctx.end_cause
        if cause is None and rc != 0 and reason is None:
            cause = point_status.end_cause(bench_rc=rc, phase=ctx.phase)
        try:
            s = finalize_job_dir(ctx.job_dir, rc=rc, cause=cause, reason=reason,
                                 points=[(p.dataset, p.temperature, p.concurrency) for p in ctx.spec.points],
                                 identity=ctx.spec.identity(), blamed=self.servers.blamed_points)
            counts: dict[str, int] = {}
            for p in point_rows(s):
                counts[p.status] = counts.get(p.status, 0) + 1
            ctx.log("summary.json finalized: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
        except Exception as e:  # noqa: BLE001 - never hide the job's own status
            ctx.log(f"could not finalize summary.json: {type(e).__name__}: {e}", logging.ERROR)

    def _cleanup(self) -> None:
        self.ctx.signals.cleaning = True
        self.client.stop()
        self.servers.shut_down()
        self.ctx.log("no server or benchmark process left")

    # -- the job's phases: start-up checks, server + sweep, the second servers
    #    (known answer, lossless reference, matched baseline), the conclusion.
    #    run() holds the signal handling and the cleanup, in one place.

    def _start_telemetry(self):
        try:
            sampler = GpuMemorySampler(interval_s=0.5, kv_cache_cap_bytes=self.ctx.spec.kv_cache_cap_bytes)
            sampler.start()
        except Exception as e:  # telemetry never breaks the job
            self.ctx.log(f"GPU telemetry unavailable: {type(e).__name__}: {e}")
            sampler = None
        self._machine = _machine_sampler(self.ctx, self.servers)
        return sampler

    def _sweep(self) -> int:
        """The server and the benchmark's sweep against it; the benchmark's exit status."""
        ctx, servers, client = self.ctx, self.servers, self.client
        server = disagg.serve(servers) if ctx.disagg else servers.serve()
        rc = client.run_bench(server, write_ready(servers, server))
        starts = self._server_starts()
        while rc == 0 and not ctx.disagg and client.server_start < starts:  # sweep.server_starts
            client.server_start += 1
            ctx.log(f"server start {client.server_start}/{starts}: restarting the speculative server")
            servers.stop("speculative server")
            server = servers.serve(phase=f"server start {client.server_start}")
            rc = client.run_bench(server, write_ready(servers, server))
        client.server_start = 1
        return 128 - rc if rc < 0 else rc  # killed by signal N: 128+N, as a shell reports it

    def _server_starts(self) -> int:
        bench = self.ctx.spec.bench
        return max(1, int(bench.server_starts)) if bench is not None else 1

    def _after_sweep(self, rc: int) -> int:
        """The second servers: with bench.disagg_parity the aggregated server's points, the
        known-answer probe, then the parity verdict (it sets aside temperatures whose known answer
        failed); then (one restart without speculation) the matched baseline and the lossless
        reference; the speedups."""
        ctx, phases, sp = self.ctx, self.phases, self.ctx.spec
        parity = sp.topology is not None and sp.topology.parity is not None
        reference_rc = phases.parity_reference() if parity else 0
        spec_outputs = lossless.spec_outputs_path(ctx.job_dir)
        check_lossless = sp.bench is not None and sp.bench.lossless is not None and spec_outputs.exists()
        baseline = sp.baseline
        run_baseline = bool(baseline and baseline.run_here and baseline.bench)
        known, reference = None, None
        if sp.known_answer is not None:  # its server is the lossless reference when no baseline needs one
            known, reference = phases.known_answer(keep_for_reference=check_lossless and not run_baseline)
        if parity:
            rc = phases.parity_verdict(rc, reference_rc)
        if reference is not None:
            rc = self._lossless_verdict(rc, phases.lossless_reference(reference, spec_outputs))
        elif check_lossless or run_baseline:
            server = phases.restart_without_speculation(
                " and ".join(w for w, on in (("matched baseline", run_baseline),
                                             ("lossless reference", check_lossless)) if on))
            if run_baseline:
                server, brc = phases.baseline_starts(server, Path(baseline.job_dir), self._server_starts())
                if rc == 0 and brc != 0:
                    rc = brc
                    ctx.fail(f"baseline benchmark failed (exit {describe_returncode(brc)}; "
                             f"see {JobPaths(baseline.job_dir).logs})")
            if check_lossless:
                rc = self._lossless_verdict(rc, phases.lossless_reference(server, spec_outputs))
        if known is not None and known.get("passed") is False and rc == 0 and not ctx.spec.known_answer.allow_fail:
            bad = next(e for e in known["temperatures"] if not e["passed"])
            rc = 1
            ctx.fail(f"known-answer probe failed: {defect_message(bad)} (see known_answer.json; "
                     "set bench.known_answer_allow_fail=true to keep the job's status)")
        if baseline is not None:
            phases.write_speedups(Path(baseline.job_dir).parent)
        return rc

    def _lossless_verdict(self, rc: int, lrc: int) -> int:
        if rc == 0 and lrc != 0:
            self.ctx.fail("lossless check failed: speculative and reference outputs differ (see lossless/result.json)")
            return lrc
        return rc

    def _conclude(self, rc: int) -> None:
        if rc != 0:
            err = read_error(self.ctx.job_dir)
            if err:  # the benchmark said why
                self.ctx.log(f"ERROR: {err}", logging.ERROR)
            else:
                self.ctx.fail(f"benchmark exited with code {describe_returncode(rc)} (see the job's stdout/stderr)")
        else:
            self.ctx.log("benchmark succeeded")

    def run(self) -> int:
        ctx = self.ctx
        ctx.paths.make_logs()
        clear_error(ctx.job_dir)  # from an earlier attempt (resume): no longer applies
        ctx.paths.server_ready().unlink(missing_ok=True)
        ctx.open_log()
        ctx.signals.install()
        sampler = None
        rc = 1
        try:
            ctx.log(f"job dir {ctx.job_dir}; model {ctx.spec.model}; host {os.uname().nodename}; "
                    f"SLURM_JOB_ID={os.environ.get('SLURM_JOB_ID', '-')}")
            ctx.note_slurm_deadline()
            sampler = self._start_telemetry()
            if not startup_checks(ctx, self.servers):
                rc = EXIT_USAGE
                return rc
            rc = self._sweep()
            rc = self._after_sweep(rc)
            self._conclude(rc)
        except Interrupted as e:
            rc = 128 + e.signum
            ctx.end_cause = point_status.end_cause(signum=e.signum, slurm_state=ctx.slurm_stop_state(e.signum))
            ctx.fail(f"interrupted by {signal_name(e.signum)}: {ctx.end_cause}")
            self._finalize_summary(rc)  # now too: Slurm's SIGKILL may follow within KillWait (default 30 s)
        except ServerError as e:
            rc = EXIT_SERVER_FAILED
            if ctx.end_cause is None:
                ctx.end_cause = e.cause or f"the server failed to start ({e.reason})"
            ctx.fail(e.reason if e.log is None or e.log in e.reason else f"{e.reason} (see {e.log})")
            if e.tail:
                ctx.log(f"last server log lines:\n{e.tail}", logging.ERROR)
        except Exception as e:
            rc = 1
            ctx.end_cause = ctx.end_cause or f"the job failed ({type(e).__name__}: {e})"
            ctx.log(traceback.format_exc(), logging.ERROR)
            ctx.fail(f"{type(e).__name__}: {e}")
        finally:
            try:
                self._cleanup()
                self._finalize_summary(rc)
            finally:
                self._end(rc, sampler)
        return rc

    def _end(self, rc: int, sampler) -> None:
        """The job's last words: its telemetry written, its signals and log given back."""
        ctx = self.ctx
        if self._machine is not None:
            self._machine.stop()
        if sampler is not None:
            try:
                sampler.stop()
                sampler.write_report(ctx.paths.gpu_telemetry)
            except Exception as e:
                ctx.log(f"could not write gpu_telemetry.json: {e}")
        if ctx.signals.received is not None and rc == 0:
            ctx.log(f"{signal_name(ctx.signals.received)} arrived after the benchmark had finished; "
                    "keeping its status")
        ctx.log(f"job exits with status {rc}")
        ctx.signals.restore()
        ctx.close_log()


def _machine_sampler(ctx: JobContext, servers: ServerGroup) -> Optional[machine.MachineSampler]:
    """Clocks, throttling, host CPU and the engine's CPU time, sampled for the points'
    configuration.json (launcher.runtime.machine); None when it cannot start."""
    try:
        return machine.MachineSampler(ctx.paths.machine_samples, interval_s=0.5,
                                      engine_pids=servers.engine_pids).start()
    except Exception as e:  # telemetry never breaks the job
        ctx.log(f"machine telemetry unavailable: {type(e).__name__}: {e}")
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
    paths = JobPaths(spec.job_dir)
    spec_path = paths.spec
    if spec_path.exists():  # the launcher's own spec stays; this run's goes next to it
        spec_path = paths.run_sh_spec
    spec.write(spec_path)
    return NodeJob(spec, spec_path=spec_path).run()


if __name__ == "__main__":
    sys.exit(main())
