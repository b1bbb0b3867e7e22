"""The node job's extra phases, each its own unit receiving the job's context
(launcher.node.context.NodeContext): the known-answer probe, the lossless reference,
the matched baseline, the restart without speculation they share, and the speedups.
The job (launcher.node.serve_and_bench.NodeJob) runs them after its sweep."""
from __future__ import annotations

import logging
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Optional

from launcher.bench import known_answer as ka
from launcher.contracts.server_ready import ready_path, write_server_ready
from launcher.engines import num_speculative_tokens
from launcher.node import disagg
from launcher.node.context import NodeContext
from launcher.node.lifecycle import ServerError, ServerProcess
from launcher.node.net import subprocess_line


def restart_without_speculation(job: NodeContext, why: str) -> ServerProcess:
    """Stop the speculative server and start the same one without speculation:
    the lossless reference and the matched baseline share this one start."""
    job.log(f"restarting the server without speculation ({why})")
    job.stop_server("speculative server")
    if is_disagg(job):  # the same prefill/decode servers and router, without speculation
        return disagg.serve(job, speculative_config=None, phase="baseline" if "baseline" in why else "reference")
    return job.serve(speculative_config=None,
                     phase="baseline server" if "baseline" in why else "reference server")


def is_disagg(job: NodeContext) -> bool:
    return job.spec.topology is not None and job.spec.topology.kind == "disagg"


def lossless_reference(job: NodeContext, server: ServerProcess, spec_outputs: Path) -> int:
    """The lossless check's second half: the server without speculation
    answers the same prompts; launcher.bench.lossless compares the outputs."""
    ready = write_server_ready(ready_path(job.job_dir, "lossless"), server.ready_info(job.spec.bind_host))
    argv = [job.python, "-m", "launcher.bench.lossless", "compare", "--url", server.url,
            "--model", server.served_name, "--spec", str(spec_outputs), "--save_dir", str(job.job_dir)]
    return job.run_client(argv, server, ready, "lossless comparison")


def baseline_bench(job: NodeContext, server: ServerProcess, baseline_dir: Path) -> int:
    """The matched baseline (sweep.baseline=true): the baseline's benchmark (this
    job spec's baseline section) against this server."""
    (baseline_dir / "logs").mkdir(parents=True, exist_ok=True)
    info = server.ready_info(job.spec.bind_host)
    if is_disagg(job):  # the baseline's points read the same topology (servers, decode /metrics)
        info = replace(info, **disagg.ready_info(job, server))
    ready = write_server_ready(ready_path(baseline_dir), info)
    return job.run_client(job.bench_argv(server.url, role="baseline"), server, ready, "baseline benchmark")


def baseline_starts(job: NodeContext, server: ServerProcess, baseline_dir: Path,
                    starts: int) -> tuple[ServerProcess, int]:
    """The matched baseline on each of ``starts`` starts of the server without speculation
    (sweep.server_starts; the first is ``server``): (the server running now, the exit status)."""
    rc = baseline_bench(job, server, baseline_dir)
    while rc == 0 and job.server_start < starts:
        job.server_start += 1
        server = restart_without_speculation(job, f"matched baseline, server start {job.server_start}/{starts}")
        rc = baseline_bench(job, server, baseline_dir)
    job.server_start = 1
    return server, rc


def write_speedups(job: NodeContext, results_dir: Path) -> None:
    """Speedups against the baseline, for whatever is complete now (never fails the job)."""
    argv = [job.python, "-m", "launcher.speedup", str(results_dir), "--job", str(job.job_dir)]
    job.log(f"writing speedups: {subprocess_line(argv)}")
    try:
        p = subprocess.run(argv, env=job.bench_env(job.server, ready_path(job.job_dir)),
                           capture_output=True, text=True, timeout=600)
        job.log(f"speedups: {(p.stdout + p.stderr).strip()[-2000:] or 'exit ' + str(p.returncode)}")
    except (OSError, subprocess.SubprocessError) as e:
        job.log(f"speedups not written: {e}", logging.ERROR)


def known_answer(job: NodeContext, keep_for_reference: bool) -> tuple[dict, Optional[ServerProcess]]:
    """Restart the target with itself as draft and probe it at each temperature
    of the sweep (launcher.bench.known_answer). Returns the verdict and, when
    ``keep_for_reference`` and the probe passed at T=0, the running server: its
    greedy outputs are the target's own, so the lossless check uses it as its
    reference instead of starting one more server."""
    spec = job.spec.speculative_config
    k = num_speculative_tokens(spec)
    if not spec or not k:
        result = ka.skipped("the server has no speculative config with num_speculative_tokens")
        ka.record(job.job_dir, result)
        return result, None
    reason = ka.memory_skip_reason(job.spec.model, job.spec.launch.tp, ka.free_bytes_per_device())
    if reason:
        result = ka.skipped(reason)
        ka.record(job.job_dir, result)
        job.log(ka.one_line(result))
        return result, None
    job.log(f"known-answer probe: restarting the target as its own draft (draft_model, k={k})")
    job.stop_server("speculative server")
    probe_cfg = ka.self_draft_config(job.spec.model, int(k), job.spec.engine, job.spec.engine_version)
    sample_method = probe_cfg.get("draft_sample_method", "greedy")
    job.log(f"known-answer drafting: {sample_method}" + ("" if sample_method == "probabilistic" else
             " (this engine version drafts greedily: the known answer holds only at T=0)"))
    try:
        server = job.serve(speculative_config=probe_cfg, phase="known-answer server")
    except ServerError as e:
        job.stop_server("known-answer server")
        result = ka.skipped(f"the target with itself as draft did not start: {e.reason}")
        ka.record(job.job_dir, result)
        job.log(ka.one_line(result))
        return result, None
    ready = write_server_ready(ready_path(job.job_dir, "known_answer"), server.ready_info(job.spec.bind_host))
    temps = [f"{t:g}" for t in dict.fromkeys(p.temperature for p in job.spec.points)] or ["0"]
    argv = [job.python, "-m", "launcher.bench.known_answer", "--url", server.url,
            "--model", server.served_name, "--k", str(k),
            "--temperature", *temps, "--save_dir", str(job.job_dir),
            "--draft_sample_method", sample_method, "--acceptance_source", job.spec.acceptance_source,
            "--engine", job.spec.engine]
    try:
        job.run_client(argv, server, ready, "known-answer probe")
        result = ka.read(job.job_dir)
    except (ServerError, OSError, ValueError) as e:
        result = ka.skipped(f"the probe did not finish: {getattr(e, 'reason', e)}")
        ka.record(job.job_dir, result)
    job.log(ka.one_line(result))
    t0 = [e for e in result.get("temperatures", []) if e["temperature"] == 0.0]
    if keep_for_reference and t0 and t0[0]["passed"]:
        job.log("the known-answer server accepted every draft at T=0: it serves the lossless reference")
        return result, server
    job.stop_server("known-answer server")
    if keep_for_reference:
        job.log("known-answer probe did not pass at T=0: the lossless reference needs a server "
                 "without speculation")
    return result, None
