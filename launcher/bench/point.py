"""One group of client points (a dataset at a temperature, all its concurrencies):
run AIPerf (once, one phase per point, or once per point), then turn each point's
export into result files and checks."""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import yaml

from launcher.bench import aiperf_runner as ar
from launcher.bench.kv_transfer import kv_transfer_window, topology_note
from launcher.bench.prefix_cache import prefix_cache_window, scrape_urls
from launcher.bench.ttft_split import client_mean_ttft_ms, ttft_split
from launcher.bench.metrics import (acceptance_rate, attach_stream_stats, DEFAULT_METRICS, profiling_records,
                                    read_profile_export, RecordError, timing)
from launcher.bench.recorded_on import this_point
from launcher.bench.result_files import (build_configuration, checkpoint_info, response_texts_from_raw,
                                         speculative_algorithm, write_point)
from launcher.bench.stream_chunks import read_raw_chunks
from launcher.contracts.job import SERVER_START_ENV, JobSpec
from launcher.contracts.server_ready import ServerReady
from launcher.engines import default_engine, Engine, MetricNames, num_speculative_tokens
from launcher.engines.forced_acceptance import forced_from_speculative_config
from launcher.results import EXTENSION_KEY, point_problems, PointResult, read_point, ValidityRule
from launcher.results.goodput import aiperf_goodput_arg, point_goodput, repeats_verdict, slo_from_dict
from launcher.results.repeats import record as repeat_record
from launcher.results import schedule_check as schedules
from launcher.runtime.apikey import client_key
from launcher.runtime.datasets import DatasetSpec, Question, write_aiperf_multi_turn
from launcher.runtime.files import write_json_atomic
from launcher.runtime import machine
from launcher.runtime.source import git_sha, tool_version
from launcher.runtime.telemetry import gpu_names



@dataclass
class PointContext:
    args: object  # argparse.Namespace of launcher.bench
    runtime: dict
    base_url: str
    engine_version: Optional[str]
    speculative: bool
    gates: dict
    server_ready: ServerReady
    job: Optional[JobSpec]  # the job folder's job.json (launcher.contracts.job.read_recorded_job), None without one
    acceptance_source: str = "per_request_stats"  # launcher.engines.AcceptanceSource
    stream_extra: dict = field(default_factory=dict)  # request fields the acceptance source needs
    metric_names: MetricNames = DEFAULT_METRICS  # the engine's Prometheus counters
    engine: Engine = field(default_factory=default_engine)  # the engine that served

    @property
    def stream_counted(self) -> bool:
        return self.speculative and self.acceptance_source == "stream_chunks"

    @property
    def keep_alive(self) -> dict:
        """Both ends' idle keep-alive (launcher.bench.aiperf_runner.keep_alive): the server's
        from its variable in this environment (the job's server env reaches the benchmark)."""
        return ar.keep_alive(self.engine.http_keep_alive_env, self.engine.http_keep_alive_default_s, dict(os.environ))


def _gpu_name(save_dir: Path) -> str:
    return gpu_names()


def _where_measured(ctx: PointContext, gpu: str, ok_records: list, point_dir: Path) -> dict:
    """configuration.json's ``http_keep_alive`` and ``machine`` (the node's samples are in its job
    folder: SPECDEC_JOB_DIR, which a baseline's points share with the speculative job's)."""
    return {"http_keep_alive": ctx.keep_alive, "machine": point_machine(gpu, ok_records, _job_dir(point_dir))}


def _job_dir(point_dir: Path) -> str:
    return os.environ.get("SPECDEC_JOB_DIR") or str(point_dir.parent.parent)


def point_machine(gpu: str, ok_records: list, job_dir: Optional[str]) -> dict:
    """configuration.json's ``machine``: the GPU, the host, and the node's samples over the
    point's requests (launcher.runtime.machine)."""
    return {"gpu": gpu, "host": machine.host_facts(), "window": requests_window(ok_records, job_dir)}


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
    path = machine.samples_path(job_dir)
    try:
        key = (str(path), path.stat().st_size)
    except OSError:
        return []
    if key not in _SAMPLES:
        _SAMPLES.clear()
        _SAMPLES[key] = machine.read_samples(path)
    return _SAMPLES[key]


def check_point(acc: dict, tim: dict, dataset: str, speculative: bool, gates: dict,
                min_tokens_per_step: Optional[float], max_failed_fraction: float) -> Optional[str]:
    """The validity gates of one point (launcher.results' one rule): None when it passes, else why."""
    res = PointResult(path=Path("."), acceptance=acc, timing=tim, complete=True)
    res.acceptance.setdefault(EXTENSION_KEY, {}).setdefault("speculative", speculative)
    rule = ValidityRule(max_failed_fraction=max_failed_fraction, min_average_al=gates.get(dataset),
                        gate_name=f"min_acceptance_length.{dataset}", min_tokens_per_step=min_tokens_per_step)
    problems = point_problems(res, rule)
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
        **({"goodput": compact_goodput(g)} if (g := (res.timing.get(EXTENSION_KEY) or {}).get("goodput")) else {}),
        **({"schedule_check": {k: sc.get(k) for k in ("applied", "note", "violating_requests", "requests_checked")}}
           if (sc := (res.timing.get(EXTENSION_KEY) or {}).get("schedule_check")) else {}),
    }


def compact_goodput(g: dict) -> dict:
    """summary.json's goodput of a point (the whole record is in timing.json's extension)."""
    return {k: g.get(k) for k in ("goodput_rps", "good_output_tps", "good_fraction", "good_requests", "requests",
                                  "meets_slo", "verdict", "search_probe", "agrees_with_aiperf")} | {"aiperf_goodput_rps": (g.get("aiperf") or {}).get("goodput_rps")}


def draft_sample_method(spec_cfg: Optional[dict]) -> Optional[str]:
    """How the engine drafted: vLLM's draft_sample_method (its default is greedy: the
    draft's argmax, its probabilities taken as one-hot); None without speculation."""
    if not spec_cfg:
        return None
    return spec_cfg.get("draft_sample_method") or "greedy"


def load_point_values(point_dir: Path) -> dict:
    res = read_point(point_dir)
    if not res.timing:
        return {}
    return point_values(res, ar.aiperf_benchmark_duration(point_dir / "aiperf")) | \
        {"repeats": repeat_record.compact(repeat_record.read(point_dir))}


def run_group(ctx: PointContext, spec: DatasetSpec, questions: list[Question], dataset: str, temperature: float,
              outcomes: list, save_dir: Path, progress) -> Optional[dict]:
    """The points of one dataset at one temperature. aiperf_mode "phases" (the default):
    one AIPerf process for them all (:func:`run_phases`); "point", the baseline: one AIPerf
    process per point. Returns the phases run's Prometheus cross-check, if any."""
    ds_dir = save_dir / dataset
    ds_dir.mkdir(parents=True, exist_ok=True)
    input_file = ds_dir / "aiperf_input.jsonl"
    write_aiperf_multi_turn(questions, input_file, ctx.args.output_length)
    if getattr(ctx.args, "aiperf_mode", "phases") == "phases" and (len(outcomes) > 1 or as_repeats(ctx)):
        return run_phases(ctx, spec, questions, dataset, temperature, outcomes, save_dir, progress)
    if as_repeats(ctx):  # point mode: one AIPerf process per point, its repeats as that process's phases
        for o in outcomes:
            run_phases(ctx, spec, questions, dataset, temperature, [o], save_dir, progress)
        return None
    per_c = getattr(ctx.args, "requests_per_concurrency", None)
    for o in outcomes:  # one process per point: its first N questions (sequential from the file's start)
        _run_aiperf_chunk(ctx, spec, _point_questions(questions, per_c, o.concurrency), dataset, temperature, [o],
                          save_dir, progress, input_file)
    return None


def _point_questions(questions: list[Question], per_c, concurrency: int) -> list[Question]:
    """The questions a point at ``concurrency`` sends: the first N of the dataset
    (sweep.num_requests_per_concurrency; all of them without an entry), as specdec_bench's
    --num_requests takes the first N rows. Its responses file holds these."""
    return questions[:ar.phase_sessions(per_c, concurrency, len(questions))]


def point_slo(ctx: PointContext):
    """The recipe's SLO (launcher.results.goodput.Slo), or None."""
    return slo_from_dict(getattr(ctx.args, "slo", None))


def _aiperf_slos(ctx: PointContext) -> Optional[dict]:
    slo = point_slo(ctx)
    return slo.aiperf_slos() if slo else None


def _aiperf_goodput_arg(ctx: PointContext) -> Optional[str]:
    slo = point_slo(ctx)
    return aiperf_goodput_arg(slo) if slo else None


def schedule_check(ctx: PointContext, spec_cfg: Optional[dict], ok_records: list, aip: Path) -> Optional[dict]:
    """The dynamic-k check of a point served with num_speculative_tokens_per_batch_size."""
    schedule = (spec_cfg or {}).get("num_speculative_tokens_per_batch_size")
    if not schedule:
        return None
    reqs = [{"id": f"{r.conversation_id}/{r.turn_index}", "start_ns": r.start_ns, "end_ns": r.last_response_ns,
             "max_accepted": max(r.spec.histogram) if r.spec is not None and r.spec.histogram else None}
            for r in ok_records]
    window = ar.prometheus_window(aip, ctx.metric_names, endpoints=ctx.server_ready.metrics_urls) or {}
    per_pos = window.get("accepted_per_position")
    per_pos = per_pos if isinstance(per_pos, list) else None
    return {"schedule": schedule, **schedules.check_point(schedule, reqs, per_pos)}


def n_repeats(ctx: PointContext) -> int:
    """sweep.repeats: how many times each point is measured against this server."""
    return max(1, int(getattr(ctx.args, "repeats", 1) or 1))


def n_starts(args) -> int:
    """sweep.server_starts: how many starts of the server measure each point."""
    return max(1, int(getattr(args, "server_starts", 1) or 1))


def server_start() -> int:
    """Which start of the server this benchmark measures (the node's SERVER_START_ENV; 1 alone)."""
    try:
        return max(1, int(os.environ.get(SERVER_START_ENV, "1")))
    except ValueError:
        return 1


def as_repeats(ctx: PointContext) -> bool:
    """Whether a point's measurements go through repeats.json (several repeats, or several starts)."""
    return n_repeats(ctx) > 1 or n_starts(ctx.args) > 1


def _group_run(ctx: PointContext, dataset: str, temperature: float, outcomes: list, group_dir: Path,
               input_file: Path, n_conversations: int) -> ar.GroupRun:
    extra = ar.request_payload_extras(temperature, ctx.runtime.get("sampling_kwargs") or {},
                                      ctx.runtime.get("chat_template_args") or {}) | ctx.stream_extra
    return ar.GroupRun(dataset, temperature, [o.concurrency for o in outcomes], input_file, n_conversations,
                       group_dir, extra)


def _finish_point(ctx, spec, questions, o, save_dir: Path, src: Optional[Path], why_missing: Optional[str],
                  total: int, progress) -> None:
    """Turn one point's AIPerf folder into its results, or record why there is none."""
    point_dir = save_dir / o.dir
    if not as_repeats(ctx):  # an earlier run's repeats no longer describe this point
        (point_dir / repeat_record.REPEATS_FILE).unlink(missing_ok=True)
        shutil.rmtree(point_dir / repeat_record.REPEATS_ARTIFACTS, ignore_errors=True)
    if src is None or not (src / "profile_export.jsonl").exists():
        o.status, o.reason = "failed", why_missing
    else:
        point_dir.mkdir(parents=True, exist_ok=True)
        ar.move_artifacts(src, point_dir / "aiperf")
        process_point(ctx, spec, questions, o, point_dir, total_hint=total)
    progress.point_done(o.dir, o.status, o.reason)


def run_phases(ctx: PointContext, spec: DatasetSpec, questions: list[Question], dataset: str, temperature: float,
               outcomes: list, save_dir: Path, progress) -> Optional[dict]:
    """The points of one dataset at one temperature in ONE AIPerf process, one profiling
    phase per point (AIPerf 0.13's `benchmark.phases`), so AIPerf's start-up is paid once
    per dataset x temperature. Each phase sends the first N questions of the dataset
    (N: sweep.num_requests_per_concurrency, the whole dataset without an entry), in dataset
    order, every repeat and every server the same: AIPerf's one sequential sampler hands
    out the input file in order across phases, so the file holds each phase's copy of its
    questions in phase order (runtime.datasets.aiperf_phase_lines, which also says where the
    idle phase between two points takes one line). (One process cannot hold several
    temperatures or datasets: the only place for a point's sampling is the conversation.)

    AIPerf writes each phase's aggregates and server-metrics window to `phases/<name>/`
    when the run ends and tags every record with its `phase_name`; each point's folder is
    rebuilt from those, so `process_point` sees what a single-point run writes. A phase
    with no results (AIPerf killed or failed) fails only its own point(s). Returns the
    run's Prometheus cross-check (:func:`sweep_prometheus_check`) when every point ran."""
    ds_dir = save_dir / dataset
    tag = f"t{temperature:g}_phases"
    group_dir = ds_dir / f".aiperf_{tag}"
    shutil.rmtree(group_dir, ignore_errors=True)
    group_dir.mkdir(parents=True)
    plan = _plan_group(ctx, outcomes, questions)
    argv = _write_group_config(ctx, questions, temperature, plan, group_dir, ds_dir / f"aiperf_{tag}.yaml")
    watch = _GroupProgress(ctx, progress, outcomes, questions, plan, f"{dataset} T={temperature:g}")
    progress.running = [o.dir for o in outcomes]  # the job's record of what it is doing
    progress.update(f"point {watch.first}/{progress.total} {watch.label} C={outcomes[0].concurrency}: starting "
                    f"AIPerf ({len(outcomes)} points in one process)")
    res = ar.run_aiperf(argv, ar.aiperf_env(ctx.args.tokenizer, keep_alive_s=ctx.keep_alive["client_s"]), ds_dir / f"aiperf_{tag}.log",
                        timeout_s=ctx.args.point_timeout_s * len(outcomes), on_progress=watch.on_progress,
                        on_phase=watch.on_phase)
    failed_run = ("AIPerf timed out" if res.timed_out else f"AIPerf exited with code {res.returncode}") \
        if (res.timed_out or res.returncode != 0) else None
    counts = _collect_group(ctx, spec, questions, outcomes, plan, group_dir, save_dir, res.log_path, failed_run,
                            watch.total, progress)
    check = None
    if ctx.speculative and counts is not None:
        check = sweep_prometheus_check(ar.prometheus_window(group_dir, ctx.metric_names, endpoints=ctx.server_ready.metrics_urls), *counts,
                                       stream_counted=ctx.stream_counted)
        if check is not None:
            check = {"dataset": dataset, "temperature": temperature, "points": [o.dir for o in outcomes]} | check
            if ctx.server_ready.topology:  # the run's window is exact; a point's may take a neighbour's transfer
                check["kv_transfer"] = kv_transfer_window(ar.server_metrics(group_dir) or {},
                                                          endpoints=ctx.server_ready.metrics_urls or None,
                                                          names=ctx.engine.kv_transfer_metrics)
    if ctx.stream_counted:  # chunk counts are exact only where the server's steps say so: a point's own
        for o in outcomes:  # window (cut at the points' starts: server_metrics_window), else the run's
            if o.status == "complete":
                own = o.values.get("acceptance_exact")
                o.values["acceptance_exact"] = bool(own) if own is not None else bool(check and check["matches"])
    shutil.rmtree(group_dir, ignore_errors=True)
    return check


@dataclass(frozen=True)
class _GroupPlan:
    """The AIPerf phases of one dataset x temperature: one per point and repeat, in rounds."""
    phases: list
    owner: dict  # phase name -> its point's index
    warm: Optional[object]  # the warm-up phase (--warmup), or None
    repeats: int
    per_c: Optional[int]  # sweep.num_requests_per_concurrency


def _plan_group(ctx: PointContext, outcomes: list, questions: list[Question]) -> _GroupPlan:
    """Repeats run in rounds (every point once, then every point again), so a slow drift of
    the machine reaches every point's repeats alike instead of one point's all at once. A
    warm-up phase first (--warmup): the dataset once at the group's highest concurrency, a
    profiling phase of its own whose records enter no figure (its verify steps do enter the
    run's /metrics cross-check). Without it the first phase after AIPerf's start-up ran
    slower than the later ones (docs/repeats.md), so the repeats were not alike."""
    repeats = n_repeats(ctx)
    per_c = getattr(ctx.args, "requests_per_concurrency", None)
    phases = [ar.PhasePlan(ar.phase_name(i, o.concurrency) + (f"_r{r + 1}" if repeats > 1 else ""),
                           o.concurrency, ar.phase_sessions(per_c, o.concurrency, len(questions)))
              for r in range(repeats) for i, o in enumerate(outcomes)]
    top = max(o.concurrency for o in outcomes)
    warm = ar.PhasePlan(f"warmup_c{top}", top, len(questions)) if getattr(ctx.args, "warmup", False) else None
    return _GroupPlan(phases, {ph.name: i % len(outcomes) for i, ph in enumerate(phases)}, warm, repeats, per_c)


def _write_group_config(ctx: PointContext, questions: list[Question], temperature: float, plan: _GroupPlan,
                        group_dir: Path, cfg_path: Path) -> list[str]:
    """The group's conversations and AIPerf's multi-phase YAML; returns AIPerf's argv."""
    args = ctx.args
    input_file = group_dir / "input.jsonl"
    extra = ar.request_payload_extras(temperature, ctx.runtime.get("sampling_kwargs") or {},
                                      ctx.runtime.get("chat_template_args") or {}) | ctx.stream_extra
    phases = ([plan.warm] if plan.warm else []) + plan.phases
    write_aiperf_multi_turn(questions, input_file, args.output_length, extra=extra,
                            phases=[(ph.sessions, ph.concurrency) for ph in phases])  # each: the first N
    cfg = ar.multiphase_config(model=args.model, url=ctx.base_url, tokenizer=args.tokenizer, input_file=input_file,
                               artifact_dir=group_dir, phases=phases,
                               request_timeout_s=args.request_timeout_s,
                               server_metrics=tuple(scrape_urls(ctx.server_ready.metrics_urls or (), ctx.server_ready.topology)),
                               slos=_aiperf_slos(ctx), gap_s=float(getattr(args, "phase_gap_s", None) or ar.GAP_S))
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return ar.multiphase_argv(args.aiperf, cfg_path, api_key=client_key())


class _GroupProgress:
    """progress.json while AIPerf runs the group: which point (and repeat) and its requests."""

    def __init__(self, ctx: PointContext, progress, outcomes: list, questions: list[Question], plan: _GroupPlan,
                 label: str):
        self.progress, self.outcomes, self.plan, self.label = progress, outcomes, plan, label
        self.n_turns = sum(len(q.turns) for q in questions)
        self.total = len(outcomes) * self.n_turns
        # a point's expected requests: its share of the dataset's turns (sweep.num_requests_per_concurrency)
        self.turns_of = {o.concurrency: round(self.n_turns * ar.phase_sessions(plan.per_c, o.concurrency,
                                                                               len(questions))
                                              / max(1, len(questions))) for o in outcomes}
        self.first = progress.done + 1
        self.i, self.name = 0, plan.phases[0].name

    def on_phase(self, name: str) -> None:  # AIPerf logs "Phase <name> (profiling) started"
        if name.startswith(ar.GAP_PREFIX):  # the idle phase between two points: the last one's line stays
            return
        self.i = self.plan.owner.get(name, self.i)
        self.name = name
        self.on_progress(0)

    def on_progress(self, done_in_phase: int) -> None:
        o, warm, repeats = self.outcomes[self.i], self.plan.warm, self.plan.repeats
        rep = f" repeat {self.name.rsplit('_r', 1)[-1]}/{repeats}" if repeats > 1 else ""
        if warm is not None and self.name == warm.name:
            self.progress.update(f"{self.label}: warm-up at C={warm.concurrency}: {done_in_phase}/{self.n_turns} "
                                 "requests")
            return
        self.progress.update(f"point {self.first + self.i}/{self.progress.total} {self.label} C={o.concurrency}"
                             f"{rep}: {done_in_phase}/{self.turns_of[o.concurrency]} requests")


def _collect_group(ctx: PointContext, spec: DatasetSpec, questions: list[Question], outcomes: list,
                   plan: _GroupPlan, group_dir: Path, save_dir: Path, log_path, failed_run: Optional[str],
                   total: int, progress) -> Optional[tuple[int, int]]:
    """Each point's folder rebuilt from its phase(s); returns the run's verify steps and
    accepted drafts (the warm-up's included), None when some point's counts are unknown."""
    steps = accepted = 0
    all_read = failed_run is None
    if plan.warm is not None and all_read:
        counted = _phase_steps(group_dir, plan.warm.name)
        if counted is None:
            all_read = False
        else:
            steps, accepted = counted
    for i, o in enumerate(outcomes):
        runs = []
        sent = _point_questions(questions, plan.per_c, o.concurrency)
        for ph in plan.phases[i::len(outcomes)]:  # this point's repeats, in run order
            dst = group_dir / "points" / ph.name
            why = ar.collect_phase(group_dir, ph.name, dst)
            if why is not None:
                why = f"{failed_run or why} before this point finished (log: {log_path})"
            runs.append((ph.name, dst, why))
        if not as_repeats(ctx):
            _, dst, why = runs[0]
            _finish_point(ctx, spec, sent, o, save_dir, None if why else dst, why, total, progress)
        else:
            why = _finish_repeats(ctx, spec, sent, o, save_dir, runs, total, progress)
        ext = _point_counts(save_dir, o, why, as_repeats(ctx))
        if ext.get("num_spec_steps") is None:
            all_read = False
        else:
            steps += ext["num_spec_steps"]
            accepted += ext["num_accepted_draft_tokens"]
    return (steps, accepted) if all_read else None


def _point_counts(save_dir: Path, o, why: Optional[str], repeats: bool) -> dict:
    """A complete point's verify steps and accepted drafts (over all its repeats on this server start)."""
    ext = read_point(save_dir / o.dir).acc_ext if why is None and o.status == "complete" else {}
    if repeats and ext:  # the run's window holds every repeat's steps of this start
        per = [r for r in (repeat_record.read(save_dir / o.dir) or {}).get("per_repeat") or []
               if int(r.get("server_start") or 1) == server_start()]
        counts = [(r.get("num_spec_steps"), r.get("num_accepted_draft_tokens")) for r in per]
        ext = ({"num_spec_steps": sum(c[0] for c in counts), "num_accepted_draft_tokens": sum(c[1] for c in counts)}
               if counts and all(c[0] is not None and c[1] is not None for c in counts) else {})
    return ext


def _phase_steps(group_dir: Path, name: str) -> Optional[tuple[int, int]]:
    """(verify steps, accepted drafts) of one phase's successful requests, from its
    records; None when they cannot be read (or carry no stats)."""

    dst = group_dir / "points" / name
    if ar.collect_phase(group_dir, name, dst) is not None:
        return None
    try:
        ok = profiling_records(read_profile_export(dst / "profile_export.jsonl"))[0]
    except (RecordError, ValueError, OSError):
        return None
    if any(r.spec is None for r in ok):
        return None
    return sum(r.spec.steps for r in ok), sum(r.spec.accepted for r in ok)


def _finish_repeats(ctx, spec, questions, o, save_dir: Path, runs: list, total: int, progress) -> Optional[str]:
    """A point measured ``len(runs)`` times (``runs``: (phase, AIPerf folder, why missing)).
    Every repeat's figures go to ``repeats.json``; specdec_bench's files are written from
    one repeat (launcher.results.repeats.record.HOLD_RULE), whose AIPerf folder becomes the
    point's ``aiperf/``; the others are kept in ``aiperf_repeats/r<i>/``. A missing or
    unreadable repeat fails the point. Returns why it failed, or None."""

    missing = next((why for _, _, why in runs if why is not None), None)
    point_dir = save_dir / o.dir
    per, srcs, origins = _earlier_starts(point_dir)  # sweep.server_starts: the earlier starts' repeats join these
    slo, slo_repeats = point_slo(ctx), []
    if missing is None:
        spec_cfg = _spec_cfg(ctx)
        for r, (name, dst, _) in enumerate(runs, len(per) + 1):
            try:
                acc, tim, ok = _measure(ctx, spec, questions, dst / "profile_export.jsonl", dst, spec_cfg)
            except (RecordError, ValueError, OSError) as e:
                missing = f"repeat {r} ({name}): results unreadable: {str(e).splitlines()[0]}"
                break
            ext = acc.get(EXTENSION_KEY) or {}
            if slo is not None:  # each repeat's goodput: whether the repeats agree on the SLO
                g = point_goodput(dst, slo) or {}
                slo_repeats.append({"repeat": r, "goodput_rps": g.get("goodput_rps"),
                                    "good_output_tps": g.get("good_output_tps"), "meets_slo": g.get("meets_slo")})
            per.append({"repeat": r, "phase": name, "server_start": server_start(),
                        **repeat_record.repeat_figures(acc, tim, ok),
                        "machine": machine.compact(requests_window(ok, _job_dir(point_dir))),
                        # the repeat's own verify steps, for the run's /metrics cross-check
                        "num_spec_steps": ext.get("num_spec_steps"),
                        "num_accepted_draft_tokens": ext.get("num_accepted_draft_tokens")})
            srcs.append(dst)
    if missing is not None:
        for staged, origin in zip(srcs, origins):  # the earlier starts' folders go back where they were
            ar.move_artifacts(staged, origin)
        o.status, o.reason = "failed", missing
        progress.point_done(o.dir, o.status, o.reason)
        return missing
    held = repeat_record.held_repeat(per)
    point_dir.mkdir(parents=True, exist_ok=True)
    others = point_dir / repeat_record.REPEATS_ARTIFACTS
    shutil.rmtree(others, ignore_errors=True)
    for i, src in enumerate(srcs):
        if i != held:
            ar.move_artifacts(src, others / f"r{i + 1}")
    doc = repeat_record.build(per, held, float(getattr(ctx.args, "noisy_rel_mad", repeat_record.NOISY_REL_MAD)))
    write_json_atomic(point_dir / repeat_record.REPEATS_FILE, doc)
    o.slo_repeats = slo_repeats or None  # process_point adds them to the point's goodput
    _finish_point(ctx, spec, questions, o, save_dir, srcs[held], None, total, progress)
    shutil.rmtree(point_dir / ".earlier_starts", ignore_errors=True)
    o.values["repeats"] = repeat_record.compact(doc)
    return None if o.status == "complete" else o.reason


def _earlier_starts(point_dir: Path) -> tuple[list, list, list]:
    """The repeats this point holds from earlier starts of the server (sweep.server_starts), with
    their AIPerf folders moved aside (the held one from ``aiperf/``, the others from
    ``aiperf_repeats/``) so this start's repeats can join them: (per-repeat rows, folders, where
    each folder was). On the first start, or without repeats.json: nothing."""
    start = server_start()
    doc = repeat_record.read(point_dir) if start > 1 else None
    if not doc:
        return [], [], []
    held = (doc.get("files_hold") or {}).get("repeat")
    staged = point_dir / ".earlier_starts"
    shutil.rmtree(staged, ignore_errors=True)
    per, srcs, origins = [], [], []
    for row in doc.get("per_repeat") or []:
        if int(row.get("server_start") or 1) >= start:
            continue
        src = point_dir / "aiperf" if row.get("repeat") == held else \
            point_dir / repeat_record.REPEATS_ARTIFACTS / f"r{row.get('repeat')}"
        if not (src / "profile_export.jsonl").exists():
            continue
        dst = staged / f"r{len(per) + 1}"
        ar.move_artifacts(src, dst)
        per.append({**row, "repeat": len(per) + 1, "server_start": int(row.get("server_start") or 1)})
        srcs.append(dst)
        origins.append(src)
    return per, srcs, origins


def sweep_prometheus_check(window: Optional[dict], steps: int, accepted: int,
                           stream_counted: bool = False) -> Optional[dict]:
    """The server-side cross-check over the whole multi-point run. Pure. A phase's own
    /metrics window can take a neighbouring phase's steps at a boundary scrape (its
    Prometheus_AL is then null); the run's window has no neighbour, so its counters must
    move by exactly the points' own per-request stats summed. Counted from stream
    chunks, the decode chunks must equal the server's verify steps (a merged chunk makes
    fewer), and the accepted drafts in chunks may only be fewer than the server's (drafts
    accepted past EOS or max_tokens never reach the stream)."""
    if window is None or not steps:
        return None
    if stream_counted:
        return {"num_drafts": window["num_drafts"], "num_accepted_tokens": window["num_accepted_tokens"],
                "num_spec_steps": steps, "num_accepted_draft_tokens": accepted, "counted_from": "stream_chunks",
                "Prometheus_AL": 1.0 + window["num_accepted_tokens"] / window["num_drafts"]
                if window["num_drafts"] else None,
                "Server_AL": 1.0 + accepted / steps,
                "matches": window["num_drafts"] == steps and accepted <= window["num_accepted_tokens"]}
    return {"num_drafts": window["num_drafts"], "num_accepted_tokens": window["num_accepted_tokens"],
            "num_spec_steps": steps, "num_accepted_draft_tokens": accepted,
            "Prometheus_AL": 1.0 + window["num_accepted_tokens"] / window["num_drafts"] if window["num_drafts"] else None,
            "Server_AL": 1.0 + accepted / steps,
            "matches": window["num_drafts"] == steps and window["num_accepted_tokens"] == accepted,
            # vLLM's per-position acceptance over the run's window (accepted at position i / drafts)
            "per_position_rates": ([c / window["num_drafts"] for c in window["accepted_per_position"]]
                                   if window.get("accepted_per_position") and window["num_drafts"] else None)}


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
                          request_timeout_s=args.request_timeout_s, api_key=client_key(),
                          server_metrics=tuple(scrape_urls(ctx.server_ready.metrics_urls or (), ctx.server_ready.topology)),
                          goodput=_aiperf_goodput_arg(ctx))
    n_turns = sum(len(q.turns) for q in questions)
    total = len(concurrencies) * n_turns
    first = progress.done + 1
    label = f"{dataset} T={temperature:g} C={','.join(map(str, concurrencies))}"
    span = f"point {first}" if len(concurrencies) == 1 else f"points {first}-{first + len(concurrencies) - 1}"

    def on_progress(done_in_phase: int) -> None:
        progress.update(f"{span}/{progress.total} {label}: {done_in_phase}/{n_turns} requests")

    progress.running = [o.dir for o in outcomes]  # the job's record of what it is doing
    progress.update(f"{span}/{progress.total} {label}: starting AIPerf")
    res = ar.run_aiperf(argv, ar.aiperf_env(args.tokenizer, keep_alive_s=ctx.keep_alive["client_s"]), ds_dir / f"aiperf_{tag}.log",
                        timeout_s=args.point_timeout_s * len(concurrencies), on_progress=on_progress)
    single = len(concurrencies) == 1
    for o in outcomes:
        src = ar.point_artifacts(group_dir, o.concurrency, single)
        why = ("AIPerf timed out" if res.timed_out else f"AIPerf exited with code {res.returncode}") + \
            f" before this point finished (log: {res.log_path})"
        _finish_point(ctx, spec, questions, o, save_dir, src, why, total, progress)
    shutil.rmtree(group_dir, ignore_errors=True)


def _recorded(ctx: PointContext, name: str):
    """A field of the job's job.json (None without one, or when it is not recorded)."""
    v = getattr(ctx.job, name) if ctx.job is not None else None
    return None if v == "" else v


def _spec_cfg(ctx: PointContext) -> Optional[dict]:
    spec_cfg = _recorded(ctx, "speculative_config") or ctx.server_ready.speculative_config
    return spec_cfg if ctx.speculative else None


def _measure(ctx: PointContext, spec: DatasetSpec, questions: list[Question], export: Path, aip: Path,
             spec_cfg: Optional[dict], prometheus: bool = False) -> tuple[dict, dict, list]:
    """acceptance_rate and timing objects of one AIPerf export, and its successful records."""

    args = ctx.args
    qids = [q.question_id for q in questions]
    records = read_profile_export(export)
    if ctx.stream_counted:
        k = num_speculative_tokens(spec_cfg) or 0
        records = attach_stream_stats(records, read_raw_chunks(aip / "profile_export_raw.jsonl"), k)
    prom = ar.prometheus_window(aip, ctx.metric_names, endpoints=ctx.server_ready.metrics_urls) if prometheus else None
    acc = acceptance_rate(records, spec.name, qids, [q.category for q in questions],
                          max_tokens=args.output_length, speculative=ctx.speculative, prometheus_window=prom,
                          acceptance_source=ctx.acceptance_source)
    tim = timing(records, num_gpus=args.num_gpus, question_ids=qids, max_tokens=args.output_length,
                 speculative=ctx.speculative)
    return acc, tim, profiling_records(records)[0]


def _goodput(ctx: PointContext, o, aip: Path) -> Optional[dict]:
    """The point's goodput against the recipe's SLO (None without one, or without records),
    with each repeat's and the verdict over the repeats."""
    slo = point_slo(ctx)
    good = point_goodput(aip, slo) if slo is not None else None
    if good is None:
        return None
    reps = getattr(o, "slo_repeats", None)
    if reps:
        good["per_repeat"] = reps
    good["verdict"] = repeats_verdict([r["meets_slo"] for r in reps] if reps else [good["meets_slo"]])
    if getattr(o, "search_probe", False):
        good["search_probe"] = True
    return good


def dataset_path(args, name: str) -> Optional[str]:
    """The file a dataset was read from: named in the job spec's datasets, else
    the command line's --mtbench / --specbench."""
    for n, path in getattr(args, "datasets", None) or ():
        if n == name:
            return str(path)
    return str(getattr(args, name, None) or "") or None


def specdec_dataset_keys(name: str, path: Optional[str]) -> dict:
    """specdec_bench's run.py keys that say which dataset a run used: --mtbench
    PATH, --specbench PATH, or --dataset speed --dataset_path PATH. Its readers
    call a run whose keys are all null "random"."""
    speed = name.startswith("speed")
    return {"mtbench": path if name == "mtbench" else None, "specbench": path if name == "specbench" else None,
            "dataset": "speed" if speed else None, "dataset_path": path if speed else None}


def process_point(ctx: PointContext, spec: DatasetSpec, questions: list[Question], o, point_dir: Path,
                  total_hint: int = 0) -> None:
    args = ctx.args
    aip = point_dir / "aiperf"
    spec_cfg = _spec_cfg(ctx)
    try:
        acc, tim, ok_records = _measure(ctx, spec, questions, aip / "profile_export.jsonl", aip, spec_cfg,
                                        prometheus=ctx.speculative)
    except (RecordError, ValueError, OSError) as e:
        o.status, o.reason = "failed", f"results unreadable: {str(e).splitlines()[0]}"
        return
    duration = ar.aiperf_benchmark_duration(aip)
    topology = ctx.server_ready.topology  # topology=disagg: the decode servers' KV-transfer counts
    disagg = {}
    if topology:
        scraped = ar.server_metrics(aip) or {}
        disagg = {"topology": topology_note(topology),
                  "kv_transfer": kv_transfer_window(scraped,
                                                    endpoints=ctx.server_ready.metrics_urls or None,
                                                    names=ctx.engine.kv_transfer_metrics),
                  "prefix_cache": prefix_cache_window(scraped, topology,
                                                      router_policy=topology.get("router_policy"),
                                                      names=ctx.engine.kv_transfer_metrics),
                  "ttft_split": ttft_split(scraped, topology,
                                           client_ttft_ms=client_mean_ttft_ms(ok_records),
                                           names=ctx.engine.kv_transfer_metrics)}
    raw = aip / "profile_export_raw.jsonl"
    texts = response_texts_from_raw(raw) if raw.exists() else {}
    sampling = dict(ctx.runtime.get("sampling_kwargs") or {})
    run_args = {
        "tokenizer": args.tokenizer, "engine": ctx.engine.result_name,
        **specdec_dataset_keys(spec.name, dataset_path(args, spec.name)),
        "num_requests": args.num_requests,
        "speculative_algorithm": speculative_algorithm((spec_cfg or {}).get("method")),
        "model_dir": _recorded(ctx, "model") or args.tokenizer,
        "draft_model_dir": (spec_cfg or {}).get("model"),
        "runtime_params": ctx.runtime, "temperature": o.temperature, "output_length": args.output_length,
        "draft_length": num_speculative_tokens(spec_cfg), "tp_size": args.num_gpus,
        "ep_size": 1, "concurrency": o.concurrency, "save_dir": str(point_dir),
        "ignore_eos": bool(sampling.get("ignore_eos", False)), "postprocess": "base", "trust_remote_code": False,
    }
    serving = {"server_id": _recorded(ctx, "server_id"), "server_argv": ctx.server_ready.argv,
               "server_flags": _recorded(ctx, "server_flags"), "url": ctx.base_url, "served_model_name": args.model,
               "speculative_config": spec_cfg, "sampling": {"temperature": o.temperature, **sampling}}
    reason = check_point(acc, tim, spec.name, ctx.speculative, ctx.gates, args.min_tokens_per_step,
                         args.max_failed_fraction)
    status = {"status": "complete" if reason is None else "failed", "reason": reason}
    tim[EXTENSION_KEY].update(status)
    gpu = _gpu_name(point_dir)
    where = this_point(engine=ctx.engine.name, version=ctx.engine_version, gpu=gpu,
                       server_argv=ctx.server_ready.argv or _recorded(ctx, "server_flags") or [],
                       model=_recorded(ctx, "model") or args.tokenizer)
    sched = schedule_check(ctx, spec_cfg, ok_records, aip)
    if sched is not None:  # a dynamic k schedule: did the engine apply it? (docs/slo.md)
        tim[EXTENSION_KEY]["schedule_check"] = sched
    good = _goodput(ctx, o, aip)
    if good is not None:  # our extension of timing.json: goodput against the recipe's SLO (docs/slo.md)
        tim[EXTENSION_KEY]["goodput"] = good
    conf = build_configuration(
        run_args=run_args, serving_config=serving, engine_version=ctx.engine_version or "", argv=sys.argv,
        gpu=gpu, checkpoint=checkpoint_info(_recorded(ctx, "model")),
        extension={"recipe": _recorded(ctx, "recipe"), "dataset": spec.name, "model": _recorded(ctx, "model") or args.tokenizer,
                   "speculative_config": spec_cfg or {"method": "none"}, "num_gpus": args.num_gpus,
                   "aiperf": args.aiperf, "aiperf_benchmark_duration_s": duration,
                   "tool_version": tool_version(), "git_sha": git_sha(),
                   "engine": ctx.engine.name, "acceptance_source": ctx.acceptance_source if spec_cfg else None,
                   "draft_sample_method": draft_sample_method(spec_cfg),
                   "forced_acceptance": forced_from_speculative_config(spec_cfg), "recorded_on": where,
                   "amx_permission_hook": ctx.server_ready.amx_permission_hook, **_where_measured(ctx, gpu, ok_records, point_dir),
                   **disagg, **status})
    write_point(point_dir, dataset=spec, acceptance=acc, timing=tim, configuration=conf, questions=questions,
                texts=texts, complete=reason is None)
    o.values.update(point_values(read_point(point_dir), duration))
    if disagg:
        o.values["kv_transfer"] = disagg["kv_transfer"]
        o.values["prefix_cache"] = disagg["prefix_cache"]
        o.values["ttft_split"] = disagg["ttft_split"]
    if ctx.stream_counted:  # the point's own window is the check (its repeats: the run's)
        o.values["acceptance_exact"] = bool((acc[EXTENSION_KEY].get("prometheus_window") or {}).get("is_the_points_own"))
    o.status, o.reason = ("complete", None) if reason is None else ("failed", reason)
