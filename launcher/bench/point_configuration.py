"""A point's configuration.json (its metadata): specdec_bench's run arguments, the serving
config, and our extension (what ran, where, with which tool), built from the run's typed
settings and what the server and the job folder recorded; written by launcher.bench.point_files."""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Optional

from launcher.bench.run_context import PointContext
from launcher.bench.recorded_on import this_point
from launcher.bench.result_files import build_configuration, checkpoint_info, speculative_algorithm
from launcher.contracts.job_paths import JobPaths
from launcher.contracts.job import BenchSpec
from launcher.engines import num_speculative_tokens
from launcher.engines.forced_acceptance import forced_from_speculative_config
from launcher.runtime import machine
from launcher.runtime.datasets import DatasetSpec
from launcher.runtime.source import git_sha, tool_version
from launcher.runtime.telemetry import gpu_uuids


def job_dir(point_dir: Path) -> str:
    """The job folder the node's samples are in: SPECDEC_JOB_DIR, which a baseline's points
    share with the speculative job's; else the point's own job folder."""
    return os.environ.get("SPECDEC_JOB_DIR") or str(point_dir.parent.parent)


def point_machine(gpu: str, ok_records: list, job_dir: Optional[str]) -> dict:
    """configuration.json's ``machine``: the GPU, the host, and the node's samples over the
    point's requests (launcher.runtime.machine)."""
    return {"gpu": gpu, "gpu_uuids": _gpu_uuids(), "host": machine.host_facts(),
            "window": requests_window(ok_records, job_dir)}


@functools.cache
def _visible_gpu_uuids() -> tuple[str, ...]:
    """The visible GPUs' uuids, read once per benchmark process (NVML opened once)."""
    return tuple(gpu_uuids())


def _gpu_uuids() -> list[str]:
    return list(_visible_gpu_uuids())


def requests_window(ok_records: list, job_dir: Optional[str]) -> Optional[dict]:
    """The node's samples from the first request's start to the last response (None without
    records or a job folder)."""
    starts = [r.start_ns for r in ok_records if r.start_ns is not None]
    ends = [r.last_response_ns for r in ok_records if r.last_response_ns is not None]
    if not (starts and ends and job_dir):
        return None
    return machine.window_summary(_samples(job_dir), min(starts) / 1e9, max(ends) / 1e9)


_SAMPLES: dict = {}  # (path, size) -> samples: a job's file parsed once per size, not once per point and repeat


def _samples(job_dir: str) -> list:
    path = JobPaths(job_dir).machine_samples
    try:
        key = (str(path), path.stat().st_size)
    except OSError:
        return []
    if key not in _SAMPLES:
        _SAMPLES.clear()
        _SAMPLES[key] = machine.read_samples(path)
    return _SAMPLES[key]


def draft_sample_method(spec_cfg: Optional[dict]) -> Optional[str]:
    """How the engine drafted: vLLM's draft_sample_method (its default is greedy: the
    draft's argmax, its probabilities taken as one-hot); None without speculation."""
    if not spec_cfg:
        return None
    return spec_cfg.get("draft_sample_method") or "greedy"


def dataset_path(bench: BenchSpec, name: str) -> Optional[str]:
    """The file a dataset was read from (the job spec's datasets, or the command line's
    --mtbench / --specbench / --speed, launcher.bench.cli)."""
    for d in bench.datasets:
        if d.name == name:
            return str(d.path) or None
    return None


def specdec_dataset_keys(name: str, path: Optional[str]) -> dict:
    """specdec_bench's run.py keys that say which dataset a run used: --mtbench
    PATH, --specbench PATH, or --dataset speed --dataset_path PATH. Its readers
    call a run whose keys are all null "random"."""
    speed = name.startswith("speed")
    return {"mtbench": path if name == "mtbench" else None, "specbench": path if name == "specbench" else None,
            "dataset": "speed" if speed else None, "dataset_path": path if speed else None}


def run_identity(ctx: PointContext) -> Optional[dict]:
    """The job's run identity (launcher.contracts.run_identity) with the engine version the run
    found; None for a hand run without a job folder (the readers fall back to the server's argv)."""
    return ctx.job.resolved_identity().with_engine_version(ctx.engine_version).to_dict() if ctx.job else None


def point_configuration(ctx: PointContext, spec: DatasetSpec, o, point_dir: Path, *, spec_cfg: Optional[dict],
                        duration: Optional[float], gpu: str, ok_records: list, extra: dict) -> dict:
    """configuration.json of point ``o`` (launcher.bench.point_outcome.PointOutcome) measured into
    ``point_dir``; ``extra`` joins our extension (the disagg figures, the point's status)."""
    b = ctx.bench
    model = ctx.recorded("model") or b.tokenizer
    sampling = dict(ctx.runtime.get("sampling_kwargs") or {})
    run_args = {
        "tokenizer": b.tokenizer, "engine": ctx.engine.result_name,
        **specdec_dataset_keys(spec.name, dataset_path(b, spec.name)),
        "num_requests": b.num_requests,
        "speculative_algorithm": speculative_algorithm((spec_cfg or {}).get("method")),
        "model_dir": model, "draft_model_dir": (spec_cfg or {}).get("model"),
        "runtime_params": ctx.runtime, "temperature": o.temperature, "output_length": b.output_length,
        "draft_length": num_speculative_tokens(spec_cfg), "tp_size": b.num_gpus,
        "ep_size": 1, "concurrency": o.concurrency, "save_dir": str(point_dir),
        "ignore_eos": bool(sampling.get("ignore_eos", False)), "postprocess": "base", "trust_remote_code": False,
    }
    serving = {"server_id": ctx.recorded("server_id"), "server_argv": ctx.server_ready.argv,
               "server_flags": ctx.recorded("server_flags"), "url": ctx.base_url, "served_model_name": b.model,
               "speculative_config": spec_cfg, "sampling": {"temperature": o.temperature, **sampling}}
    where = this_point(engine=ctx.engine, version=ctx.engine_version, gpu=gpu,
                       server_argv=ctx.server_ready.argv or ctx.recorded("server_flags") or [], model=model)
    measured_at = {"http_keep_alive": ctx.keep_alive,
                   "machine": point_machine(gpu, ok_records, job_dir(point_dir))}
    return build_configuration(
        run_args=run_args, serving_config=serving, engine_version=ctx.engine_version or "", argv=sys.argv,
        gpu=gpu, checkpoint=checkpoint_info(ctx.recorded("model")),
        extension={"recipe": ctx.recorded("recipe"), "dataset": spec.name, "model": model,
                   "speculative_config": spec_cfg or {"method": "none"}, "num_gpus": b.num_gpus,
                   "aiperf": b.aiperf, "aiperf_benchmark_duration_s": duration,
                   "tool_version": tool_version(), "git_sha": git_sha(),
                   "engine": ctx.engine.name, "acceptance_source": ctx.acceptance_source if spec_cfg else None,
                   "draft_sample_method": draft_sample_method(spec_cfg),
                   "forced_acceptance": forced_from_speculative_config(spec_cfg), "recorded_on": where,
                   "run_identity": run_identity(ctx),
                   "amx_permission_hook": ctx.server_ready.amx_permission_hook, **measured_at, **extra})
