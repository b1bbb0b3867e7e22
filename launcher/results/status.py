"""The job's two status files, read and written only here:

* ``progress.json``: what the benchmark is doing now (points done, the points AIPerf
  is measuring, elapsed), rewritten many times a second, so without fsync; closed by
  the job's end (``finished``).
* ``logs/error.txt``: why the job failed, in one line (the first line is the reason
  the launcher shows); absent when the job did not fail.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Optional

from launcher.contracts.job_paths import JobPaths
from launcher.runtime.files import write_json_atomic, write_text_atomic

PROGRESS_FILE = "progress.json"
ERROR_FILE = "error.txt"  # in the job's logs/ (launcher.contracts.job_paths)


@dataclass(frozen=True)
class JobProgress:
    """progress.json. The benchmark writes the first five while it runs; the job's end
    (launcher.results.job_end) closes it. A key left None is not written, so a file
    reads back as it was; keys this version does not know are kept (``extra``)."""
    points_total: Optional[int] = None
    points_done: Optional[int] = None
    current: Optional[str] = None  # what the benchmark is doing, in words
    running: list = field(default_factory=list)  # point folders AIPerf is measuring now
    elapsed_s: Optional[float] = None
    running_at_end: Optional[list] = None  # closed: what was running when the job ended
    points_done_total: Optional[int] = None  # closed: points complete or skipped
    finished: Optional[bool] = None  # closed by the job's end
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k != "extra" and v is not None}
        return {**self.extra, **d}

    @classmethod
    def from_dict(cls, d: dict) -> "JobProgress":
        known = {f.name for f in fields(cls)} - {"extra"}
        v = {k: d[k] for k in known if k in d}
        if not isinstance(v.get("running"), list):
            v["running"] = []
        return cls(**v, extra={k: x for k, x in d.items() if k not in known})


def read_progress(job_dir: Path | str) -> Optional[JobProgress]:
    """progress.json (None when it is missing or torn)."""
    try:
        v = json.loads((Path(job_dir) / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return JobProgress.from_dict(v) if isinstance(v, dict) else None


def write_progress(job_dir: Path | str, progress: JobProgress, durable: bool = False) -> Path:
    """progress.json, atomically; fsynced only when ``durable`` (its final state)."""
    doc = progress.to_dict()
    if durable:
        return write_json_atomic(Path(job_dir) / PROGRESS_FILE, doc)
    return write_text_atomic(Path(job_dir) / PROGRESS_FILE, json.dumps(doc), durable=False)


def _error_path(job_dir: Path | str) -> Path:
    return JobPaths(job_dir).in_logs(ERROR_FILE)


def write_error(job_dir: Path | str, reason: str) -> str:
    """logs/error.txt: the failure reason on one line; returns that line."""
    line = " ".join(str(reason).split()) or "failed"
    path = _error_path(job_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, line + "\n")
    return line


def read_error(job_dir: Path | str) -> Optional[str]:
    """The failure reason (the first line of logs/error.txt), None when there is none."""
    try:
        lines = _error_path(job_dir).read_text().strip().splitlines()
    except OSError:
        return None
    return lines[0] if lines and lines[0].strip() else None


def clear_error(job_dir: Path | str) -> None:
    """Remove an earlier attempt's reason (a resumed job starts without one)."""
    try:
        _error_path(job_dir).unlink()
    except FileNotFoundError:
        pass
