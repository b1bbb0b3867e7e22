"""The job's two status files, read and written only here:

* ``progress.json``: what the benchmark is doing now (points done, the points AIPerf
  is measuring, elapsed), rewritten many times a second, so without fsync; closed by
  the job's end (``finished``).
* ``logs/error.txt``: why the job failed, in one line (the first line is the reason
  the launcher shows); absent when the job did not fail.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from launcher.runtime.files import write_json_atomic, write_text_atomic

PROGRESS_FILE = "progress.json"
ERROR_FILE = "logs/error.txt"


def read_progress(job_dir: Path | str) -> dict:
    """progress.json as a dict ({} when it is missing or torn)."""
    try:
        v = json.loads((Path(job_dir) / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return v if isinstance(v, dict) else {}


def write_progress(job_dir: Path | str, doc: dict, durable: bool = False) -> Path:
    """progress.json, atomically; fsynced only when ``durable`` (its final state)."""
    if durable:
        return write_json_atomic(Path(job_dir) / PROGRESS_FILE, doc)
    return write_text_atomic(Path(job_dir) / PROGRESS_FILE, json.dumps(doc), durable=False)


def write_error(job_dir: Path | str, reason: str) -> str:
    """logs/error.txt: the failure reason on one line; returns that line."""
    line = " ".join(str(reason).split()) or "failed"
    path = Path(job_dir) / ERROR_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, line + "\n")
    return line


def read_error(job_dir: Path | str) -> Optional[str]:
    """The failure reason (the first line of logs/error.txt), None when there is none."""
    try:
        lines = (Path(job_dir) / ERROR_FILE).read_text().strip().splitlines()
    except OSError:
        return None
    return lines[0] if lines and lines[0].strip() else None


def clear_error(job_dir: Path | str) -> None:
    """Remove an earlier attempt's reason (a resumed job starts without one)."""
    try:
        (Path(job_dir) / ERROR_FILE).unlink()
    except FileNotFoundError:
        pass
