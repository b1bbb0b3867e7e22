"""The planner: a recipe becomes server configurations (one `vllm serve` each)
and, per server, its client points (temperature x concurrency x dataset).

IDs and folders derive from content only, so the same recipe always maps to
the same folders: that is what makes resume work.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from launcher.config.schema import LauncherConfig
from launcher.engines.flags import kv_cache_cap_bytes
from launcher.server_args import acceptance_source, build_server_flags, engine_version, speculative_config
from launcher.spec import JobSpec, drop_flags, LaunchSpec, PointSpec, point_dir_name, shell_join  # noqa: F401 (re-exported)

REPO_ROOT = Path(__file__).resolve().parents[1]
RUN_SH = REPO_ROOT / "common" / "specdec_aiperf" / "run.sh"
# What turns a speculative server into its matched baseline (the lossless check's reference too).
SPECULATIVE_FLAGS = {"--speculative-config", "--per-request-spec-decode-metrics"}
# Environment of the speculative jobs when sweep.baseline=true: where the baseline's
# job folder is (each job writes speedups against it when it ends), and, for the one
# job that hosts the baseline, that it runs the baseline points after its own.
BASELINE_DIR_ENV = "SPECDEC_BASELINE_DIR"
RUN_BASELINE_ENV = "SPECDEC_RUN_BASELINE"


# The planner's output is the job spec (launcher/spec.py): one per server configuration.
ClientPoint = PointSpec
JobPlan = JobSpec


@dataclass
class Plan:
    recipe: str
    results_dir: str
    jobs: list[JobPlan]
    # sweep.baseline=true: the matched baseline. Not a job of its own: the first
    # speculative job runs its points on the server it restarts without speculation.
    baseline: Optional[JobPlan] = None

    @property
    def num_points(self) -> int:
        return sum(len(j.points) for j in self.jobs) + (len(self.baseline.points) if self.baseline else 0)


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:8]


def _slug(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in s).strip("-").lower()


def bench_args(cfg: LauncherConfig, job_dir: Path, num_gpus: int) -> list[str]:
    sw, b = cfg.sweep, cfg.bench
    a: list[str] = ["--model", cfg.model.served_name, "--tokenizer", cfg.model.tokenizer or cfg.model.path]
    for ds in sw.datasets:  # the reference tool's flags: --mtbench, --specbench, --speed
        a += ["--speed" if ds.startswith("speed_") else f"--{ds}", sw.dataset_paths[ds]]
    if sw.num_requests is not None:
        a += ["--num_requests", str(sw.num_requests)]
    if sw.max_turns is not None:
        a += ["--max_turns", str(sw.max_turns)]
    a += ["--output_length", str(sw.output_length)]
    a += ["--temperature", *[f"{t:g}" for t in sw.temperatures]]
    a += ["--concurrency", *[str(c) for c in sw.concurrencies]]
    a += ["--num_gpus", str(num_gpus), "--save_dir", str(job_dir)]
    a += ["--runtime_params", str(job_dir / "runtime_params.yaml")]
    a += ["--aiperf", b.aiperf, "--point_timeout_s", str(b.point_timeout_s),
          "--request_timeout_s", str(b.request_timeout_s),
          "--max_failed_fraction", str(b.gates.max_failed_fraction)]
    for ds, v in sorted(b.gates.min_acceptance_length.items()):
        a += ["--min_acceptance_length", f"{ds}={v}"]
    if b.gates.min_tokens_per_step is not None:
        a += ["--min_tokens_per_step", str(b.gates.min_tokens_per_step)]
    if cfg.draft.method == "none" or not b.preflight:
        a += ["--no_preflight"]
    if b.force:
        a += ["--force"]
    a += ["--aiperf_mode", b.aiperf_mode]
    forced = cfg.draft.forced_acceptance.length is not None or cfg.draft.forced_acceptance.rates is not None
    if b.golden and cfg.draft.method != "none" and not forced:  # a forced AL says nothing of the draft
        a += ["--golden", b.golden]
    if b.lossless.enabled:
        a += ["--lossless_prompts", str(b.lossless.num_prompts),
              "--lossless_output_length", str(b.lossless.output_length),
              "--lossless_min_match_fraction", str(b.lossless.min_match_fraction)]
    return a


def make_plan(cfg: LauncherConfig) -> Plan:
    results_dir = Path(cfg.output_dir).resolve() / cfg.name
    ks: list[Optional[int]] = list(cfg.sweep.num_speculative_tokens) or [None]
    if cfg.draft.method == "none":
        ks = [None]
    points = [ClientPoint(ds, float(t), int(c)) for ds in cfg.sweep.datasets
              for t in cfg.sweep.temperatures for c in cfg.sweep.concurrencies]
    par, cl = cfg.parallel, cfg.cluster
    num_gpus = max(1, par.tp * par.pp * par.dp)
    in_container = bool(cl.container_image) and cl.container_scope == "server"
    launch = LaunchSpec(server="srun" if cl.executor == "slurm" and cl.container_scope == "server" else "process",
                        nodes=cl.nodes, gpus_per_node=cl.gpus_per_node, tp=par.tp, pp=par.pp, dp=par.dp,
                        container_image=cl.container_image if in_container else None,
                        container_mounts=list(cl.container_mounts) if in_container else [])
    jobs = []
    for k in ks:
        flags = build_server_flags(cfg, k)
        spec = speculative_config(cfg, k)
        k_eff = spec["num_speculative_tokens"] if spec else None
        identity = {"model": cfg.model.path, "command": cfg.server.command, "flags": flags,
                    "env": cfg.server.env, "cluster": cfg.cluster.name, "image": cfg.cluster.container_image}
        readable = f"{_slug(cfg.model.served_name)}-{cfg.draft.method}" + (f"-k{k_eff}" if k_eff else "") + \
                   f"-tp{par.tp}" + (f"-pp{par.pp}" if par.pp > 1 else "") + (f"-dp{par.dp}" if par.dp > 1 else "") \
                   + (f"-ep{par.ep}" if par.ep > 1 else "") + (f"-n{cl.nodes}" if cl.nodes > 1 else "")
        server_id = f"{readable}-{_digest(identity)}"
        job_dir = results_dir / server_id
        env = {**cfg.cluster.env, **cfg.server.env}
        lossless = cfg.bench.lossless
        jobs.append(JobSpec(
            recipe=cfg.name, server_id=server_id, job_dir=str(job_dir), num_speculative_tokens=k_eff,
            method=cfg.draft.method, model=cfg.model.path, served_name=cfg.model.served_name,
            server_command=cfg.server.command, server_flags=flags, bind_host=cfg.cluster.bind_host,
            port=cfg.server.port, ready_timeout_s=cfg.server.ready_timeout_s, env=env,
            bench_args=bench_args(cfg, job_dir, num_gpus), points=points, num_gpus=num_gpus,
            speculative_config=spec, container_image=cfg.cluster.container_image,
            kv_cache_cap_bytes=kv_cache_cap_bytes(flags), launch=launch,
            engine=cfg.server.engine, engine_version=engine_version(cfg),
            acceptance_source=acceptance_source(cfg).value, acceptance_requested=cfg.bench.acceptance_source,
            lossless=({"num_prompts": lossless.num_prompts, "output_length": lossless.output_length,
                       "min_match_fraction": lossless.min_match_fraction} if lossless.enabled else None),
            known_answer=({"allow_fail": cfg.bench.known_answer_allow_fail}
                          if cfg.bench.known_answer and spec else None),
            runtime_params={"sampling_kwargs": dict(cfg.sweep.runtime_params.sampling_kwargs),
                            "chat_template_args": dict(cfg.sweep.runtime_params.chat_template_args),
                            "dataset_kwargs": dict(cfg.sweep.runtime_params.dataset_kwargs)},
            compare_thresholds={"al": cfg.bench.gates.compare_al_threshold,
                                "tps": cfg.bench.gates.compare_tps_threshold,
                                "min_speedup": dict(cfg.bench.gates.min_speedup)},
        ))
    plan = Plan(recipe=cfg.name, results_dir=str(results_dir), jobs=jobs)
    if cfg.sweep.baseline and jobs and jobs[0].speculative_config:
        plan.baseline = baseline_job(cfg, jobs[0], results_dir, num_gpus)
        for i, j in enumerate(jobs):
            j.env[BASELINE_DIR_ENV] = plan.baseline.job_dir
            if i == 0:
                j.env[RUN_BASELINE_ENV] = "1"
    return plan


def baseline_job(cfg: LauncherConfig, host: JobPlan, results_dir: Path, num_gpus: int) -> JobPlan:
    """The matched baseline of ``host``: its server flags without the speculative
    ones (as the lossless reference restarts it), the same client points, no
    acceptance gates, no preflight and no lossless check."""
    import copy

    flags = drop_flags(host.server_flags, SPECULATIVE_FLAGS)
    identity = {"model": cfg.model.path, "command": cfg.server.command, "flags": flags,
                "env": cfg.server.env, "cluster": cfg.cluster.name, "image": cfg.cluster.container_image}
    readable = f"{_slug(cfg.model.served_name)}-none-tp{cfg.parallel.tp}" + \
               (f"-ep{cfg.parallel.ep}" if cfg.parallel.ep > 1 else "")
    server_id = f"{readable}-{_digest(identity)}"
    job_dir = results_dir / server_id
    base = copy.deepcopy(cfg)
    base.draft.method = "none"
    base.bench.lossless.enabled = False
    base.bench.gates.min_acceptance_length = {}
    base.bench.gates.min_tokens_per_step = None
    env = {k: v for k, v in host.env.items() if k not in (BASELINE_DIR_ENV, RUN_BASELINE_ENV)}
    return JobPlan(
        recipe=cfg.name, server_id=server_id, job_dir=str(job_dir), num_speculative_tokens=None,
        method="none", model=host.model, served_name=host.served_name, server_command=host.server_command,
        server_flags=flags, bind_host=host.bind_host, port=host.port, ready_timeout_s=host.ready_timeout_s,
        env=env, bench_args=bench_args(base, job_dir, num_gpus), points=list(host.points), num_gpus=num_gpus,
        speculative_config=None, container_image=host.container_image, runtime_params=dict(host.runtime_params),
        compare_thresholds=dict(host.compare_thresholds), role="baseline", launch=host.launch,
        kv_cache_cap_bytes=host.kv_cache_cap_bytes, stop_grace_s=host.stop_grace_s, engine=host.engine,
        engine_version=host.engine_version, acceptance_source=host.acceptance_source,
        acceptance_requested=host.acceptance_requested)

