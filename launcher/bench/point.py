"""One group of client points (a dataset at a temperature, all its concurrencies):
run AIPerf (once, one phase per point, or once per point), then turn each point's export into result files and checks."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import yaml

from launcher.bench import aiperf_runner as ar
from launcher.bench.datasets import DatasetSpec, Question, category_map, write_aiperf_multi_turn
from launcher.bench.metrics import RecordError, acceptance_rate, read_profile_export, timing
from launcher.bench.result_files import (build_configuration, checkpoint_info, response_texts_from_raw,
                                         write_point)

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class PointContext:
    args: object  # argparse.Namespace of launcher.bench
    runtime: dict
    base_url: str
    engine_version: Optional[str]
    speculative: bool
    gates: dict
    server_ready: dict
    job: dict


def _git_sha() -> Optional[str]:
    try:
        return subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=5).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _tool_version() -> str:
    try:
        from importlib.metadata import version
        return version("specdec-launcher")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return "0+unknown"


def _gpu_name(save_dir: Path) -> str:
    from launcher.telemetry import gpu_names
    return gpu_names()


def check_point(acc: dict, tim: dict, dataset: str, speculative: bool, gates: dict,
                min_tokens_per_step: Optional[float], max_failed_fraction: float) -> Optional[str]:
    """The validity gates of one point: None when it passes, else why it fails."""
    n, failed = tim.get("num_requests", 0) + tim.get("failed_requests", 0), tim.get("failed_requests", 0)
    if n and failed / n > max_failed_fraction:
        return f"{failed} of {n} requests failed (> {max_failed_fraction:.0%})"
    if not tim.get("total_output_tokens"):
        return "0 output tokens were generated"
    if speculative:
        al = acc.get("Average_AL")
        if al is None or al < 1.0:
            return f"Average_AL {al} is below 1"
        if dataset in gates and al < gates[dataset]:
            return f"Average_AL {al:.3f} is below the gate min_acceptance_length.{dataset}={gates[dataset]}"
        tps = acc.get("Server_AL")
        if min_tokens_per_step is not None and (tps is None or tps < min_tokens_per_step):
            shown = "unknown" if tps is None else f"{tps:.3f}"
            return f"tokens per verify step {shown} is below the gate min_tokens_per_step={min_tokens_per_step}"
    return None


def point_values(acc: dict, tim: dict, duration: Optional[float]) -> dict:
    return {
        "Average_AL": acc.get("Average_AL"), "Server_AL": acc.get("Server_AL"),
        "Prometheus_AL": acc.get("Prometheus_AL"),
        "Output TPS": tim.get("Output TPS"), "Output TPS/gpu": tim.get("Output TPS/gpu"),
        "TTFT p50 ms": (tim.get("TTFT Time") or {}).get("p50"),
        "Decode tok/s p50": (tim.get("Request Generation Tokens Per Second") or {}).get("p50"),
        "failed_requests": tim.get("failed_requests", 0), "benchmark_duration_s": duration,
    }


def speculative_config_from_argv(argv: list[str]) -> Optional[dict]:
    """The --speculative-config JSON of the server's argv (for runs without a job.json)."""
    for i, a in enumerate(argv):
        val = a.split("=", 1)[1] if a.startswith("--speculative-config=") else (
            argv[i + 1] if a == "--speculative-config" and i + 1 < len(argv) else None)
        if val:
            try:
                return json.loads(val)
            except ValueError:
                return None
    return None


def load_point_values(point_dir: Path) -> dict:
    try:
        acc = json.loads((point_dir / "acceptance_rate.json").read_text())
        tim = json.loads((point_dir / "timing.json").read_text())
    except (OSError, ValueError):
        return {}
    return point_values(acc, tim, ar.aiperf_benchmark_duration(point_dir / "aiperf"))


def run_group(ctx: PointContext, spec: DatasetSpec, questions: list[Question], dataset: str, temperature: float,
              outcomes: list, save_dir: Path, progress) -> None:
    """The points of one dataset at one temperature. aiperf_mode "phases": one AIPerf
    process runs them all, one profiling phase per point (AIPerf 0.13's `benchmark.phases`),
    paying AIPerf's start-up once per group; "point" (the default until the phases mode's
    lower measured throughput is explained): one AIPerf process per point."""
    ds_dir = save_dir / dataset
    ds_dir.mkdir(parents=True, exist_ok=True)
    input_file = ds_dir / "aiperf_input.jsonl"
    write_aiperf_multi_turn(questions, input_file, ctx.args.output_length)
    if getattr(ctx.args, "aiperf_mode", "point") == "phases" and len(outcomes) > 1:
        _run_aiperf_phases(ctx, spec, questions, dataset, temperature, outcomes, save_dir, progress, input_file)
        return
    for o in outcomes:
        _run_aiperf_chunk(ctx, spec, questions, dataset, temperature, [o], save_dir, progress, input_file)


def _group_run(ctx: PointContext, dataset: str, temperature: float, outcomes: list, group_dir: Path,
               input_file: Path, n_conversations: int) -> ar.GroupRun:
    extra = ar.request_payload_extras(temperature, ctx.runtime.get("sampling_kwargs") or {},
                                      ctx.runtime.get("chat_template_args") or {})
    return ar.GroupRun(dataset, temperature, [o.concurrency for o in outcomes], input_file, n_conversations,
                       group_dir, extra)


def _finish_point(ctx, spec, questions, o, save_dir: Path, src: Optional[Path], why_missing: Optional[str],
                  total: int, progress) -> None:
    """Turn one point's AIPerf folder into its results, or record why there is none."""
    point_dir = save_dir / o.dir
    if src is None or not (src / "profile_export.jsonl").exists():
        o.status, o.reason = "failed", why_missing
    else:
        point_dir.mkdir(parents=True, exist_ok=True)
        ar.move_artifacts(src, point_dir / "aiperf")
        process_point(ctx, spec, questions, o, point_dir, total_hint=total)
    progress.done += 1
    progress.update(f"{o.dir}: {o.status}" + (f" ({o.reason})" if o.reason else ""))


def _run_aiperf_phases(ctx: PointContext, spec: DatasetSpec, questions: list[Question], dataset: str,
                       temperature: float, outcomes: list, save_dir: Path, progress, input_file: Path) -> None:
    """One AIPerf process, one profiling phase per point. AIPerf writes each phase's
    aggregates and server-metrics window to `phases/<name>/` when the run ends and tags
    every record with its `phase_name`; each point's folder is rebuilt from those, so
    `process_point` sees what a single-point run writes. A phase with no results (AIPerf
    killed or failed) fails only its own point(s); the rest are kept."""
    args = ctx.args
    ds_dir = save_dir / dataset
    tag = f"t{temperature:g}_phases"
    group_dir = ds_dir / f".aiperf_{tag}"
    shutil.rmtree(group_dir, ignore_errors=True)
    group_dir.mkdir(parents=True)
    run = _group_run(ctx, dataset, temperature, outcomes, group_dir, input_file, len(questions))
    cfg = ar.multiphase_config(model=args.model, url=ctx.base_url, tokenizer=args.tokenizer, run=run,
                               request_timeout_s=args.request_timeout_s)
    cfg_path = ds_dir / f"aiperf_{tag}.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    argv = ar.multiphase_argv(args.aiperf, cfg_path)
    n_turns = sum(len(q.turns) for q in questions)
    total = len(outcomes) * n_turns
    first = progress.done + 1
    label = f"{dataset} T={temperature:g}"
    index = {ar.phase_name(o.concurrency): i for i, o in enumerate(outcomes)}
    current = {"i": 0}

    def on_phase(name: str) -> None:  # AIPerf logs "Phase <name> (profiling) started"
        current["i"] = index.get(name, current["i"])
        on_progress(0)

    def on_progress(done_in_phase: int) -> None:
        o = outcomes[current["i"]]
        progress.update(f"point {first + current['i']}/{progress.total} {label} C={o.concurrency}: "
                        f"{done_in_phase}/{n_turns} requests")

    progress.update(f"point {first}/{progress.total} {label} C={outcomes[0].concurrency}: starting AIPerf "
                    f"({len(outcomes)} points in one process)")
    res = ar.run_aiperf(argv, ar.aiperf_env(args.tokenizer), ds_dir / f"aiperf_{tag}.log",
                        timeout_s=args.point_timeout_s * len(outcomes), on_progress=on_progress, on_phase=on_phase)
    failed_run = ("AIPerf timed out" if res.timed_out else f"AIPerf exited with code {res.returncode}") \
        if (res.timed_out or res.returncode != 0) else None
    for o in outcomes:
        dst = group_dir / "points" / ar.phase_name(o.concurrency)
        why = ar.collect_phase(group_dir, ar.phase_name(o.concurrency), dst)
        if why is not None:
            why = f"{failed_run or why} before this point finished (log: {res.log_path})"
        _finish_point(ctx, spec, questions, o, save_dir, None if why else dst, why, total, progress)
    shutil.rmtree(group_dir, ignore_errors=True)


def _run_aiperf_chunk(ctx: PointContext, spec: DatasetSpec, questions: list[Question], dataset: str,
                      temperature: float, outcomes: list, save_dir: Path, progress, input_file: Path) -> None:
    args = ctx.args
    ds_dir = save_dir / dataset
    tag = f"t{temperature:g}" + ("" if len(outcomes) > 1 else f"_c{outcomes[0].concurrency}")
    group_dir = ds_dir / f".aiperf_{tag}"
    shutil.rmtree(group_dir, ignore_errors=True)
    run = _group_run(ctx, dataset, temperature, outcomes, group_dir, input_file, len(questions))
    concurrencies = run.concurrencies
    argv = ar.aiperf_argv(args.aiperf, model=args.model, url=ctx.base_url, tokenizer=args.tokenizer, run=run,
                          request_timeout_s=args.request_timeout_s)
    n_turns = sum(len(q.turns) for q in questions)
    total = len(concurrencies) * n_turns
    first = progress.done + 1
    label = f"{dataset} T={temperature:g} C={','.join(map(str, concurrencies))}"
    span = f"point {first}" if len(concurrencies) == 1 else f"points {first}-{first + len(concurrencies) - 1}"

    def on_progress(done_in_phase: int) -> None:
        progress.update(f"{span}/{progress.total} {label}: {done_in_phase}/{n_turns} requests")

    progress.update(f"{span}/{progress.total} {label}: starting AIPerf")
    res = ar.run_aiperf(argv, ar.aiperf_env(args.tokenizer), ds_dir / f"aiperf_{tag}.log",
                        timeout_s=args.point_timeout_s * len(concurrencies), on_progress=on_progress)
    single = len(concurrencies) == 1
    for o in outcomes:
        src = ar.point_artifacts(group_dir, o.concurrency, single)
        why = ("AIPerf timed out" if res.timed_out else f"AIPerf exited with code {res.returncode}") + \
            f" before this point finished (log: {res.log_path})"
        _finish_point(ctx, spec, questions, o, save_dir, src, why, total, progress)
    shutil.rmtree(group_dir, ignore_errors=True)


def process_point(ctx: PointContext, spec: DatasetSpec, questions: list[Question], o, point_dir: Path,
                  total_hint: int = 0) -> None:
    args = ctx.args
    aip = point_dir / "aiperf"
    try:
        records = read_profile_export(aip / "profile_export.jsonl")
        prom = ar.prometheus_al_from_export(aip) if ctx.speculative else None
        acc = acceptance_rate(records, category_map(questions), speculative=ctx.speculative, prometheus_al=prom)
        tim = timing(records, num_gpus=args.num_gpus)
    except (RecordError, ValueError, OSError) as e:
        o.status, o.reason = "failed", f"results unreadable: {str(e).splitlines()[0]}"
        return
    duration = ar.aiperf_benchmark_duration(aip)
    raw = aip / "profile_export_raw.jsonl"
    texts = response_texts_from_raw(raw) if raw.exists() else {}
    job = ctx.job
    serving = {
        "server_id": job.get("server_id"), "server_argv": ctx.server_ready.get("argv"),
        "server_flags": job.get("server_flags"), "url": ctx.base_url,
        "num_gpus": args.num_gpus, "served_model_name": args.model,
    }
    run_args = {"dataset": spec.name, "temperature": o.temperature, "concurrency": o.concurrency,
                "num_requests": args.num_requests, "output_length": args.output_length,
                "runtime_params": ctx.runtime, "aiperf": args.aiperf}
    spec_cfg = job.get("speculative_config") or speculative_config_from_argv(ctx.server_ready.get("argv") or [])
    conf = build_configuration(
        run_args=run_args, serving=serving, model=job.get("model") or args.tokenizer,
        speculative_config=spec_cfg if ctx.speculative else None,
        engine="vllm", engine_version=ctx.engine_version or "", argv=sys.argv, tool_version=_tool_version(),
        git_sha=_git_sha(), gpu=_gpu_name(point_dir), checkpoint=checkpoint_info(job.get("model")),
        extra={"recipe": job.get("recipe"), "aiperf_benchmark_duration_s": duration})
    reason = check_point(acc, tim, spec.name, ctx.speculative, ctx.gates, args.min_tokens_per_step,
                         args.max_failed_fraction)
    write_point(point_dir, dataset=spec, acceptance=acc, timing=tim, configuration=conf, questions=questions,
                texts=texts, complete=reason is None)
    o.values.update(point_values(acc, tim, duration))
    o.status, o.reason = ("complete", None) if reason is None else ("failed", reason)
