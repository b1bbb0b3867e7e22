"""Pair each speculative point with its baseline point and write the speedups.

    python -m launcher.speedup RESULTS_DIR [--job JOB_DIR]

RESULTS_DIR holds the jobs of one recipe (``results/<recipe>/``): the
baseline job (``sweep.baseline=true``: the same server without speculation)
and one job per k. For every speculative point whose (dataset, T, C) the
baseline also completed, ``speedup.json`` is written beside the point; the
recipe-level ``speedup_summary.json`` holds every point's figures, the
predicted-vs-measured speedup and the best k per load. ``summary.json`` of
each job (only ``--job``'s when given: the node side must not write into a
job that may still be running) gets a ``speedup`` block.

The per-request timings come from each point's AIPerf export
(``aiperf/profile_export.jsonl``); this is the one place that reads them for
the speedup.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

from launcher.results.records import RecordError
from launcher.results.job_dir import Job, Point, ResultsError, load_results, read_json
from launcher.speedup import best_k, paired, predict

SPEEDUP_FILE = "speedup.json"
SUMMARY_FILE = "speedup_summary.json"
SCHEMA_VERSION = 1


# ------------------------------------------------------------------ reading

def point_records(point: Point) -> list[paired.RequestTiming]:
    """The successful profiling turns of a point, as RequestTiming (seconds)."""
    from launcher.results.records import profiling_records, read_profile_export  # the one reader of the exports

    path = point.path / "aiperf" / "profile_export.jsonl"
    if not path.is_file():
        return []
    ok, _failed = profiling_records(read_profile_export(path))
    return [paired.RequestTiming(
        key=(r.conversation_id, r.turn_index),
        ttft_s=None if r.ttft_ms is None else r.ttft_ms / 1000.0,
        e2e_s=None if r.latency_ms is None else r.latency_ms / 1000.0,
        output_tokens=r.osl,
        spec_steps=None if r.spec is None else r.spec.steps,
        histogram=None if r.spec is None else dict(r.spec.histogram)) for r in ok]


def job_method(job: Job) -> Optional[str]:
    return (job.plan or {}).get("method") or job.summary.get("method")


def job_k(job: Job) -> Optional[int]:
    k = (job.plan or {}).get("num_speculative_tokens") or job.summary.get("num_speculative_tokens")
    return int(k) if k else None


def job_model(job: Job) -> Optional[str]:
    return (job.plan or {}).get("model") or job.summary.get("model")


def is_baseline(job: Job) -> bool:
    return job_method(job) == "none"


def read_speedup(point: Point) -> Optional[dict]:
    """A point's speedup.json, or None."""
    d = read_json(point.path / SPEEDUP_FILE)
    return d if isinstance(d, dict) else None


# ------------------------------------------------------------------ the analysis (no writes)

def analyse(jobs: list[Job]) -> Optional[dict]:
    """Every speculative point matched with a baseline point, with its figures,
    the predicted-vs-measured speedup and the best k per load; None when the
    jobs hold no baseline."""
    baselines = [j for j in jobs if is_baseline(j)]
    if not baselines:
        return None
    rows: list[dict] = []
    skipped: list[str] = []
    base_cache: dict[str, list] = {}
    for job in jobs:
        if is_baseline(job):
            continue
        k = job_k(job)
        base = next((b for b in baselines if job_model(b) == job_model(job)), baselines[0])
        base_points = {p.dir: p for p in base.points if p.ok}
        for p in job.points:
            bp = base_points.get(p.dir)
            if not p.ok or bp is None:
                continue
            try:
                if bp.dir not in base_cache:
                    base_cache[bp.dir] = point_records(bp)
                brec, srec = base_cache[bp.dir], point_records(p)
            except (RecordError, OSError) as e:  # an unreadable export: that point has no speedup
                skipped.append(f"{job.name}/{p.dir}: {str(e).splitlines()[0]}")
                continue
            sp = paired.point_speedup(srec, brec, p.output_tps, bp.output_tps)
            hist = predict.merge_histograms(r.histogram for r in srec)
            b_step, s_step = predict.base_step_s(brec), predict.spec_step_s(srec)
            rows.append({
                "job": job.name, "job_dir": str(job.path), "point_dir": str(p.path), "baseline_job": base.name,
                "dataset": p.dataset, "temperature": p.temperature, "concurrency": p.concurrency, "k": k,
                "speedup": sp, "beats_baseline": paired.beats_baseline(sp),
                "acceptance": {"histogram": {str(j): n for j, n in hist.items()},
                               "position_acceptance": predict.position_acceptance(hist, k),
                               "expected_tokens_per_step": predict.expected_tokens_per_step(hist, k)},
                "step_time": {"base_s": b_step, "spec_s": s_step,
                              "ratio": (s_step / b_step) if s_step and b_step else None},
            })
    _add_predictions(rows)
    choices = best_k.best_k_per_load(
        {"dataset": r["dataset"], "temperature": r["temperature"], "concurrency": r["concurrency"], "k": r["k"],
         "output_tps": r["speedup"]["spec_output_tps"], "speedup": r["speedup"]["throughput"],
         "beats_baseline": r["beats_baseline"]} for r in rows)
    schedules = []
    for ds, t in sorted({(c.dataset, c.temperature) for c in choices}):
        mine = [c for c in choices if (c.dataset, c.temperature) == (ds, t)]
        schedules.append({"dataset": ds, "temperature": t, "speculative_config": best_k.vllm_schedule(mine)})
    return {"schema_version": SCHEMA_VERSION, "baseline_jobs": [b.name for b in baselines], "points": rows,
            "best_k": [c.to_dict() for c in choices], "schedules": schedules, "skipped": skipped}


def _add_predictions(rows: list[dict]) -> None:
    """Fit the draft cost per (dataset, T, C) over the k measured there, then predict."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["temperature"], r["concurrency"]), []).append(r)
    for rs in groups.values():
        ratios = {r["k"]: r["step_time"]["ratio"] for r in rs if r["k"] and r["step_time"]["ratio"]}
        cost = predict.draft_cost(ratios)
        for r in rs:
            e = r["acceptance"]["expected_tokens_per_step"]
            r["prediction"] = {
                "draft_cost": cost.to_dict() if cost else None,
                "predicted_speedup": predict.predicted_speedup(e, r["k"], cost.c if cost else None),
                "measured_step_speedup": predict.measured_step_speedup(e, r["step_time"]["ratio"]),
                "measured_decode_speedup": (r["speedup"]["decode"] or {}).get("geomean"),
                "measured_throughput_speedup": r["speedup"]["throughput"],
            }
            r["prediction"]["diagnosis"] = predict.diagnose(
                r["prediction"]["predicted_speedup"], r["speedup"]["throughput"], cost.v if cost else None)


def load_analysis(root: Path, jobs: list[Job]) -> Optional[dict]:
    """The written speedup_summary.json of ``root`` when it covers every
    speculative point that has a speedup.json, else a fresh analysis."""
    written = read_json(Path(root) / SUMMARY_FILE)
    on_disk = sum(1 for j in jobs if not is_baseline(j) for p in j.points if (p.path / SPEEDUP_FILE).is_file())
    if isinstance(written, dict) and written.get("schema_version") == SCHEMA_VERSION and \
            len(written.get("points") or []) >= on_disk and written.get("points"):
        return written
    return analyse(jobs)


def compact(row: dict) -> dict:
    """The headline figures of one point (summary.json's speedup block)."""
    sp, pr = row["speedup"], row["prediction"]
    g = lambda d: (d or {}).get("geomean")  # noqa: E731
    return {"dir": str(Path(row["point_dir"]).relative_to(row["job_dir"])), "k": row["k"],
            "throughput_speedup": sp["throughput"], "decode_speedup": g(sp["decode"]),
            "ttft_ratio": g(sp["ttft_ratio"]), "e2e_ratio": g(sp["e2e_ratio"]),
            "beats_baseline": row["beats_baseline"], "predicted_speedup": pr["predicted_speedup"]}


# ------------------------------------------------------------------ writing

def write_all(root: Path, only_job: Optional[Path] = None) -> Optional[dict]:
    """Analyse the jobs under ``root`` and write speedup.json per point,
    speedup_summary.json in ``root`` and the summary.json blocks (only
    ``only_job``'s when given). Returns the analysis (None without a baseline)."""
    from launcher.results.store import write_json_atomic
    from launcher.results.summary import read_summary, write_summary

    jobs = load_results(root)
    res = analyse(jobs)
    if res is None:
        return None
    for row in res["points"]:
        write_json_atomic(Path(row["point_dir"]) / SPEEDUP_FILE,
                          {"schema_version": SCHEMA_VERSION, **{k: v for k, v in row.items()
                                                                if k not in ("job_dir", "point_dir")}})
    write_json_atomic(Path(root) / SUMMARY_FILE, res)
    for job in jobs:
        if is_baseline(job) or (only_job is not None and Path(job.path).resolve() != Path(only_job).resolve()):
            continue
        summ = read_summary(job.path)
        if summ is None:
            continue
        mine = [compact(r) for r in res["points"] if r["job"] == job.name]
        summ["speedup"] = {"baseline_jobs": res["baseline_jobs"], "points": mine, "best_k": res["best_k"],
                           "schedules": res["schedules"], "file": str(Path(root) / SUMMARY_FILE)}
        write_summary(job.path, summ, allow_nan=False)
    return res


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m launcher.speedup", description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="the recipe's results folder (results/<recipe>)")
    ap.add_argument("--job", default=None, help="update only this job's summary.json")
    args = ap.parse_args(argv)
    try:
        res = write_all(Path(args.results), Path(args.job) if args.job else None)
    except (ResultsError, OSError, ValueError) as e:
        print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    if res is None:
        print(f"{args.results}: no baseline job (run the recipe with sweep.baseline=true); nothing written")
        return 0
    print(f"speedup: {len(res['points'])} point(s) against the baseline; {Path(args.results) / SUMMARY_FILE}")
    for c in res["best_k"]:
        sp = c["speedup"]
        print(f"  {c['dataset']} T={c['temperature']:g} C={c['concurrency']}: best k={c['k']} "
              f"({c['output_tps']:.1f} tok/s, speedup {'-' if sp is None else f'{sp:.2f}'}x, "
              f"beats baseline: {c['beats_baseline']})")
    return 0
