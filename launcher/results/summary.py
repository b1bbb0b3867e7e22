"""``summary.json``: one per job folder, the job's points with their status,
what the job checked (lossless, known answer, golden, speedups) and how it
ended. This module is the only one that opens the file (a test checks it)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional

from launcher.runtime.files import write_json_atomic

SUMMARY_FILE = "summary.json"


def summary_path(job_dir) -> Path:
    return Path(job_dir) / SUMMARY_FILE


def has_summary(job_dir) -> bool:
    return summary_path(job_dir).exists()


def read_summary(job_dir) -> Optional[dict]:
    """The job's summary, or None when it is absent, unreadable or not an object."""
    try:
        v = json.loads(summary_path(job_dir).read_text())
    except (OSError, ValueError):
        return None
    return v if isinstance(v, dict) else None


def load_summary(job_dir) -> dict:
    """The job's summary; OSError/ValueError when it cannot be read (callers that name the file)."""
    v = json.loads(summary_path(job_dir).read_text())
    if not isinstance(v, dict):
        raise ValueError(f"{summary_path(job_dir)}: expected a JSON object")
    return v


def write_summary(job_dir, summary: dict, *, allow_nan: bool = True) -> Path:
    return write_json_atomic(summary_path(job_dir), summary, allow_nan=allow_nan)


def change_summary(job_dir, change: Callable[[Optional[dict]], Optional[dict]], *,
                   allow_nan: bool = True) -> Optional[dict]:
    """The one read-modify-write of summary.json: ``change`` gets the summary (None when
    there is none) and returns the summary to write (None: leave the file as it is)."""
    new = change(read_summary(job_dir))
    if new is not None:
        write_summary(job_dir, new, allow_nan=allow_nan)
    return new


def update_summary(job_dir, **fields) -> Optional[dict]:
    """Set top-level ``fields`` of an existing summary (None when there is none)."""
    return change_summary(job_dir, lambda s: None if s is None else {**s, **fields})
