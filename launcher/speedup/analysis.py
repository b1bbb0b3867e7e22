"""Pair each speculative point with its baseline point and write the speedups (the analysis:
``launcher.speedup.cli`` is its command line, ``launcher.speedup.console`` its printing).

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

from pathlib import Path
from typing import Optional, Sequence

from launcher.contracts.run_identity import RunIdentity
from launcher.engines.forced_acceptance import label
from launcher.results.identity import configuration_label, folder_labels, is_baseline, run_identity, tag
from launcher.results.job_dir import Job, load_results, Point, read_json, ResultsError
from launcher.results.goodput import slo_from_dict
from launcher.results.records import RecordError, profiling_records, read_profile_export  # the one reader of the exports
from launcher.results.repeats import record
from launcher.stats.repeats import NOISY_REL_MAD, summarize
from launcher.results.store import write_json_atomic
from launcher.runtime import machine
from launcher.results.summary import change_summary
from launcher.speedup import across, at_al, best_k, break_even, comparison_plot, fleet, per_request, predict, why
from launcher.speedup.causes import words as cause_words
from launcher.speedup.decompose import cost_text, decode_cost_text
from launcher.speedup import slo as slo_mod

SPEEDUP_FILE = "speedup.json"
SUMMARY_FILE = "speedup_summary.json"
SLO_FILE = "slo_summary.json"  # the SLO analysis (docs/slo.md)
SCHEMA_VERSION = 1


# ------------------------------------------------------------------ reading

def point_records(point: Point) -> list[per_request.RequestTiming]:
    """The successful profiling turns of a point, as RequestTiming (seconds)."""
    path = point.path / "aiperf" / "profile_export.jsonl"
    if not path.is_file():
        return []
    ok, _failed = profiling_records(read_profile_export(path))
    return [per_request.RequestTiming(
        key=(r.conversation_id, r.turn_index),
        ttft_s=None if r.ttft_ms is None else r.ttft_ms / 1000.0,
        e2e_s=None if r.latency_ms is None else r.latency_ms / 1000.0,
        output_tokens=r.output_tokens,
        spec_steps=None if r.spec is None else r.spec.steps,
        histogram=None if r.spec is None else dict(r.spec.histogram)) for r in ok]


def is_schedule(job: Job) -> bool:
    """A server with a dynamic k schedule (num_speculative_tokens_per_batch_size, docs/slo.md)."""
    return run_identity(job).schedule is not None


def slo_k(job: Job) -> Optional[int]:
    """The SLO analysis' configuration key: 0 without speculation, k, None for a schedule."""
    return 0 if is_baseline(job) else (None if is_schedule(job) else run_identity(job).k)


def configuration(ident: RunIdentity, labels: dict) -> dict:
    """A row's server configuration: its fingerprint and what differs from the folder's others
    ("" when it is the folder's only one; launcher.results.identity)."""
    return {"fingerprint": ident.fingerprint, "label": configuration_label(ident, labels)}


def recipe_slo(jobs: list[Job]) -> Optional[dict]:
    """The recipe's sweep.slo as the job specs hold it (the first job that has one)."""
    for j in jobs:
        slo = j.spec.bench.slo if j.spec and j.spec.bench else None
        if slo:
            return slo
    return None


def write_slo(root: Path, slo_arg: Optional[str], tie_rel: float) -> Optional[dict]:
    """slo_summary.json in ``root``: goodput vs load, the max load and the recommendation
    under ``slo_arg`` (``--slo``) or the recipe's sweep.slo; None when neither gives one."""
    jobs = load_results(root)
    slo = slo_from_dict(slo_mod.parse_slo_arg(slo_arg)) if slo_arg else slo_from_dict(recipe_slo(jobs))
    if slo is None:
        return None
    labels = folder_labels(jobs)
    rows = slo_mod.collect(jobs, slo, slo_k, lambda job: configuration_label(run_identity(job), labels))
    res = {"schema_version": SCHEMA_VERSION, "slo": slo.to_dict(), "description": slo.describe(),
           "source": "--slo" if slo_arg else "the recipe's sweep.slo", "tie_rel": tie_rel,
           "goodput_agrees_with_aiperf": _agreement(rows),
           "groups": slo_mod.recommend(rows, tie_rel)}
    write_json_atomic(Path(root) / SLO_FILE, res)
    return res


def _agreement(rows: list[dict]) -> dict:
    seen = [r["agrees_with_aiperf"] for r in rows if r.get("agrees_with_aiperf") is not None]
    return {"points_compared": len(seen), "agree": sum(seen)}


def read_speedup(point: Point) -> Optional[dict]:
    """A point's speedup.json, or None."""
    d = read_json(point.path / SPEEDUP_FILE)
    return d if isinstance(d, dict) else None


# ------------------------------------------------------------------ the analysis (no writes)

def analyse(jobs: list[Job], borrowed: Sequence[Job] = (), fleet_options: Optional[fleet.Options] = None) -> Optional[dict]:
    """Every speculative point matched with a baseline point, with its figures,
    the predicted-vs-measured speedup and the best k per load; None when the
    jobs hold no baseline. ``borrowed``: baselines another folder ran on the same machine for
    a target and serving settings none of these jobs' baselines covers (launcher.speedup.across);
    a row paired with one says so (``baseline_from``). ``fleet_options``: launcher.speedup.fleet's price and speeds."""
    baselines = [j for j in jobs if is_baseline(j)] + list(borrowed)
    if not baselines:
        return None
    rows: list[dict] = []
    skipped: list[str] = []
    base_cache: dict[str, list] = {}
    labels = folder_labels(jobs)
    for job in jobs:
        if is_baseline(job) or is_schedule(job):  # a schedule has no one k: judged in slo_summary.json
            continue
        ident = run_identity(job)
        k, draft, forced = ident.k, ident.draft or ident.method, ident.forced
        same_model = [b for b in baselines if run_identity(b).model == ident.model] or baselines
        base = next((b for b in same_model if run_identity(b).fingerprint == ident.fingerprint), same_model[0])
        base_points = {p.dir: p for p in base.points if p.ok}
        base_from = str(Path(base.path).parent) if any(base is b for b in borrowed) else None
        for p in job.points:
            bp = base_points.get(p.dir)
            if not p.ok or bp is None:
                continue
            try:
                if str(bp.path) not in base_cache:  # by path: two baselines share point folder names
                    base_cache[str(bp.path)] = point_records(bp)
                brec, srec = base_cache[str(bp.path)], point_records(p)
            except (RecordError, OSError) as e:  # an unreadable export: that point has no speedup
                skipped.append(f"{job.name}/{p.dir}: {str(e).splitlines()[0]}")
                continue
            sp = per_request.point_speedup(srec, brec, p.output_tps, bp.output_tps)
            rep_s, rep_b = record.read(p.path), record.read(bp.path)
            tps_s, tps_b = (((d or {}).get("stats") or {}).get("Output TPS") for d in (rep_s, rep_b))
            thr_reps = throughput_repeats(rep_s, rep_b)
            hist = predict.merge_histograms(r.histogram for r in srec)
            b_step, s_step = predict.base_step_s(brec), predict.spec_step_s(srec)
            rows.append({
                "job": job.name, "job_dir": str(job.path), "point_dir": str(p.path), "baseline_job": base.name,
                **({"baseline_from": base_from} if base_from else {}),
                "machine": machine.one_line(p.machine), "baseline_machine": machine.one_line(bp.machine),
                "dataset": p.dataset, "temperature": p.temperature, "concurrency": p.concurrency, "k": k,
                "draft": draft, "forced_acceptance": forced, "configuration": configuration(ident, labels),
                "measured_al": p.average_al, "server_al": p.server_al,
                "suspect": p.row.engine_warning or None,
                "speedup": sp, "beats_baseline": per_request.beats_baseline(sp, tps_s, tps_b),
                "throughput_repeats": thr_reps, "throughput_per_repeat": per_repeat_speedups(rep_s, rep_b),
                "tpot_ratio_per_repeat": per_repeat_ratios(rep_s, rep_b, "TPOT s"),
                "tps_repeats": tps_s, "base_tps_repeats": tps_b,
                "acceptance": {"histogram": {str(j): n for j, n in hist.items()},
                               "position_acceptance": predict.position_acceptance(hist, k),
                               "expected_tokens_per_step": predict.expected_tokens_per_step(hist, k)},
                "step_time": {"base_s": b_step, "spec_s": s_step,
                              "ratio": (s_step / b_step) if s_step and b_step else None},
            })
    _add_predictions(rows)
    explained = why.explain(rows, [*borrowed, *jobs])  # decomposition, causes (a borrowed baseline too), step costs
    # Forced acceptance measures the serving system, not a draft: never a best-k candidate.
    choices = best_k.best_k_per_load(
        {"draft": r["draft"], "configuration": r["configuration"], "dataset": r["dataset"], "temperature": r["temperature"],
         "concurrency": r["concurrency"], "k": r["k"],
         "output_tps": (r["tps_repeats"] or {}).get("mean") or r["speedup"]["spec_output_tps"],
         "speedup": (r["throughput_repeats"] or {}).get("mean") or r["speedup"]["throughput"],
         "beats_baseline": r["beats_baseline"], "tps_repeats": r["tps_repeats"], "suspect": r["suspect"]}
        for r in rows if not r["forced_acceptance"])
    schedules = []
    for draft, fp, ds, t in sorted({(c.draft or "", c.fingerprint, c.dataset, c.temperature) for c in choices}):
        mine = [c for c in choices if ((c.draft or ""), c.fingerprint, c.dataset, c.temperature) == (draft, fp, ds, t)]
        schedules.append({"draft": draft or None, "configuration": mine[0].configuration, "dataset": ds, "temperature": t,
                          "speculative_config": best_k.vllm_schedule(mine),
                          **({"suspect": next(c.suspect for c in mine if c.suspect)} if any(c.suspect for c in mine)
                             else {})})
    measured_on = machine.machines_line(p.machine for j in jobs for p in j.points if p.ok)
    return {"schema_version": SCHEMA_VERSION, "measured_on": measured_on,
            "baseline_jobs": [b.name for b in baselines], "points": rows,
            "best_k": [c.to_dict() for c in choices], "schedules": schedules,
            "forced": forced_table(rows), "break_even": break_even.break_even(rows), "skipped": skipped,
            **explained, "fleet": fleet.compare([*jobs, *borrowed], rows, fleet.resolve(fleet_options, jobs))}


def forced_table(rows: list[dict]) -> list[dict]:
    """Speedup as a function of the forced acceptance length: one row per forced point,
    with the AL it measured (chunk-counted and the server's) beside the forced value."""
    out = []
    for r in rows:
        f = r["forced_acceptance"]
        if not f:
            continue
        out.append({"forced": f, "k": r["k"], **({"configuration": r["configuration"]} if "configuration" in r else {}),
                    "dataset": r["dataset"], "temperature": r["temperature"],
                    "concurrency": r["concurrency"], "measured_al": r["measured_al"], "server_al": r["server_al"],
                    "output_tps": r["speedup"]["spec_output_tps"], "speedup": r["speedup"]["throughput"],
                    "beats_baseline": r["beats_baseline"]})
    key = lambda x: (x["dataset"], x["temperature"], x["concurrency"], x["forced"].get("length") or 0,  # noqa: E731
                     (x.get("configuration") or {}).get("label") or "")
    return sorted(out, key=key)


def throughput_repeats(rep_spec: Optional[dict], rep_base: Optional[dict]) -> Optional[dict]:
    """The throughput speedup over repeats: repeat i of the speculative point over repeat
    i of the baseline (both run their repeats in rounds, in the same order), summarised
    like every repeated figure (launcher.stats.repeats); None without repeats on both sides."""
    if not rep_spec or not rep_base:
        return None
    ratios = per_repeat_speedups(rep_spec, rep_base)
    out = summarize(ratios, float(rep_spec.get("noisy_rel_mad") or NOISY_REL_MAD)) if len(ratios) > 1 else None
    return out.to_dict() if out else None


def per_repeat_ratios(rep_spec: Optional[dict], rep_base: Optional[dict], figure: str) -> list[float]:
    """Repeat i's ``figure`` over the baseline's repeat i (with sweep.server_starts, repeat i of
    both sides ran on the same start number); [] without repeats on both sides."""
    if not rep_spec or not rep_base:
        return []
    s = [r.get(figure) for r in rep_spec.get("per_repeat") or []]
    b = [r.get(figure) for r in rep_base.get("per_repeat") or []]
    return [x / y for x, y in zip(s, b) if x and y]


def per_repeat_speedups(rep_spec: Optional[dict], rep_base: Optional[dict]) -> list[float]:
    """Repeat i's Output TPS over the baseline's repeat i."""
    return per_repeat_ratios(rep_spec, rep_base, "Output TPS")


def _add_predictions(rows: list[dict]) -> None:
    """Fit the draft cost per server configuration and (dataset, T, C) over the k measured there, then predict."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["configuration"]["fingerprint"], r["dataset"], r["temperature"], r["concurrency"]),
                          []).append(r)
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
                r["prediction"]["predicted_speedup"], r["speedup"]["throughput"], cost.v if cost else None,
                predict.unresolved_cost(cost))


def load_analysis(root: Path, jobs: list[Job]) -> Optional[dict]:
    """The written speedup_summary.json of ``root`` when it covers every
    speculative point that has a speedup.json and holds the "why" figures (launcher.speedup.why),
    else a fresh analysis."""
    written = read_json(Path(root) / SUMMARY_FILE)
    on_disk = sum(1 for j in jobs if not is_baseline(j) for p in j.points if (p.path / SPEEDUP_FILE).is_file())
    if isinstance(written, dict) and written.get("schema_version") == SCHEMA_VERSION and \
            len(written.get("points") or []) >= on_disk and written.get("points") and "step_costs" in written \
            and "fleet" in written and "held_out" in written:
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

def write_all(root: Path, only_job: Optional[Path] = None, borrowed: Sequence[Job] = (),
              jobs: Optional[list[Job]] = None, fleet_options: Optional[fleet.Options] = None) -> Optional[dict]:
    """Analyse the jobs under ``root`` (``jobs``: already loaded) and write speedup.json per point,
    speedup_summary.json in ``root`` and the summary.json blocks (only ``only_job``'s when given).
    ``borrowed``: baselines of another folder (analyse). Returns the analysis (None without a baseline)."""

    jobs = load_results(root) if jobs is None else jobs
    res = analyse(jobs, borrowed, fleet_options)
    if res is None:
        return None
    for row in res["points"]:
        write_json_atomic(Path(row["point_dir"]) / SPEEDUP_FILE,
                          {"schema_version": SCHEMA_VERSION, **{k: v for k, v in row.items()
                                                                if k not in ("job_dir", "point_dir")}})
    write_json_atomic(Path(root) / SUMMARY_FILE, res)
    for row in res["points"]:  # the speedup over repeats beside the point's other repeated figures
        doc = record.read(row["point_dir"])
        if doc is not None and row.get("throughput_repeats"):
            doc["stats"]["speedup"] = row["throughput_repeats"]
            doc.setdefault("figures", {})["speedup"] = ("Output TPS of repeat i / the baseline's repeat i "
                                                        "(launcher.speedup)")
            write_json_atomic(Path(row["point_dir"]) / record.REPEATS_FILE, doc)
    for job in jobs:
        if is_baseline(job) or (only_job is not None and Path(job.path).resolve() != Path(only_job).resolve()):
            continue
        mine = [compact(r) for r in res["points"] if r["job"] == job.name]
        speedup = {"baseline_jobs": res["baseline_jobs"], "points": mine, "best_k": res["best_k"],
                   "schedules": res["schedules"], "file": str(Path(root) / SUMMARY_FILE)}
        change_summary(job.path, lambda s: None if s is None else {**s, "speedup": speedup}, allow_nan=False)
    return res
