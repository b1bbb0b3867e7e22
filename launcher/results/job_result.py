"""``job_result.json``: what the submitit job returns, also kept in the job
folder (exit code, Slurm job id, the summary at the end), and the one-line words
the launcher's table prints for a job's known-answer verdict."""
from __future__ import annotations

from pathlib import Path

from launcher.runtime.files import write_json_atomic

JOB_RESULT_FILE = "job_result.json"


def write_job_result(job_dir, result: dict) -> Path:
    return write_json_atomic(Path(job_dir) / JOB_RESULT_FILE, result, indent=2)


def known_answer_line(result: dict) -> str:
    """For the launcher's table and the job log."""
    if result.get("status") == "skipped":
        return f"known-answer probe skipped: {result.get('reason')}"
    parts = []
    for e in result.get("temperatures", []):
        al = "n/a" if e.get("al") is None else f"{e['al']:.2f}"
        word = "pass" if e["passed"] else "FAIL" if e.get("applicable", True) else "n/a (greedy drafting)"
        if e["passed"] and e.get("within_tolerance") is not None:
            word = f"pass within {e['within_tolerance']:.0%} ({e['rejected_share']:.1%} rejected)"
        server = "" if e.get("server_al") is None else f", server {e['server_al']:.2f}"
        known = (e.get("known_defect") or {}).get("line") if not e["passed"] else None
        parts.append(f"T={e['temperature']:g} {word} (AL {al}/{e['expected_al']}{server})"
                     + (f": {known}" if known else ""))
    return "known-answer " + ", ".join(parts)
