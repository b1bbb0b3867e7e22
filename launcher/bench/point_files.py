"""One point of the sweep, from its AIPerf folder to its result files: the figures measured
from AIPerf's export, the validity gates, goodput and the dynamic-k check, the disaggregated
figures, then specdec_bench's files (configuration.json: launcher.bench.point_configuration)
and the point's row in summary.json."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Optional, Sequence

from launcher.bench import aiperf_runner as ar
from launcher.bench.bench_run import as_repeats
from launcher.bench.run_context import PointContext, PointGroup
from launcher.bench.kv_transfer import kv_transfer_window, topology_note
from launcher.bench.metrics import (acceptance_rate, attach_stream_stats, profiling_records, read_profile_export,
                                    RecordError, timing)
from launcher.bench.point_configuration import point_configuration
from launcher.bench.prefix_cache import prefix_cache_window
from launcher.bench.result_files import response_texts_from_raw, write_point
from launcher.bench.stream_chunks import read_raw_chunks
from launcher.bench.ttft_split import client_mean_ttft_ms, ttft_split
from launcher.engines import num_speculative_tokens
from launcher.results import EXTENSION_KEY, point_problems, PointResult, read_point, ValidityRule
from launcher.results.goodput import point_goodput, repeats_verdict
from launcher.results.plausibility import IMPOSSIBLE_FIELD
from launcher.results.repeats import record as repeat_record
from launcher.results import schedule_check as schedules
from launcher.runtime.datasets import DatasetSpec, Question
from launcher.runtime.telemetry import gpu_names


def check_point(acc: dict, tim: dict, dataset: str, speculative: bool, gates: dict,
                min_tokens_per_step: Optional[float], max_failed_fraction: float,
                repeat_problems: Sequence[str] = ()) -> Optional[str]:
    """The validity gates of one point (launcher.results' one rule): None when it passes, else why.
    ``repeat_problems``: the rule broken by the point's other repeats (their interval pools them)."""
    res = PointResult(path=Path("."), acceptance=acc, timing=tim, complete=True)
    res.acceptance.setdefault(EXTENSION_KEY, {}).setdefault("speculative", speculative)
    rule = ValidityRule(max_failed_fraction=max_failed_fraction, min_average_al=gates.get(dataset),
                        gate_name=f"min_acceptance_length.{dataset}", min_tokens_per_step=min_tokens_per_step)
    problems = point_problems(res, rule) + list(repeat_problems)
    return "; ".join(problems) if problems else None


def point_values(res: PointResult, duration: Optional[float]) -> dict:
    """A point's figures for summary.json (timing in specdec_bench's seconds),
    with the sample count each timing median rests on."""
    return {
        "Average_AL": res.average_al, "Server_AL": res.server_al, "Prometheus_AL": res.prometheus_al,
        "Output TPS": res.output_tps, "Output TPS/gpu": res.output_tps_per_gpu,
        "TTFT median s": res.ttft_median_s, "TTFT count": res.count("TTFT Time"),
        "Decode tok/s median": res.decode_tps_median,
        "Decode tok/s count": res.count("Request Generation Tokens Per Second"),
        "num_requests": res.num_requests, "num_turns": res.num_turns,
        "failed_requests": res.failed_requests, "benchmark_duration_s": duration,
        "per_position_rates": res.per_position_rates, "forced_acceptance": res.forced_acceptance,
        **({"acceptance_impossible": why} if (why := res.acc_ext.get(IMPOSSIBLE_FIELD)) else {}),
        **({"goodput": compact_goodput(g)} if (g := (res.timing.get(EXTENSION_KEY) or {}).get("goodput")) else {}),
        **({"schedule_check": {k: sc.get(k) for k in ("applied", "note", "violating_requests", "requests_checked")}}
           if (sc := (res.timing.get(EXTENSION_KEY) or {}).get("schedule_check")) else {}),
    }


def compact_goodput(g: dict) -> dict:
    """summary.json's goodput of a point (the whole record is in timing.json's extension)."""
    return {k: g.get(k) for k in ("goodput_rps", "good_output_tps", "good_fraction", "good_requests", "requests",
                                  "meets_slo", "verdict", "search_probe", "agrees_with_aiperf")} | {"aiperf_goodput_rps": (g.get("aiperf") or {}).get("goodput_rps")}


def load_point_values(point_dir: Path) -> dict:
    res = read_point(point_dir)
    if not res.timing:
        return {}
    return point_values(res, ar.aiperf_benchmark_duration(point_dir / "aiperf")) | \
        {"repeats": repeat_record.compact(repeat_record.read(point_dir))}


def schedule_check(ctx: PointContext, spec_cfg: Optional[dict], ok_records: list, aip: Path) -> Optional[dict]:
    """The dynamic-k check of a point served with num_speculative_tokens_per_batch_size."""
    schedule = (spec_cfg or {}).get("num_speculative_tokens_per_batch_size")
    if not schedule:
        return None
    reqs = [{"id": f"{r.conversation_id}/{r.turn_index}", "start_ns": r.start_ns, "end_ns": r.last_response_ns,
             "max_accepted": max(r.spec.histogram) if r.spec is not None and r.spec.histogram else None}
            for r in ok_records]
    window = ar.prometheus_window(aip, ctx.engine.metrics, endpoints=ctx.server_ready.metrics_urls) or {}
    per_pos = window.get("accepted_per_position")
    per_pos = per_pos if isinstance(per_pos, list) else None
    return {"schedule": schedule, **schedules.check_point(schedule, reqs, per_pos)}


def finish_point(g: PointGroup, o, src: Optional[Path], why_missing: Optional[str]) -> None:
    """Turn one point's AIPerf folder into its results, or record why there is none."""
    point_dir = g.save_dir / o.dir
    if not as_repeats(g.ctx.bench):  # an earlier run's repeats no longer describe this point
        (point_dir / repeat_record.REPEATS_FILE).unlink(missing_ok=True)
        shutil.rmtree(point_dir / repeat_record.REPEATS_ARTIFACTS, ignore_errors=True)
    if src is None or not (src / "profile_export.jsonl").exists():
        o.status, o.reason = "failed", why_missing
    else:
        point_dir.mkdir(parents=True, exist_ok=True)
        ar.move_artifacts(src, point_dir / "aiperf")
        process_point(g.ctx, g.spec, g.sent(o.concurrency), o, point_dir)
    g.progress.point_done(o.dir, o.status, o.reason)


def measure(ctx: PointContext, spec: DatasetSpec, questions: list[Question], export: Path, aip: Path,
            spec_cfg: Optional[dict], prometheus: bool = False) -> tuple[dict, dict, list]:
    """acceptance_rate and timing objects of one AIPerf export, and its successful records."""
    b = ctx.bench
    qids = [q.question_id for q in questions]
    records = read_profile_export(export)
    if ctx.stream_counted:
        k = num_speculative_tokens(spec_cfg) or 0
        records = attach_stream_stats(records, read_raw_chunks(aip / "profile_export_raw.jsonl"), k)
    prom = (ar.prometheus_window(aip, ctx.engine.metrics, endpoints=ctx.server_ready.metrics_urls)
            if prometheus else None)
    hint = ctx.engine.acceptance_hint()
    acc = acceptance_rate(records, spec.name, qids, [q.category for q in questions],
                          max_tokens=b.output_length, acceptance_hint=hint, speculative=ctx.speculative,
                          prometheus_window=prom, acceptance_source=ctx.acceptance_source)
    tim = timing(records, num_gpus=b.num_gpus, acceptance_hint=hint, question_ids=qids, max_tokens=b.output_length,
                 speculative=ctx.speculative)
    return acc, tim, profiling_records(records)[0]


def _goodput(ctx: PointContext, o, aip: Path) -> Optional[dict]:
    """The point's goodput against the recipe's SLO (None without one, or without records),
    with each repeat's and the verdict over the repeats."""
    slo = ctx.slo
    good = point_goodput(aip, slo) if slo is not None else None
    if good is None:
        return None
    reps = o.slo_repeats
    if reps:
        good["per_repeat"] = reps
    good["verdict"] = repeats_verdict([r["meets_slo"] for r in reps] if reps else [good["meets_slo"]])
    if o.search_probe:
        good["search_probe"] = True
    return good


def _disagg(ctx: PointContext, aip: Path, ok_records: list) -> dict:
    """topology=disagg: the decode servers' KV-transfer counts, the prefix cache, the TTFT split ({} aggregated)."""
    topology = ctx.server_ready.topology
    if not topology:
        return {}
    scraped = ar.server_metrics(aip) or {}
    names = ctx.engine.kv_transfer_metrics
    return {"topology": topology_note(topology),
            "kv_transfer": kv_transfer_window(scraped, endpoints=ctx.server_ready.metrics_urls or None, names=names,
                                              point_prompt_tokens=_prompt_tokens(ok_records),
                                              point_requests=len(ok_records) if ok_records else None),
            "prefix_cache": prefix_cache_window(scraped, topology, router_policy=topology.get("router_policy"),
                                                names=names),
            "ttft_split": ttft_split(scraped, topology, client_ttft_ms=client_mean_ttft_ms(ok_records), names=names)}


def _prompt_tokens(records: list) -> Optional[int]:
    """The prompt tokens a point's requests sent, by the server's usage; None where one lacks it."""
    counts = [r.prompt_tokens for r in records]
    return sum(counts) if counts and all(c is not None for c in counts) else None


def process_point(ctx: PointContext, spec: DatasetSpec, questions: list[Question], o, point_dir: Path) -> None:
    """Point ``o``'s result files from its AIPerf folder (``point_dir/aiperf``), its figures in ``o.values``."""
    b = ctx.bench
    aip = point_dir / "aiperf"
    spec_cfg = ctx.spec_cfg
    try:
        acc, tim, ok_records = measure(ctx, spec, questions, aip / "profile_export.jsonl", aip, spec_cfg,
                                       prometheus=ctx.speculative)
    except (RecordError, ValueError, OSError) as e:
        o.status, o.reason = "failed", f"results unreadable: {str(e).splitlines()[0]}"
        return
    duration = ar.aiperf_benchmark_duration(aip)
    disagg = _disagg(ctx, aip, ok_records)
    raw = aip / "profile_export_raw.jsonl"
    texts = response_texts_from_raw(raw) if raw.exists() else {}
    reason = check_point(acc, tim, spec.name, ctx.speculative, ctx.run.gates, b.gates.min_tokens_per_step,
                         b.gates.max_failed_fraction, repeat_problems=o.repeat_problems or ())
    status = {"status": "complete" if reason is None else "failed", "reason": reason}
    tim[EXTENSION_KEY].update(status)
    sched = schedule_check(ctx, spec_cfg, ok_records, aip)
    if sched is not None:  # a dynamic k schedule: did the engine apply it? (docs/slo.md)
        tim[EXTENSION_KEY]["schedule_check"] = sched
    good = _goodput(ctx, o, aip)
    if good is not None:  # our extension of timing.json: goodput against the recipe's SLO (docs/slo.md)
        tim[EXTENSION_KEY]["goodput"] = good
    conf = point_configuration(ctx, spec, o, point_dir, spec_cfg=spec_cfg, duration=duration, gpu=gpu_names(),
                               ok_records=ok_records, extra={**disagg, **status})
    write_point(point_dir, dataset=spec, acceptance=acc, timing=tim, configuration=conf, questions=questions,
                texts=texts, complete=reason is None)
    o.values.update(point_values(read_point(point_dir), duration))
    for key in ("kv_transfer", "prefix_cache", "ttft_split"):
        if key in disagg:
            o.values[key] = disagg[key]
    if ctx.stream_counted:  # the point's own window is the check (its repeats: the run's)
        w = acc[EXTENSION_KEY].get("prometheus_window") or {}
        # exact: the window is the point's own and the stream's chunks counted every verify step
        o.values["acceptance_exact"] = bool(w.get("is_the_points_own") and w.get("steps_match", True))
    o.status, o.reason = ("complete", None) if reason is None else ("failed", reason)
