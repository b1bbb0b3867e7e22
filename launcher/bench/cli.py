"""`python -m launcher.bench`: sweep temperature x concurrency x dataset against
one running server with AIPerf, and write specdec_bench-format results.

    python -m launcher.bench --spec JOB_DIR/job.json [--role baseline] --url URL

is what jobs run: the points and every setting come from the job spec's typed
sections (launcher/contracts/job.py). The flag form (``--mtbench PATH ... --url URL``) is
for hand use; run.sh reads the arguments after its `--` with this parser into a
job spec, and runs that.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Optional

import yaml

from launcher.bench import aiperf_runner as ar
from launcher.bench import slo_probe
from launcher.bench.aiperf_group import run_group
from launcher.bench.bench_run import BenchRun, from_job
from launcher.bench.run_context import PointContext
from launcher.bench.golden_check import golden_verdict
from launcher.bench.lossless import run_lossless
from launcher.bench.point_outcome import PointOutcome
from launcher.bench.progress import Progress
from launcher.bench.resume import resume
from launcher.contracts.job import (IDENTITY_KEYS, BenchSpec, DatasetInput, Gates, JobSpec, LosslessSpec, PointSpec,
                                    RuntimeParams, SpecError, read_recorded_job)
from launcher.golden.text import summary_line
from launcher.results import read_point
from launcher.bench.sweep_table import print_table
from launcher.results.summary import write_summary
from launcher.runtime.datasets import DatasetError, get_dataset, speed_dataset
from launcher.bench.preflight import PreflightError, check_spec_stats, check_stream_usage, engine_version
from launcher.results.status import write_error
from launcher.engines import DEFAULT_ENGINE, ENGINES, AcceptanceSource, Engine, get_engine
from launcher.engines.forced_acceptance import forced_from_speculative_config, run_verdicts, verdict_line
from launcher.contracts.compare_thresholds import COMPARE_DEFAULTS
from launcher.contracts.server_ready import ServerReady, read_server_ready


def parse_args(argv: list[str], require_url: bool = True) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m launcher.bench", description=__doc__)
    p.add_argument("--spec", metavar="JOB_JSON",
                   help="run from a job spec (what jobs do): its points and bench section; with --url only")
    p.add_argument("--role", choices=("speculative", "baseline"), default="speculative",
                   help="with --spec: baseline runs the matched baseline the job hosts (its baseline section)")
    p.add_argument("--mtbench", metavar="PATH", help="MT-Bench question.jsonl")
    p.add_argument("--specbench", metavar="PATH", help="Spec-Bench question.jsonl")
    p.add_argument("--speed", metavar="PATH", action="append", default=[],
                   help="a SPEED-Bench split (parquet); the dataset is named speed_<file stem>")
    p.add_argument("--num_requests", type=int, default=None)
    p.add_argument("--max_turns", type=int, default=None,
                   help="send only the first N turns of each question (1: vLLM CI's single-turn MT-Bench)")
    p.add_argument("--requests_per_concurrency", action="append", default=[], metavar="C=N",
                   help="a point at concurrency C sends N conversations (a slice of the dataset; phases mode)")
    p.add_argument("--runtime_params", metavar="YAML", help="sampling_kwargs, chat_template_args, dataset_kwargs")
    p.add_argument("--temperature", type=float, nargs="+", default=[0.0])
    p.add_argument("--concurrency", type=int, nargs="+", default=[1])
    p.add_argument("--num_gpus", type=int, default=1)
    p.add_argument("--output_length", type=int, default=4096)  # specdec_bench's default
    p.add_argument("--save_dir", required=True)
    p.add_argument("--url", required=require_url, help="the server, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", required=True, help="the served model name")
    p.add_argument("--tokenizer", required=True, help="HF id or local dir, for AIPerf's token counts")
    p.add_argument("--aiperf", default="aiperf", help="the aiperf executable")
    p.add_argument("--point_timeout_s", type=float, default=3600)
    p.add_argument("--request_timeout_s", type=int, default=600)
    p.add_argument("--max_failed_fraction", type=float, default=0.05)
    p.add_argument("--min_acceptance_length", action="append", default=[], metavar="DATASET=AL")
    p.add_argument("--min_tokens_per_step", type=float, default=None)
    p.add_argument("--no_preflight", action="store_true", help="skip the spec-stats check (baselines)")
    p.add_argument("--force", action="store_true", help="rerun points that are already complete")
    p.add_argument("--aiperf_mode", choices=("phases", "point"), default="phases",
                   help="phases (default): one AIPerf process per dataset x temperature, one profiling phase per "
                        "point, so AIPerf's start-up is paid once a group; point: one AIPerf process per point "
                        "(the baseline)")
    p.add_argument("--phase_gap_s", type=float, default=None,
                   help="the idle phase between two points of one AIPerf run, in seconds (default "
                        f"{ar.GAP_S:g}: just over AIPerf's scrape period, so each point's server counters are "
                        "its own; tests/benchmarks/bench_sweep_overhead.py compares values)")
    p.add_argument("--repeats", type=int, default=1,
                   help="measure each point N times against this server (extra AIPerf profiling phases, in "
                        "rounds); each repeat's figures and their mean, sd, 95%% interval and relative MAD go "
                        "to the point's repeats.json (docs/repeats.md)")
    p.add_argument("--server_starts", type=int, default=1,
                   help="the node starts the server this many times and runs the benchmark on each start "
                        "(SPECDEC_SERVER_START: which one this is); each start's repeats join the point's "
                        "repeats.json (docs/repeats.md)")
    p.add_argument("--warmup", action="store_true",
                   help="a warm-up phase (the dataset once, at the highest concurrency) opens each AIPerf run; "
                        "its requests enter no figure (the default with --repeats > 1 from the launcher)")
    p.add_argument("--noisy_rel_mad", type=float, default=COMPARE_DEFAULTS.noisy_rel_mad,
                   help="a point whose Output TPS relative MAD over its repeats exceeds this is marked noisy")
    p.add_argument("--engine", choices=sorted(ENGINES), default=None,
                   help="the server's engine (default: the one the job.json in --save_dir names, "
                        f"else {DEFAULT_ENGINE})")
    p.add_argument("--acceptance_source", choices=("per_request_stats", "stream_chunks"), default=None,
                   help="where per-request acceptance comes from (default: the job's, else per_request_stats); "
                        "stream_chunks counts one streamed chunk per decode step, for engines without stats")
    p.add_argument("--golden", metavar="ID", default=None,
                   help="check the run's AL and per-position rates against this reference "
                        "(launcher/golden/references.json); the verdict goes into summary.json")
    p.add_argument("--lossless_prompts", type=int, default=0)
    p.add_argument("--lossless_output_length", type=int, default=64)
    p.add_argument("--lossless_min_match_fraction", type=float, default=0.6)
    return p.parse_args(argv)


def per_concurrency(items: list[str]) -> dict[int, int]:
    """--requests_per_concurrency C=N (repeated) as {C: N}; a malformed item is a one-line error."""
    out: dict[int, int] = {}
    for item in items or []:
        c, sep, n = str(item).partition("=")
        try:
            if not sep:
                raise ValueError
            out[int(c)] = int(n)
        except ValueError:
            raise SystemExit(f"error: --requests_per_concurrency {item!r}: expected C=N, e.g. 1=16") from None
    return out


def _runtime_params(path: Optional[str]) -> dict:
    """--runtime_params YAML (sampling_kwargs, chat_template_args, dataset_kwargs), {} without one."""
    return (yaml.safe_load(Path(path).read_text()) if path else None) or {}


def _bench_spec(args: argparse.Namespace, save_dir: str, datasets: list[tuple[str, str]], runtime: dict) -> BenchSpec:
    """The flag form's settings as the job spec's benchmark section."""
    return BenchSpec(
        model=args.model, tokenizer=args.tokenizer, save_dir=save_dir,
        datasets=tuple(DatasetInput(n, p) for n, p in datasets), num_requests=args.num_requests,
        max_turns=args.max_turns, output_length=args.output_length, num_gpus=args.num_gpus, aiperf=args.aiperf,
        requests_per_concurrency=per_concurrency(args.requests_per_concurrency),
        aiperf_mode=args.aiperf_mode, point_timeout_s=args.point_timeout_s, request_timeout_s=args.request_timeout_s,
        gates=Gates(args.max_failed_fraction, parse_gates(args.min_acceptance_length), args.min_tokens_per_step),
        preflight=not args.no_preflight, force=args.force, golden=args.golden,
        lossless=(LosslessSpec(args.lossless_prompts, args.lossless_output_length, args.lossless_min_match_fraction)
                  if args.lossless_prompts else None),
        runtime_params=RuntimeParams(**{k: dict(runtime.get(k) or {}) for k in
                                        ("sampling_kwargs", "chat_template_args", "dataset_kwargs")}),
        acceptance_source=args.acceptance_source, repeats=args.repeats, server_starts=args.server_starts,
        warmup=args.warmup, noisy_rel_mad=args.noisy_rel_mad)


def spec_from_argv(argv: list[str]):
    """(BenchSpec, points) of a benchmark argv (run.sh's arguments after `--`), read by
    this benchmark's own parser: the job spec run.sh writes holds the typed settings."""
    args = parse_args(list(argv), require_url=False)
    datasets = [(n, str(Path(p))) for n, p in dataset_inputs(args)]
    bench = _bench_spec(args, str(Path(args.save_dir).resolve()), datasets, _runtime_params(args.runtime_params))
    points = [PointSpec(name, float(t), int(c)) for name, _ in datasets for t in args.temperature
              for c in args.concurrency]
    return bench, points


def run_of_flags(args: argparse.Namespace) -> BenchRun:
    """The flag form (hand use) as a typed run: the files and folder as given."""
    runtime = _runtime_params(args.runtime_params)
    return BenchRun(bench=_bench_spec(args, args.save_dir, dataset_inputs(args), runtime), url=args.url,
                    temperatures=tuple(args.temperature), concurrencies=tuple(args.concurrency), runtime=runtime,
                    phase_gap_s=args.phase_gap_s, engine=args.engine)


def _spec_mode(argv: list[str]) -> BenchRun:

    p = argparse.ArgumentParser(prog="python -m launcher.bench --spec")
    p.add_argument("--spec", required=True, help="the job spec (JOB_DIR/job.json)")
    p.add_argument("--role", choices=("speculative", "baseline"), default="speculative",
                   help="baseline: the matched baseline this job hosts (its spec's baseline section)")
    p.add_argument("--url", required=True, help="the server, e.g. http://127.0.0.1:8000")
    a = p.parse_args(argv)
    try:
        return from_job(JobSpec.read(a.spec), a.role, a.url)
    except SpecError as e:
        raise SystemExit(f"error: {e}") from None


def dataset_inputs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The flag form's datasets, (name, file as given): --mtbench, --specbench, each --speed."""
    out: list[tuple[str, str]] = []
    if args.mtbench:
        out.append(("mtbench", args.mtbench))
    if args.specbench:
        out.append(("specbench", args.specbench))
    for s in args.speed:
        out.append((speed_dataset(Path(s).stem), s))
    return out


def parse_gates(items: list[str]) -> dict[str, float]:
    gates = {}
    for it in items:
        ds, _, v = it.partition("=")
        try:
            gates[ds] = float(v)
        except ValueError:
            raise SystemExit(f"error: --min_acceptance_length {it!r}: expected DATASET=FLOAT") from None
    return gates


def counter_windows(prometheus_runs: list[dict], outcomes: list, save_dir: Path) -> list[dict]:
    """The server-counter windows of the sweep: each multi-point run's, and each single
    point's own window (a point measured alone has no run-level check)."""

    covered = {pt for r in prometheus_runs for pt in r.get("points") or []}
    out = list(prometheus_runs)
    for o in outcomes:
        if o.dir in covered or o.status != "complete":
            continue
        w = (read_point(save_dir / o.dir).acc_ext.get("prometheus_window") or {})
        if w.get("is_the_points_own") and w.get("num_drafts"):
            out.append({"dataset": o.dataset, "temperature": o.temperature, "points": [o.dir],
                        "num_drafts": w["num_drafts"], "num_accepted_tokens": w["num_accepted_tokens"],
                        **({"finished_requests": w["finished_requests"]} if w.get("finished_requests") else {})})
    return out


def load_datasets(bench: BenchSpec) -> dict:
    """{name: (DatasetSpec, questions)} of the sweep; DatasetError names file:line."""
    datasets = {}
    for d in bench.datasets:
        spec = get_dataset(d.name)
        questions = spec.reader(Path(d.path), bench.num_requests)
        if bench.max_turns is not None:
            questions = [replace(q, turns=q.turns[:bench.max_turns]) for q in questions]
        datasets[d.name] = (spec, questions)
    if not datasets:
        raise DatasetError("no dataset given (fix: pass --mtbench, --specbench or --speed PATH)")
    return datasets


def preflight(base_url: str, model: str, source: AcceptanceSource, engine) -> None:
    """The server returns what ``source`` counts (PreflightError with the fix when not)."""
    if source is AcceptanceSource.STREAM_CHUNKS:
        check_stream_usage(base_url, model)
    else:
        check_spec_stats(base_url, model, engine)


def forced_check(summary: dict, job: Optional[JobSpec], outcomes: list, save_dir: Path) -> None:
    """The known answer of a forced run: the server's counters give the forced AL."""
    forced = forced_from_speculative_config(job.speculative_config if job else None)
    if not forced:
        return
    k = job.num_speculative_tokens or 0
    per_batch = getattr(ENGINES.get(job.engine), "forced_draw_per_batch", False)
    summary["forced_acceptance"] = run_verdicts(forced, k, counter_windows(summary["prometheus_runs"], outcomes,
                                                                           save_dir),
                                                batch_of={o.dir: o.concurrency for o in outcomes} if per_batch else None)
    by_point = {pt: r for r in summary["forced_acceptance"]["runs"] for pt in r["points"]}
    for o in outcomes:
        if o.dir in by_point and by_point[o.dir]["passed"] is not None:
            o.values["forced_verdict"] = "pass" if by_point[o.dir]["passed"] else "fail"
    print(verdict_line(summary["forced_acceptance"]), file=sys.stderr)


def golden_check(summary: dict, outcomes: list, save_dir: Path, bench: BenchSpec) -> None:

    summary["golden"] = golden_verdict(bench.golden, save_dir, summary, bench)
    verdicts = {v["point"]: v["verdict"] for v in summary["golden"].get("points") or []}
    for o in outcomes:
        if o.dir in verdicts:
            o.values["golden"] = verdicts[o.dir]


def lossless_check(summary: dict, save_dir: Path, run: BenchRun) -> None:

    # the prompts come from the whole datasets, not only the sweep's num_requests
    full = {d.name: (get_dataset(d.name), get_dataset(d.name).reader(Path(d.path), None)) for d in run.bench.datasets}
    summary["lossless"] = run_lossless(run.base_url, run.bench.model, run.bench.lossless, full, save_dir)


def failure_line(summary: dict, outcomes: list) -> Optional[str]:
    """Why the benchmark fails, in one line: what failed (points, checks), each named only
    when it did; None when nothing did."""

    failed = [o for o in outcomes if o.status == "failed"]
    parts = []
    if failed:
        parts.append(f"{len(failed)} of {len(outcomes)} points failed: "
                     + "; ".join(f"{o.dir}: {o.reason}" for o in failed[:3]))
    if summary["lossless"] is not None and not summary["lossless"].get("passed", True):
        parts.append("lossless check failed: speculative and reference outputs differ (lossless/result.json)")
    golden = summary.get("golden") or {}
    if golden.get("verdict") in ("fail", "error"):
        parts.append(summary_line(golden) + ("; likely causes in summary.json golden.points[].likely_causes"
                                             if golden["verdict"] == "fail" else ""))
    if (summary.get("forced_acceptance") or {}).get("verdict") == "fail":
        parts.append(verdict_line(summary["forced_acceptance"]))
    return "; ".join(parts) or None


def read_run(argv: list[str]) -> BenchRun:
    """The typed run (launcher.bench.bench_run.BenchRun): from the job spec (--spec), or the
    specdec_bench-style CLI. No argparse namespace goes further than this module."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--spec")
    if pre.parse_known_args(argv)[0].spec is not None:
        return _spec_mode(argv)
    return run_of_flags(parse_args(argv))


def serving_engine(run: BenchRun, job: Optional[JobSpec]) -> Engine:
    """The engine that serves, resolved once for the whole benchmark: the spec's (``--spec``); the
    flag form's ``--engine``, else the one the job folder's job.json names, else the flag form's
    documented default (its --help says so)."""
    return get_engine(run.engine or (job.engine if job else None) or DEFAULT_ENGINE)


def main(argv: Optional[list[str]] = None) -> int:
    run = read_run(list(sys.argv[1:] if argv is None else argv))
    b = run.bench
    if b.repeats < 1:
        print(f"error: --repeats {b.repeats}: must be at least 1", file=sys.stderr)
        return 2
    t0 = time.time()
    save_dir = Path(b.save_dir)
    save_dir.mkdir(parents=True, exist_ok=True)
    try:
        datasets = load_datasets(b)
    except (DatasetError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    ready = read_server_ready(save_dir) or ServerReady()
    job = read_recorded_job(save_dir)  # None: a hand run without a job folder
    engine = serving_engine(run, job)
    version = engine_version(run.base_url, engine) or ready.engine_version
    source = AcceptanceSource(b.acceptance_source or ready.acceptance_source
                              or (job.acceptance_source if job else None)
                              or AcceptanceSource.PER_REQUEST_STATS.value)
    outcomes = [PointOutcome(ds, float(t), int(c)) for ds in datasets for t in run.temperatures
                for c in run.concurrencies]
    summary = _new_summary(b, save_dir, ready, job, version, source.value if run.speculative else None)

    def flush():
        summary["points"] = [o.row() for o in outcomes]
        summary["wall_time_s"] = round(time.time() - t0, 3)
        write_summary(save_dir, summary, allow_nan=False)

    if run.speculative:
        try:
            preflight(run.base_url, b.model, source, engine)
        except PreflightError as e:
            return _preflight_failed(e, outcomes, save_dir, flush)
    todo = resume(outcomes, save_dir, b)
    progress = Progress(save_dir, len(todo), on_point_done=flush)
    flush()
    ctx = PointContext(run=run, engine_version=version, server_ready=ready, job=job, acceptance_source=source.value,
                       stream_extra=engine.stream_options(source) if run.speculative else {},
                       engine=engine)
    _run_groups(ctx, datasets, todo, save_dir, progress, summary, flush)
    # the max load under the recipe's SLO: extra points (docs/slo.md)
    summary["slo"] = slo_probe.search(ctx, datasets, outcomes, save_dir, progress, run_group, flush)
    flush()
    if run.speculative:
        _after_sweep_checks(summary, run, job, outcomes, save_dir, flush)
    print_table(summary)
    msg = failure_line(summary, outcomes)
    if msg:
        write_error(save_dir, msg)
        print(f"error: {msg}", file=sys.stderr)
        return 1
    return 0


def _new_summary(bench: BenchSpec, save_dir: Path, ready: ServerReady, job: Optional[JobSpec], version: Optional[str],
                 acceptance_source: Optional[str]) -> dict:
    """summary.json as the benchmark starts it (its points are filled as they run)."""
    summary = {"schema_version": 1, "save_dir": str(save_dir), "model": bench.model, "engine_version": version,
               "server_startup_s": ready.startup_s, "wall_time_s": None, "points": [], "lossless": None,
               "prometheus_runs": []}
    # what the job measured and with which server (launcher.contracts.run_identity), with the version found
    summary.update(job.identity(version) if job else dict.fromkeys(IDENTITY_KEYS))
    summary["acceptance_source"] = acceptance_source
    return summary


def _preflight_failed(e: Exception, outcomes: list, save_dir: Path, flush) -> int:
    for o in outcomes:
        o.status, o.reason = "failed", f"preflight: {e}"
    flush()
    write_error(save_dir, f"preflight: {e}")
    print(f"error: preflight: {e}", file=sys.stderr)
    return 3


def _run_groups(ctx, datasets: dict, todo: list, save_dir: Path, progress, summary: dict, flush) -> None:
    """Each dataset x temperature in one AIPerf process (launcher.bench.aiperf_group.run_group)."""
    groups: dict[tuple[str, float], list[PointOutcome]] = {}
    for o in todo:
        groups.setdefault((o.dataset, o.temperature), []).append(o)
    for (ds, temp), group in groups.items():
        spec, questions = datasets[ds]
        check = run_group(ctx, spec, questions, ds, temp, group, save_dir, progress)
        if check is not None:
            summary["prometheus_runs"].append(check)
        flush()


def _after_sweep_checks(summary: dict, run: BenchRun, job: Optional[JobSpec], outcomes: list, save_dir: Path,
                        flush) -> None:
    """Forced acceptance, golden, lossless: each check's verdict is on disk before the next one runs."""
    forced_check(summary, job, outcomes, save_dir)
    flush()
    if run.bench.golden:
        golden_check(summary, outcomes, save_dir, run.bench)
        flush()
    if run.bench.lossless and run.bench.lossless.num_prompts:
        lossless_check(summary, save_dir, run)
        flush()
