"""Why each speculative point's speedup is what it is: the shell that reads what the run
recorded and hands it to the pure parts.

For each point row of launcher.speedup.analysis.analyse it adds

* ``decomposition``: speedup = AL / step cost, the step cost with its interval over repeats
  (launcher.speedup.decompose);
* ``settings_differ``: the serving settings by which the server differs from its baseline
  (launcher.speedup.like_for_like; None when a side recorded no argv);
* ``causes``: host-bound, GPU-bound, clock-capped, steal, unlike, other-GPU, other-host, each a
  word and a sentence (launcher.speedup.causes), from both sides' machine records;
* ``configuration``: the server in words, shared by its forced levels;
* ``same_machine``: whether it and its baseline ran on one machine (None: not recorded);
* ``request_parts``: each repeat's prefill, time per output token, AL and speedup
  (launcher.speedup.request_parts), what the cost model across ALs is made of;

and returns the analysis' ``cause_thresholds``, ``step_costs`` (per configuration, from its forced
runs: launcher.speedup.at_al), ``measured_vs_predicted`` and ``held_out`` (each forced level
predicted from the configuration's others: launcher.speedup.held_out).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from launcher.results.identity import run_identity
from launcher.results.job_dir import Job, Point
from launcher.results.repeats import record
from launcher.runtime import machine
from launcher.speedup import at_al, held_out, like_for_like
from launcher.speedup.al_model import STEP_DRIFT
from launcher.speedup.break_even import point_al
from launcher.speedup.causes import THRESHOLDS, causes, same_machine
from launcher.speedup.request_parts import request_parts
from launcher.speedup.decompose import decomposition


def machine_rows(point: Optional[Point]) -> list[Optional[dict]]:
    """A point's machine per repeat (repeats.json's ``machine`` of each repeat), else its one window
    (configuration.json's, as launcher.runtime.machine.compact puts it); [] when unrecorded."""
    if point is None:
        return []
    doc = record.read(point.path)
    reps = [r.get("machine") for r in (doc or {}).get("per_repeat") or [] if isinstance(r, dict)]
    if any(reps):
        return reps
    one = machine.compact((point.machine or {}).get("window"))
    return [one] if one else []


def _point(job: Optional[Job], path: Optional[str] = None, rel: Optional[str] = None) -> Optional[Point]:
    for p in (job.points if job else []):
        if (path is not None and Path(p.path) == Path(path)) or (rel is not None and p.dir == rel):
            return p
    return None


def explain(rows: list[dict], jobs: list[Job]) -> dict:
    """Add each row's decomposition, differing settings, causes and configuration (in place);
    return the analysis-level figures."""
    by_name = {j.name: j for j in jobs}
    cache: dict[tuple, tuple] = {}
    for r in rows:
        job, base = by_name.get(r["job"]), by_name.get(r["baseline_job"])
        p = _point(job, path=r["point_dir"])
        bp = _point(base, rel=p.dir if p else None)
        if (r["job"], r["baseline_job"]) not in cache:
            method = run_identity(job).method if job else None
            cache[(r["job"], r["baseline_job"])] = (
                like_for_like.differing(job, base, method) if job and base else None,
                like_for_like.drafter_label(job, base, method, r["k"], r["draft"]) if job and base else r["job"])
        diff, label = cache[(r["job"], r["baseline_job"])]
        r["decomposition"] = decomposition(r)
        r["settings_differ"] = diff
        r["causes"] = [c.to_dict() for c in causes(machine_rows(p), machine_rows(bp), diff or [],
                                                     p.machine if p else None, bp.machine if bp else None)]
        r["drafter"] = label
        r["same_machine"] = same_machine(p.machine if p else None, bp.machine if bp else None)
        r["request_parts"] = request_parts(p, record.read(p.path) if p else None,
                                           record.read(bp.path) if bp else None, r["speedup"].get("throughput"),
                                           point_al(r))
    costs = at_al.configuration_costs(rows)
    return {"cause_thresholds": THRESHOLDS.to_dict(), "step_costs": costs,
            "measured_vs_predicted": at_al.measured_vs_predicted(rows, costs),
            "held_out": held_out.check(rows), "model_step_drift": STEP_DRIFT}
