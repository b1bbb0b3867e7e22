"""Read benchmark result folders (docs/results-layout.md) into plain objects.

Shared by ``launcher.report`` and ``launcher.compare``. Nothing here draws or
prints; a folder that cannot be read raises :class:`ResultsError` with a
one-line message.

A *job folder* holds ``summary.json`` at its root (one server configuration).
A *results folder* may be a job folder itself or hold job folders a few levels
down (``results/<recipe>/<server_id>/``). A job folder whose sweep died before
``summary.json`` was written is still recognised by its
``<dataset>/t<T>_c<C>/`` point folders.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POINT_DIR = re.compile(r"^t(?P<t>[0-9.eE+-]+)_c(?P<c>\d+)$")
# Folders never holding jobs (our own output, AIPerf's artifacts, logs).
_SKIP = {"report", "aiperf", "logs", "__pycache__"}
MAX_DEPTH = 3


class ResultsError(Exception):
    """A results folder that cannot be used; the message is one line."""


def read_json(path: Path) -> Any:
    """The parsed JSON at ``path``, or None when it is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


@dataclass
class Point:
    dataset: str
    temperature: float
    concurrency: int
    dir: str
    status: str
    reason: str | None
    path: Path
    row: dict = field(default_factory=dict)      # the summary.json entry (may be empty)
    acceptance: dict | None = None
    timing: dict | None = None
    configuration: dict | None = None

    @property
    def ok(self) -> bool:
        """Complete (or skipped on resume, i.e. complete earlier) with its result files."""
        return self.status in ("complete", "skipped") and self.acceptance is not None

    def _value(self, key: str, source: dict | None) -> float | None:
        if source and isinstance(source.get(key), (int, float)):
            return float(source[key])
        v = self.row.get(key)
        return float(v) if isinstance(v, (int, float)) else None

    @property
    def average_al(self) -> float | None:
        return self._value("Average_AL", self.acceptance)

    @property
    def server_al(self) -> float | None:
        return self._value("Server_AL", self.acceptance)

    @property
    def prometheus_al(self) -> float | None:
        return self._value("Prometheus_AL", self.acceptance)

    @property
    def output_tps(self) -> float | None:
        return self._value("Output TPS", self.timing)

    @property
    def output_tps_per_gpu(self) -> float | None:
        v = self._value("Output TPS/gpu", self.timing)
        if v is None and self.output_tps is not None:
            gpus = (self.timing or {}).get("num_gpus") or 1
            v = self.output_tps / gpus
        return v

    def _stat(self, name: str, stat: str) -> float | None:
        s = (self.timing or {}).get(name)
        if isinstance(s, dict) and isinstance(s.get(stat), (int, float)):
            return float(s[stat])
        return None

    @property
    def decode_tps_p50(self) -> float | None:
        """Per-user decode speed: median over requests of generation tokens/s."""
        v = self._stat("Request Generation Tokens Per Second", "p50")
        return v if v is not None else self._value("Decode tok/s p50", None)

    @property
    def ttft_p50_ms(self) -> float | None:
        v = self._stat("TTFT Time", "p50")
        return v if v is not None else self._value("TTFT p50 ms", None)

    @property
    def request_al(self) -> dict[str, float]:
        ra = (self.acceptance or {}).get("Request_AL") or {}
        return {str(k): float(v) for k, v in ra.items() if isinstance(v, (int, float))}

    @property
    def category_al(self) -> dict[str, float]:
        ca = (self.acceptance or {}).get("Category_AL") or {}
        return {str(k): float(v) for k, v in ca.items() if isinstance(v, (int, float))}

    @property
    def histogram(self) -> dict[int, int]:
        h = (self.acceptance or {}).get("Acceptance_Length_Histogram") or {}
        out = {}
        for k, v in h.items():
            try:
                out[int(k)] = int(v)
            except (TypeError, ValueError):
                continue
        return out


@dataclass
class Job:
    path: Path
    summary: dict
    points: list[Point]
    telemetry: dict | None = None
    plan: dict | None = None          # job.json

    @property
    def name(self) -> str:
        return self.summary.get("server_id") or self.path.name

    @property
    def configuration(self) -> dict:
        """configuration.json of the first point that has one ({} if none)."""
        for p in self.points:
            if p.configuration:
                return p.configuration
        return {}


def _fmt_t(t: float) -> str:
    return f"{t:g}"


def _point_from_row(job_dir: Path, row: dict) -> Point:
    rel = row.get("dir") or f"{row.get('dataset')}/t{_fmt_t(float(row.get('temperature') or 0))}_c{row.get('concurrency')}"
    pdir = job_dir / rel
    return Point(
        dataset=str(row.get("dataset") or rel.split("/")[0]),
        temperature=float(row.get("temperature") or 0.0),
        concurrency=int(row.get("concurrency") or 0),
        dir=rel, status=str(row.get("status") or "unknown"), reason=row.get("reason"),
        path=pdir, row=row,
        acceptance=read_json(pdir / "acceptance_rate.json"),
        timing=read_json(pdir / "timing.json"),
        configuration=read_json(pdir / "configuration.json"),
    )


def _scan_points(job_dir: Path) -> list[dict]:
    """Summary-like rows for the point folders of a job that has no summary.json."""
    rows = []
    for ds in sorted(p for p in job_dir.iterdir() if p.is_dir() and p.name not in _SKIP):
        for pd in sorted(p for p in ds.iterdir() if p.is_dir()):
            m = POINT_DIR.match(pd.name)
            if not m:
                continue
            done = (pd / "COMPLETE").exists()
            rows.append({"dataset": ds.name, "temperature": float(m["t"]), "concurrency": int(m["c"]),
                         "dir": f"{ds.name}/{pd.name}", "status": "complete" if done else "failed",
                         "reason": None if done else "no COMPLETE marker (no summary.json)"})
    return rows


def _has_point_dirs(d: Path) -> bool:
    try:
        return any(POINT_DIR.match(pd.name) and pd.is_dir()
                   for ds in d.iterdir() if ds.is_dir() and ds.name not in _SKIP
                   for pd in ds.iterdir())
    except OSError:
        return False


def load_job(job_dir: Path) -> Job:
    job_dir = Path(job_dir)
    summary_path = job_dir / "summary.json"
    if summary_path.exists():
        summary = read_json(summary_path)
        if not isinstance(summary, dict):
            raise ResultsError(f"{summary_path}: not a JSON object")
        rows = summary.get("points") or []
    else:
        summary, rows = {}, _scan_points(job_dir)
    if not isinstance(rows, list):
        raise ResultsError(f"{summary_path}: 'points' is not a list")
    try:
        points = [_point_from_row(job_dir, r) for r in rows if isinstance(r, dict)]
    except (TypeError, ValueError) as e:
        raise ResultsError(f"{summary_path}: a point entry cannot be read ({e})") from None
    points.sort(key=lambda p: (p.dataset, p.temperature, p.concurrency))
    return Job(path=job_dir, summary=summary, points=points,
               telemetry=read_json(job_dir / "gpu_telemetry.json"),
               plan=read_json(job_dir / "job.json"))


def find_job_dirs(root: Path) -> list[Path]:
    """Job folders at or below ``root`` (depth <= MAX_DEPTH), sorted by path."""
    root = Path(root)
    if not root.is_dir():
        raise ResultsError(f"{root}: not a directory")
    if (root / "summary.json").exists() or _has_point_dirs(root):
        return [root]
    found: list[Path] = []

    def walk(d: Path, depth: int) -> None:
        try:
            children = sorted(c for c in d.iterdir() if c.is_dir() and c.name not in _SKIP)
        except OSError:
            return
        for c in children:
            if (c / "summary.json").exists() or _has_point_dirs(c):
                found.append(c)
            elif depth < MAX_DEPTH:
                walk(c, depth + 1)

    walk(root, 1)
    if not found:
        raise ResultsError(f"{root}: no job folder found (no summary.json or <dataset>/t<T>_c<C>/ folders)")
    return found


def load_results(root: Path) -> list[Job]:
    """Every job under ``root``; raises ResultsError when there is none."""
    return [load_job(d) for d in find_job_dirs(root)]
