"""bench.disagg_parity's verdict (topology=disagg), after both sides ran:

    python -m launcher.bench.disagg_parity --spec JOB_DIR/job.json

reads the disaggregated job's summary and points and the aggregated side's (the job
spec's topology.parity.job_dir), writes ``disagg_parity.json`` in the job folder
(launcher/results/disagg_parity.py), records the verdict in summary.json, prints one
line, and exits 1 unless the verdict is pass. Acceptance is not judged at a temperature where
the job's known-answer probe (known_answer.json, run before the verdict) failed.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional, Sequence

from launcher.bench.known_answer import defect_message
from launcher.bench.known_answer import read as read_known_answer
from launcher.results import read_point
from launcher.results.disagg_parity import one_line, parity_verdict, read_outputs, write_parity
from launcher.results.summary import PointRow, point_rows, read_summary, update_summary
from launcher.contracts.job import JobSpec, SpecError


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m launcher.bench.disagg_parity", description=__doc__.split("\n\n")[0])
    p.add_argument("--spec", required=True, help="the disaggregated job's job.json")
    a = p.parse_args(argv)
    try:
        job = JobSpec.read(a.spec)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    par = job.topology.parity if job.topology else None
    if par is None:
        print("error: the job has no disagg parity check (fix: topology=disagg bench.disagg_parity=true)",
              file=sys.stderr)
        return 2
    d_dir, a_dir = Path(job.job_dir), Path(par.job_dir)
    d_rows, a_rows = _with_step_counts(d_dir), _with_step_counts(a_dir)
    outputs = {pt.dir: (read_outputs(d_dir / pt.dir), read_outputs(a_dir / pt.dir))
               for pt in d_rows if float(1 if pt.temperature is None else pt.temperature) == 0.0}
    verdict = parity_verdict(d_rows, a_rows, par.al_tolerance, outputs, defective_temperatures(d_dir),
                             run_windows=read_summary(d_dir).get("prometheus_runs") or ())
    verdict.update({"disagg_job": str(d_dir), "aggregated_job": str(a_dir)})
    write_parity(d_dir, verdict)
    update_summary(d_dir, disagg_parity={"verdict": verdict["verdict"], "checks": verdict["checks"],
                                         "aggregated_job": str(a_dir), "problems": verdict["problems"]})
    print(one_line(verdict), file=sys.stderr)
    return 0 if verdict["verdict"] == "pass" else 1


def defective_temperatures(job_dir: Path) -> dict[float, str]:
    """Temperature -> the known-answer probe's words where it failed, from the job's
    known_answer.json ({} when the probe did not run or passed everywhere)."""
    try:
        entries = read_known_answer(job_dir).get("temperatures") or []
    except (OSError, ValueError):
        return {}
    return {float(e["temperature"]): f"known-answer probe failed: {defect_message(e)}"
            for e in entries if isinstance(e, dict) and e.get("passed") is False and "temperature" in e}


def _with_step_counts(job_dir: Path) -> list[PointRow]:
    """The job's summary rows with the step counts behind each point's AL (from its files)."""
    rows = []
    for pt in point_rows(read_summary(job_dir)):
        try:
            ext = read_point(job_dir / pt.dir).acc_ext
        except Exception:  # noqa: BLE001 - a point without files: its row says so
            rows.append(pt)
            continue
        rows.append(replace(pt, num_spec_steps=ext.get("num_spec_steps"), num_turns=ext.get("num_turns"),
                            num_accepted_draft_tokens=ext.get("num_accepted_draft_tokens")))
    return rows


if __name__ == "__main__":
    sys.exit(main())
