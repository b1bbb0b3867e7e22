"""The planner: a recipe becomes server configurations (one `vllm serve` each)
and, per server, its client points (temperature x concurrency x dataset).

IDs and folders derive from content only, so the same recipe always maps to
the same folders: that is what makes resume work.
"""
from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from omegaconf import OmegaConf

from launcher import golden
from launcher.contracts import placement
from launcher.contracts.job import (BaselineSpec, BenchSpec, DatasetInput, Gates, JobSpec, KnownAnswerSpec, LaunchSpec,
                                    LosslessSpec, ParitySpec, PointSpec, RuntimeParams, TopologySpec)
from launcher.contracts.compare_thresholds import CompareThresholds
from launcher.engines import Engine
from launcher.engines.forced_acceptance import resolve_length
from launcher.login.config.schema import GatesConfig, LauncherConfig
from launcher.login.config.check_sweep import requests_per_concurrency
from launcher.login.server_args import ServerFlags, server_flags
from launcher.results.goodput import slo_from_dict
from launcher.runtime.files import REPO_ROOT

RUN_SH = REPO_ROOT / "common" / "specdec_aiperf" / "run.sh"


# The planner's output is the job spec (launcher/contracts/job.py): one per server configuration.
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
    # What the plan leaves out of the recipe, and why (one line each: a skipped golden check).
    notes: list[str] = field(default_factory=list)
    # The engine the recipe names, resolved once (the dry run and the standalone scripts render with it).
    engine: Engine = field(kw_only=True)

    @property
    def num_points(self) -> int:
        return sum(len(j.points) for j in self.jobs) + (len(self.baseline.points) if self.baseline else 0)


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:8]


def _slug(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in s).strip("-").lower()


def golden_skip_reason(cfg: LauncherConfig) -> Optional[str]:
    """Why the recipe's golden reference (bench.golden) is not checked on this run, or None
    when it is: no speculation, random weights (a shaped checkpoint: the reference needs the
    real ones), or a forced acceptance (the AL is set, not measured)."""
    gid, d = cfg.bench.golden, cfg.draft
    if not gid:
        return None
    if d.method == "none":
        return f"bench.golden={gid} skipped: no speculation (draft.method=none)"
    random = [f for f, v in (("model.random_weights", cfg.model.random_weights),
                             ("draft.random_weights", d.random_weights)) if v]
    if random:
        entry = golden.lookup(gid) or {}
        real = " + ".join(x for x in (entry.get("model"), entry.get("draft")) if x) or "the real checkpoints"
        return (f"bench.golden={gid} skipped: {' and '.join(random)}=true (a shaped checkpoint with random "
                f"weights); the reference needs {real}, so this run does not test it")
    forced = [f for f, v in (("draft.forced_acceptance", d.forced_acceptance.length is not None
                              or d.forced_acceptance.rates is not None),
                             ("sweep.forced_acceptance_lengths", bool(cfg.sweep.forced_acceptance_lengths))) if v]
    if forced:
        return f"bench.golden={gid} skipped: the acceptance is forced ({forced[0]}), so no draft's acceptance is measured"
    return None


def bench_spec(cfg: LauncherConfig, job_dir: Path, num_gpus: int) -> BenchSpec:
    """launcher.bench's settings for one job (its points are the job's)."""
    sw, b, d = cfg.sweep, cfg.bench, cfg.draft
    rp = sw.runtime_params
    return BenchSpec(
        model=cfg.model.served_name, tokenizer=cfg.model.tokenizer or cfg.model.path, save_dir=str(job_dir),
        datasets=tuple(DatasetInput(ds, sw.dataset_paths[ds]) for ds in sw.datasets),
        num_requests=sw.num_requests, max_turns=sw.max_turns, output_length=sw.output_length, num_gpus=num_gpus,
        requests_per_concurrency=requests_per_concurrency(cfg),
        aiperf=b.aiperf, aiperf_mode=b.aiperf_mode, point_timeout_s=b.point_timeout_s,
        request_timeout_s=b.request_timeout_s,
        gates=Gates(max_failed_fraction=b.gates.max_failed_fraction,
                    min_acceptance_length=dict(sorted(b.gates.min_acceptance_length.items())),
                    min_tokens_per_step=b.gates.min_tokens_per_step),
        preflight=d.method != "none" and b.preflight, force=b.force,
        golden=None if golden_skip_reason(cfg) else b.golden,
        lossless=(LosslessSpec(b.lossless.num_prompts, b.lossless.output_length, b.lossless.min_match_fraction)
                  if b.lossless.enabled else None),
        runtime_params=RuntimeParams(dict(rp.sampling_kwargs), dict(rp.chat_template_args), dict(rp.dataset_kwargs)),
        # the warm-up is on by default with repeats and with an SLO (the first phase after
        # AIPerf's start-up measured slower: docs/repeats.md, docs/slo.md)
        repeats=sw.repeats, server_starts=sw.server_starts, warmup=bool(sw.warmup or (sw.warmup is None and (sw.repeats > 1 or slo_spec(cfg)))),
        noisy_rel_mad=b.gates.noisy_rel_mad, slo=slo_spec(cfg))


def slo_spec(cfg: LauncherConfig) -> Optional[dict]:
    """The job spec's copy of sweep.slo (None without a limit)."""
    raw = cfg.sweep.slo
    d = OmegaConf.to_container(raw) if OmegaConf.is_config(raw) else dict(raw.__dict__)
    slo = slo_from_dict(d)
    if slo is None:
        return None
    return slo.to_dict() | {"search": bool(d.get("search", True)), "max_search_probes": int(d.get("max_search_probes", 3))}


def schedule_config(cfg: LauncherConfig) -> tuple[int, LauncherConfig]:
    """k and the recipe of the server that serves sweep.k_schedule: k is the schedule's largest
    (vLLM caps each entry at num_speculative_tokens)."""
    schedule = [[int(x) for x in e] for e in cfg.sweep.k_schedule]
    k = max(e[2] for e in schedule)
    c2 = copy.deepcopy(cfg)
    c2.draft.extra = {**dict(cfg.draft.extra), "num_speculative_tokens_per_batch_size": schedule}
    return k, c2


def server_configs(cfg: LauncherConfig) -> list[tuple[Optional[int], LauncherConfig]]:
    """(k, recipe) of each server the recipe asks for: one per k (sweep.num_speculative_tokens; None:
    draft.num_speculative_tokens), per forced length at each k (sweep.forced_acceptance_lengths), and
    one more for the dynamic k schedule (sweep.k_schedule)."""
    speculative = cfg.draft.method != "none"
    ks: list[Optional[int]] = (list(cfg.sweep.num_speculative_tokens) if speculative else []) or [None]
    out = [(k, c) for k in ks for c in forced_level_configs(cfg, k)]
    return out + ([schedule_config(cfg)] if cfg.sweep.k_schedule and speculative else [])


def compare_thresholds(g: GatesConfig) -> CompareThresholds:
    """The recipe's thresholds for compare, the same for every job of the plan."""
    return CompareThresholds(al=g.compare_al_threshold, tps=g.compare_tps_threshold, min_speedup=dict(g.min_speedup),
                             single_run_tps=g.compare_single_run_tps_threshold, noisy_rel_mad=g.noisy_rel_mad,
                             run_floor=g.compare_run_floor)


def launch_spec(cfg: LauncherConfig) -> LaunchSpec:
    """How the node side starts the server: a child process, or its own Slurm step (in the
    cluster's container with container_scope=server)."""
    par, cl = cfg.parallel, cfg.cluster
    in_container = bool(cl.container_image) and cl.container_scope == "server"
    return LaunchSpec(server="srun" if cl.executor == "slurm" and cl.container_scope == "server" else "process",
                      nodes=cl.nodes, gpus_per_node=cl.gpus_per_node, tp=par.tp, pp=par.pp, dp=par.dp,
                      container_image=cl.container_image if in_container else None,
                      container_mounts=list(cl.container_mounts) if in_container else [])


def shared_fields(cfg: LauncherConfig, flags: ServerFlags, num_gpus: int) -> dict:
    """The job spec fields every job of a plan shares (its jobs and the matched baseline): the
    recipe's, and the engine's its flags were built for."""
    s, cl = cfg.server, cfg.cluster
    return dict(recipe=cfg.name, model=cfg.model.path, served_name=cfg.model.served_name, server_command=s.command,
                bind_host=cl.bind_host, port=s.port, ready_timeout_s=s.ready_timeout_s,
                unanswered_timeout_s=s.unanswered_timeout_s, env={**cl.env, **s.env}, tokenizer=cfg.model.tokenizer,
                num_gpus=num_gpus, container_image=cl.container_image, launch=launch_spec(cfg), engine=flags.engine,
                engine_version=flags.engine_version, acceptance_source=flags.acceptance_source.value,
                acceptance_requested=cfg.bench.acceptance_source,
                compare_thresholds=compare_thresholds(cfg.bench.gates).to_dict(), gpu_hour_price=cl.gpu_hour_price)


def _server_folder(cfg: LauncherConfig, method: str, flags: list, suffix: str = "",
                   topology: Optional[dict] = None, pd: str = "") -> str:
    """A job's folder name (speculative or baseline): readable (model, method, ``suffix`` for k and
    the forced level, the parallel layout, ``pd`` for a disaggregated topology), and a digest of what
    makes its server. The one place the name is built."""
    par, cl = cfg.parallel, cfg.cluster
    identity = {"model": cfg.model.path, "command": cfg.server.command, "flags": flags,
                "env": cfg.server.env, "cluster": cl.name, "image": cl.container_image}
    if topology is not None:
        identity["topology"] = topology
    readable = (f"{_slug(cfg.model.served_name)}-{method}{suffix}"
                + f"-tp{par.tp}" + (f"-pp{par.pp}" if par.pp > 1 else "") + (f"-dp{par.dp}" if par.dp > 1 else "")
                + (f"-ep{par.ep}" if par.ep > 1 else "") + (f"-n{cl.nodes}" if cl.nodes > 1 else "") + pd)
    return f"{readable}-{_digest(identity)}"


def _server_id(cfg: LauncherConfig, flags: ServerFlags, topology: Optional[TopologySpec]) -> str:
    """A speculative job's folder name (_server_folder): k, the k schedule and the forced level in it."""
    spec = flags.speculative_config
    k_eff = spec["num_speculative_tokens"] if spec else None
    forced_len = cfg.draft.forced_acceptance.length
    sched = "-sched" if (spec or {}).get("num_speculative_tokens_per_batch_size") else ""
    suffix = ((f"-k{k_eff}{sched}" if k_eff else "")
              + (f"-fal{float(forced_len):g}" if forced_len is not None else ""))
    if topology is None:
        return _server_folder(cfg, cfg.draft.method, flags.all, suffix)
    topo = {k2: v for k2, v in json.loads(json.dumps(topology.__dict__, default=lambda o: None)).items()
            if k2 != "parity"}
    return _server_folder(cfg, cfg.draft.method, flags.all, suffix, topo, f"-pd{topology.prefill}x{topology.decode}")


def make_plan(cfg: LauncherConfig, eng: Engine) -> Plan:
    """The recipe's job specs: one per server configuration (k, forced length, the k schedule), each
    with its flags built once, here (a flag the engine refuses is a ConfigError), and the matched
    baseline. ``eng``: the engine the login side resolved once (launcher.login.prepare)."""
    variants = server_configs(cfg)
    configs = [(c, server_flags(c, eng, k)) for k, c in variants]
    results_dir = Path(cfg.output_dir).resolve() / cfg.name
    points = [ClientPoint(ds, float(t), int(c)) for ds in cfg.sweep.datasets
              for t in cfg.sweep.temperatures for c in cfg.sweep.concurrencies]
    num_gpus = max(1, cfg.parallel.tp * cfg.parallel.pp * cfg.parallel.dp)
    shared = shared_fields(cfg, configs[0][1], num_gpus)
    first = configs[0][1]
    baseline = (baseline_job(cfg, first, points, results_dir, shared)
                if cfg.sweep.baseline and first.speculative_config else None)
    jobs = []
    for i, (lcfg, flags) in enumerate(configs):
        aggregated_dir = results_dir / _server_id(lcfg, flags, None)  # the same server, aggregated
        topology = topology_spec(lcfg, aggregated_dir, bench_spec(lcfg, aggregated_dir, num_gpus))
        server_id = _server_id(lcfg, flags, topology)
        job_dir = results_dir / server_id
        spec = flags.speculative_config
        jobs.append(JobSpec(
            **shared, server_id=server_id, job_dir=str(job_dir), method=cfg.draft.method, server_flags=flags.serving,
            speculative_flags=flags.speculative, acceptance_flags=flags.acceptance,
            bench=bench_spec(lcfg, job_dir, num_gpus), points=list(points), speculative_config=spec,
            kv_cache_cap_bytes=flags.kv_cache_cap_bytes,
            known_answer=(KnownAnswerSpec(allow_fail=cfg.bench.known_answer_allow_fail)
                          if cfg.bench.known_answer and spec else None),
            baseline=(BaselineSpec(job_dir=baseline.job_dir, run_here=i == 0,
                                   bench=baseline.bench if i == 0 else None) if baseline else None),
            topology=topology, report=cfg.report,
        ).with_run_identity())
    skip = golden_skip_reason(cfg)
    return Plan(recipe=cfg.name, results_dir=str(results_dir), jobs=jobs, engine=eng, baseline=baseline,
                notes=[skip] if skip and cfg.draft.method != "none" else [])


def forced_level_configs(cfg: LauncherConfig, k: Optional[int]) -> list[LauncherConfig]:
    """The recipe once per value of sweep.forced_acceptance_lengths at k (draft.forced_acceptance
    .length set to it; "k+1" is k + 1), or the recipe itself when the axis is empty."""

    levels = list(cfg.sweep.forced_acceptance_lengths) if cfg.draft.method != "none" else []
    if not levels:
        return [cfg]
    out = []
    for level in levels:
        c = copy.deepcopy(cfg)
        c.draft.forced_acceptance.length = resolve_length(level, k if k is not None else cfg.draft.num_speculative_tokens)
        c.draft.forced_acceptance.rates = None
        out.append(c)
    return out


# topology.kv_progress_poll_us left null on the CPU build (measured: docs/disagg.md, "The decode stall")
CPU_KV_PROGRESS_POLL_US = 1000


def kv_progress_poll_us(asked: Optional[int], kv_buffer_device: str) -> int:
    """The KV-transfer progress thread's poll timeout a job runs with: what was asked, else
    CPU_KV_PROGRESS_POLL_US on the CPU build and the library's own (0) with GPUs. Pure."""
    if asked is not None:
        return int(asked)
    return CPU_KV_PROGRESS_POLL_US if kv_buffer_device == "cpu" else 0


def topology_spec(cfg: LauncherConfig, aggregated_dir: Path, aggregated_bench: BenchSpec) -> Optional[TopologySpec]:
    """topology=disagg: the prefill/decode servers, the KV transfer and the router (None:
    one aggregated server). The KV buffer sits on the GPU where there is one, else the CPU.
    With bench.disagg_parity the aggregated server of the same recipe (its usual folder)
    runs the same points."""
    t = cfg.topology
    if t.kind != "disagg":
        return None
    device = t.kv_buffer_device or ("cuda" if cfg.cluster.gpus_per_node > 0 else "cpu")
    parity = (ParitySpec(job_dir=str(aggregated_dir), bench=aggregated_bench,
                         al_tolerance=cfg.bench.disagg_al_tolerance) if cfg.bench.disagg_parity else None)
    return TopologySpec(kind=t.kind, prefill=t.prefill, decode=t.decode, kv_connector=t.kv_connector,
                        kv_buffer_device=device, kv_lease_duration_s=t.kv_lease_duration_s,
                        decode_prefix_caching=t.decode_prefix_caching, router=t.router,
                        router_command=t.router_command, router_policy=t.router_policy,
                        router_extra_args=list(t.router_extra_args), router_host=t.router_host,
                        pin_cpu_cores=t.pin_cpu_cores,
                        kv_progress_poll_us=kv_progress_poll_us(t.kv_progress_poll_us, device), parity=parity,
                        placement=placement.resolve(t.placement, cfg.cluster.nodes),
                        decode_draft_model=t.decode_draft_model,
                        server_nodes=placement.server_nodes(t.prefill, t.decode, cfg.cluster.nodes, t.placement,
                                                            t.prefill_nodes))


def baseline_job(cfg: LauncherConfig, first: ServerFlags, points: list[ClientPoint], results_dir: Path,
                 shared: dict) -> JobPlan:
    """The matched baseline of the first speculative job (``first``: its flags): its server flags
    without the speculative ones (as the lossless reference restarts it), the same client points,
    no acceptance gates, no preflight and no lossless check (``shared``: every job's fields)."""
    flags = first.serving
    t = cfg.topology
    if t.kind == "disagg":  # the same topology without speculation: its own folder (docs/disagg.md)
        server_id = _server_folder(cfg, "none", flags, "", {"kind": t.kind, "prefill": t.prefill, "decode": t.decode,
                                                            "router_policy": t.router_policy},
                                   f"-pd{t.prefill}x{t.decode}")
    else:
        server_id = _server_folder(cfg, "none", flags)
    job_dir = results_dir / server_id
    base = copy.deepcopy(cfg)
    base.draft.method = "none"
    base.bench.lossless.enabled = False
    base.bench.gates.min_acceptance_length = {}
    base.bench.gates.min_tokens_per_step = None
    return JobPlan(
        **shared, server_id=server_id, job_dir=str(job_dir), method="none", server_flags=flags,
        bench=bench_spec(base, job_dir, shared["num_gpus"]), points=list(points), speculative_config=None,
        role="baseline", kv_cache_cap_bytes=first.kv_cache_cap_bytes).with_run_identity()
