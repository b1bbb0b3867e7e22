"""The node job's extra phases, on the job's parts (its context, its server group, its
client run): the known-answer probe, the lossless reference, the matched baseline, the
restart without speculation they share, the speedups, and bench.disagg_parity's run of the
aggregated server and its verdict. The job (launcher.node.serve_and_bench.NodeJob) runs
them after its sweep."""
from __future__ import annotations

import logging
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Optional

from launcher.bench import known_answer as ka
from launcher.contracts.job import BENCH_MODULE
from launcher.contracts.job_paths import JobPaths
from launcher.contracts.server_ready import write_server_ready
from launcher.engines import num_speculative_tokens
from launcher.node import disagg, slurm_steps
from launcher.node.client import ClientRun
from launcher.node.job_context import JobContext
from launcher.node.lifecycle import ServerError, ServerProcess, describe_returncode
from launcher.node.net import subprocess_line
from launcher.node.servers import ServerGroup
from launcher.results.disagg_parity import one_line, read_parity


class _NoServer:
    """A client that needs no server (the parity verdict reads files): never exits."""
    url = ""

    def poll(self) -> None:
        return None

    def tail(self) -> str:
        return ""


class Phases:
    """The phases after the sweep, each a method on the job's context, servers and client run."""

    def __init__(self, ctx: JobContext, servers: ServerGroup, client: ClientRun):
        self.ctx = ctx
        self.servers = servers
        self.client = client

    def restart_without_speculation(self, why: str) -> ServerProcess:
        """Stop the speculative server and start the same one without speculation:
        the lossless reference and the matched baseline share this one start."""
        self.ctx.log(f"restarting the server without speculation ({why})")
        self.servers.stop("speculative server")
        if self.ctx.disagg:  # the same prefill/decode servers and router, without speculation
            return disagg.serve(self.servers, speculative_config=None,
                                phase="baseline" if "baseline" in why else "reference")
        return self.servers.serve(speculative_config=None,
                                  phase="baseline server" if "baseline" in why else "reference server")

    def lossless_reference(self, server: ServerProcess, spec_outputs: Path) -> int:
        """The lossless check's second half: the server without speculation
        answers the same prompts; launcher.bench.lossless compares the outputs."""
        ctx = self.ctx
        ready = write_server_ready(ctx.paths.server_ready("lossless"), server.ready_info(ctx.spec.bind_host))
        argv = [ctx.python, "-m", "launcher.bench.lossless", "compare", "--url", server.url,
                "--model", server.served_name, "--spec", str(spec_outputs), "--save_dir", str(ctx.job_dir)]
        return self.client.run_client(argv, server, ready, "lossless comparison")

    def baseline_bench(self, server: ServerProcess, baseline_dir: Path) -> int:
        """The matched baseline (sweep.baseline=true): the baseline's benchmark (this
        job spec's baseline section) against this server."""
        baseline = JobPaths(baseline_dir)
        baseline.make_logs()
        info = server.ready_info(self.ctx.spec.bind_host)
        if self.ctx.disagg:  # the baseline's points read the same topology (servers, decode /metrics)
            info = replace(info, **disagg.ready_info(self.servers, server))
        ready = write_server_ready(baseline.server_ready(), info)
        return self.client.run_client(self.client.bench_argv(server.url, role="baseline"), server, ready,
                                      "baseline benchmark")

    def baseline_starts(self, server: ServerProcess, baseline_dir: Path, starts: int) -> tuple[ServerProcess, int]:
        """The matched baseline on each of ``starts`` starts of the server without speculation
        (sweep.server_starts; the first is ``server``): (the server running now, the exit status)."""
        client = self.client
        rc = self.baseline_bench(server, baseline_dir)
        while rc == 0 and client.server_start < starts:
            client.server_start += 1
            server = self.restart_without_speculation(
                f"matched baseline, server start {client.server_start}/{starts}")
            rc = self.baseline_bench(server, baseline_dir)
        client.server_start = 1
        return server, rc

    def write_speedups(self, results_dir: Path) -> None:
        """Speedups against the baseline, for whatever is complete now (never fails the job)."""
        ctx = self.ctx
        argv = [ctx.python, "-m", "launcher.speedup", str(results_dir), "--job", str(ctx.job_dir)]
        ctx.log(f"writing speedups: {subprocess_line(argv)}")
        try:
            p = subprocess.run(argv, env=self.client.bench_env(self.servers.server, ctx.paths.server_ready()),
                               capture_output=True, text=True, timeout=600)
            ctx.log(f"speedups: {(p.stdout + p.stderr).strip()[-2000:] or 'exit ' + str(p.returncode)}")
        except (OSError, subprocess.SubprocessError) as e:
            ctx.log(f"speedups not written: {e}", logging.ERROR)

    def known_answer(self, keep_for_reference: bool) -> tuple[dict, Optional[ServerProcess]]:
        """Restart the target with itself as draft and probe it at each temperature
        of the sweep (launcher.bench.known_answer). Returns the verdict and, when
        ``keep_for_reference`` and the probe passed at T=0, the running server: its
        greedy outputs are the target's own, so the lossless check uses it as its
        reference instead of starting one more server."""
        ctx, sp = self.ctx, self.ctx.spec
        k = num_speculative_tokens(sp.speculative_config)
        if not sp.speculative_config or not k:
            result = ka.skipped("the server has no speculative config with num_speculative_tokens")
            ka.record(ctx.job_dir, result)
            return result, None
        reason = ka.memory_skip_reason(sp.model, sp.launch.tp, ka.free_bytes_per_device())
        if reason:
            return self._known_answer_skipped(reason), None
        ctx.log(f"known-answer probe: restarting the target as its own draft (draft_model, k={k})")
        self.servers.stop("speculative server")
        probe_cfg = ka.self_draft_config(sp.model, int(k), self.ctx.engine, sp.engine_version)
        sample_method = probe_cfg.get("draft_sample_method", "greedy")
        ctx.log(f"known-answer drafting: {sample_method}" + ("" if sample_method == "probabilistic" else
                " (this engine version drafts greedily: the known answer holds only at T=0)"))
        try:
            server = self.servers.serve(speculative_config=probe_cfg, phase="known-answer server")
        except ServerError as e:
            self.servers.stop("known-answer server")
            return self._known_answer_skipped(f"the target with itself as draft did not start: {e.reason}"), None
        ready = write_server_ready(ctx.paths.server_ready("known_answer"), server.ready_info(sp.bind_host))
        temps = [f"{t:g}" for t in dict.fromkeys(p.temperature for p in sp.points)] or ["0"]
        argv = [ctx.python, "-m", "launcher.bench.known_answer", "--url", server.url,
                "--model", server.served_name, "--k", str(k),
                "--temperature", *temps, "--save_dir", str(ctx.job_dir),
                "--draft_sample_method", sample_method, "--acceptance_source", sp.acceptance_source,
                "--engine", sp.engine]
        try:
            self.client.run_client(argv, server, ready, "known-answer probe")
            result = ka.read(ctx.job_dir)
        except (ServerError, OSError, ValueError) as e:
            result = ka.skipped(f"the probe did not finish: {getattr(e, 'reason', e)}")
            ka.record(ctx.job_dir, result)
        ctx.log(ka.one_line(result))
        t0 = [e for e in result.get("temperatures", []) if e["temperature"] == 0.0]
        if keep_for_reference and t0 and t0[0]["passed"]:
            ctx.log("the known-answer server accepted every draft at T=0: it serves the lossless reference")
            return result, server
        self.servers.stop("known-answer server")
        if keep_for_reference:
            ctx.log("known-answer probe did not pass at T=0: the lossless reference needs a server "
                    "without speculation")
        return result, None

    def _known_answer_skipped(self, reason: str) -> dict:
        result = ka.skipped(reason)
        ka.record(self.ctx.job_dir, result)
        self.ctx.log(ka.one_line(result))
        return result

    def parity_reference(self) -> int:
        """bench.disagg_parity, first half: the disaggregated servers stop, and the aggregated server
        of the same recipe (the same flags, no KV transfer) runs the same points into its own job
        folder (its job.json written here). Returns its benchmark's exit status."""
        ctx = self.ctx
        par = ctx.spec.topology.parity
        agg = JobPaths(par.job_dir)
        agg.make_logs()
        agg_spec = replace(ctx.spec, server_id=agg.folder.name, job_dir=str(agg.folder), topology=None,
                           bench=par.bench, baseline=None, known_answer=None).write()
        ctx.log("disagg parity: stopping the disaggregated servers; the aggregated server runs the same points "
                f"into {agg.folder}")
        self.servers.stop("disaggregated servers")
        L = ctx.spec.launch
        if L.nodes > 1:  # the aggregated reference is one server on the head node (a step there)
            head = slurm_steps.allocation_nodes()[0] if L.server == "srun" else None
            ctx.spec = replace(ctx.spec, launch=replace(L.disagg_server_step(), srun_args=[
                *L.srun_args, *([f"--nodelist={head}"] if head else [])]))
            ctx.log(f"disagg parity: the aggregated server on {head or 'this node'}")
        server = self.servers.serve(phase="aggregated server")
        sp = ctx.spec
        ready = write_server_ready(agg.server_ready(), replace(
            server.ready_info(sp.bind_host), engine=sp.engine, acceptance_source=sp.acceptance_source,
            speculative_config=sp.speculative_config))
        argv = [ctx.python, "-m", BENCH_MODULE, "--spec", str(agg_spec), "--url", server.url]
        brc = self.client.run_client(argv, server, ready, "aggregated benchmark")
        self.servers.stop("aggregated server")
        return brc

    def parity_verdict(self, rc: int, brc: int) -> int:
        """bench.disagg_parity, second half (after the known-answer probe, whose failed temperatures
        it does not judge acceptance at): launcher.bench.disagg_parity judges the two sides
        (disagg_parity.json). ``brc``: the aggregated benchmark's exit status. A failed verdict
        fails the job."""
        ctx = self.ctx
        agg = JobPaths(ctx.spec.topology.parity.job_dir)
        ready = agg.server_ready()  # the aggregated server's, written by parity_reference
        argv = [ctx.python, "-m", "launcher.bench.disagg_parity", "--spec", str(ctx.spec_path)]
        prc = self.client.run_client(argv, _NoServer(), ready, "disagg parity verdict")
        if rc == 0 and brc != 0:
            ctx.fail(f"aggregated benchmark failed (exit {describe_returncode(brc)}; see {agg.logs})")
            return brc
        if rc == 0 and prc != 0:
            verdict = read_parity(ctx.job_dir)
            ctx.fail((one_line(verdict) if verdict else "disagg parity: no verdict written")
                     + " (see disagg_parity.json)")
            return prc
        return rc
