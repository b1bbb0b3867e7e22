"""Read benchmark result folders (docs/results-layout.md) into plain objects.

Shared by ``launcher.report``, ``launcher.compare`` and ``launcher.speedup``. Nothing here draws or
prints; a folder that cannot be read raises :class:`ResultsError` with a
one-line message.

A *job folder* holds ``summary.json`` at its root (one server configuration).
A *results folder* may be a job folder itself or hold job folders a few levels
down (``results/<recipe>/<server_id>/``). A job folder whose sweep died before
``summary.json`` was written is still recognised by its
``<dataset>/t<T>_c<C>/`` point folders. specdec_bench's own output folders
(``--save_dir``: its metric files directly inside) are read too: one such
folder, or a folder of them, is a job. Every file is read through
:mod:`launcher.results`.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from launcher.results import (ACCEPTANCE_FILE, EXTENSION_KEY, TIMING_FILE, PointResult, ValidityRule, point_problems,
                              read_point)
from launcher.contracts.job import JobSpec, point_dir_name, read_recorded_job
from launcher.contracts.job_paths import LOGS_DIR, JobPaths
from launcher.results.layout import is_run_dir
from launcher.results.point import stat
from launcher.results.store import is_complete
from launcher.results.summary import PointRow, has_summary, point_rows, read_summary, summary_path as summary_file
from launcher.results.validity import thin_sample
from launcher.runtime.datasets import speed_dataset

POINT_DIR = re.compile(r"^t(?P<t>[0-9.eE+-]+)_c(?P<c>\d+)$")
# Folders never holding jobs (our own output, AIPerf's artifacts, logs).
_SKIP = {"report", "aiperf", LOGS_DIR, "__pycache__"}
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
    row: PointRow = field(default_factory=PointRow)  # the summary.json entry (may be empty)
    result: PointResult | None = None             # the files, read by launcher.results

    @property
    def acceptance(self) -> dict | None:
        return (self.result.acceptance or None) if self.result else None

    @property
    def timing(self) -> dict | None:
        return (self.result.timing or None) if self.result else None

    @property
    def configuration(self) -> dict | None:
        return (self.result.configuration or None) if self.result else None

    @property
    def machine(self) -> dict | None:
        """Where the point was measured: GPU, host, clocks and load over it (configuration.json's
        ``machine``, launcher.runtime.machine); None for files that predate it."""
        ext = ((self.configuration or {}).get(EXTENSION_KEY)) or {}
        return ext.get("machine") if isinstance(ext.get("machine"), dict) else None

    @property
    def problems(self) -> list[str]:
        """launcher.results' validity rule (the recipe's gates are in the status the bench recorded)."""
        if self.result is None:
            return ["no result files"]
        return point_problems(self.result, ValidityRule(max_failed_fraction=1.0))

    @property
    def ok(self) -> bool:
        """Complete (or skipped on resume, i.e. complete earlier) and valid."""
        return self.status in ("complete", "skipped") and self.acceptance is not None and not self.problems

    def _value(self, v, attr: str) -> float | None:
        if v is not None:
            return float(v)
        r = getattr(self.row, attr)
        return float(r) if isinstance(r, (int, float)) and not isinstance(r, bool) else None

    @property
    def average_al(self) -> float | None:
        return self._value(self.result and self.result.average_al, "average_al")

    @property
    def server_al(self) -> float | None:
        return self._value(self.result and self.result.server_al, "server_al")

    @property
    def prometheus_al(self) -> float | None:
        return self._value(self.result and self.result.prometheus_al, "prometheus_al")

    @property
    def output_tps(self) -> float | None:
        return self._value(self.result and self.result.output_tps, "output_tps")

    @property
    def output_tps_per_gpu(self) -> float | None:
        return self._value(self.result and self.result.output_tps_per_gpu, "output_tps_per_gpu")

    @property
    def num_gpus(self) -> int | None:
        if not self.result:
            return None
        n = self.result.tim_ext.get("num_gpus") or (self.configuration or {}).get("tp_size")
        return n if isinstance(n, int) else None

    @property
    def decode_tps_p50(self) -> float | None:
        """Per-user decode speed: median over requests of generation tokens/s."""
        return self._value(self.result and self.result.decode_tps_median, "decode_tps_median")

    @property
    def e2e_tps_p50(self) -> float | None:
        """Per-user end-to-end speed: the median output tokens over the median request time (TTFT
        included). Where no decode speed could be timed (every request's chunks after the first
        arrived at once) it is the one per-user speed the point has."""
        if not self.result:
            return None
        tokens, e2e = stat(self.result.timing, "Number of Output Tokens"), stat(self.result.timing, "E2E Request Time")
        if tokens is None or not e2e:
            return None
        return tokens / (e2e / 1e3 if self.result.legacy else e2e)

    @property
    def ttft_p50_ms(self) -> float | None:
        v = self.result.ttft_median_s if self.result else None
        if v is None and isinstance(self.row.ttft_median_s, (int, float)):
            v = self.row.ttft_median_s
        return None if v is None else v * 1e3

    def thin(self, statistic: str) -> bool:
        """The statistic rests on fewer than 5 samples or fewer than half the requests."""
        if not self.result:
            return False
        return thin_sample(self.result.count(statistic), self.result.num_turns)

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
    spec: Optional[JobSpec] = None    # job.json (launcher.contracts.job.read_recorded_job), None when absent

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


def _point_from_row(job_dir: Path, row: PointRow) -> Point:
    rel = row.dir or point_dir_name(str(row.dataset), float(row.temperature or 0), int(row.concurrency or 0))
    pdir = job_dir / rel
    return Point(
        dataset=str(row.dataset or rel.split("/")[0]),
        temperature=float(row.temperature or 0.0),
        concurrency=int(row.concurrency or 0),
        dir=rel, status=str(row.status or "unknown"), reason=row.reason,
        path=pdir, row=row, result=read_point(pdir),
    )


def _specdec_dataset(cfg: dict) -> str:
    if cfg.get("mtbench"):
        return "mtbench"
    if cfg.get("specbench"):
        return "specbench"
    if cfg.get("dataset") == "speed":
        return speed_dataset(Path(str(cfg.get('dataset_path') or 'speed')).stem)
    return str(cfg.get("dataset") or "random")


def _specdec_point(job_dir: Path, run_dir: Path) -> Point:
    """A specdec_bench output folder as a point: dataset, temperature and
    concurrency from its configuration.json; complete when its files are."""
    res = read_point(run_dir)
    cfg = res.configuration
    temp = cfg.get("temperature")
    if temp is None:
        temp = ((cfg.get("runtime_params") or {}).get("sampling_kwargs") or {}).get("temperature", 0.0)
    problems = point_problems(res, ValidityRule(max_failed_fraction=1.0))
    rel = "." if run_dir == job_dir else run_dir.relative_to(job_dir).as_posix()
    return Point(dataset=_specdec_dataset(cfg), temperature=float(temp or 0.0),
                 concurrency=int(cfg.get("concurrency") or 0), dir=rel,
                 status="complete" if not problems else "failed", reason="; ".join(problems) or None,
                 path=run_dir, result=res)


def _specdec_runs(d: Path) -> list[Path]:
    if is_run_dir(d):
        return [d]
    try:
        return sorted(c for c in d.iterdir() if c.is_dir() and c.name not in _SKIP and is_run_dir(c))
    except OSError:
        return []


def _scan_points(job_dir: Path) -> list[PointRow]:
    """Summary-like rows for the point folders of a job that has no summary.json."""
    rows = []
    for ds in sorted(p for p in job_dir.iterdir() if p.is_dir() and p.name not in _SKIP):
        for pd in sorted(p for p in ds.iterdir() if p.is_dir()):
            m = POINT_DIR.match(pd.name)
            if not m:
                continue
            done = is_complete(pd)
            rows.append(PointRow(ds.name, float(m["t"]), int(m["c"]), f"{ds.name}/{pd.name}",
                                 "complete" if done else "failed",
                                 None if done else "no COMPLETE marker (no summary.json)"))
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
    summary_path = summary_file(job_dir)
    if not summary_path.exists() and not _has_point_dirs(job_dir) and _specdec_runs(job_dir):
        points = [_specdec_point(job_dir, r) for r in _specdec_runs(job_dir)]
        points.sort(key=lambda p: (p.dataset, p.temperature, p.concurrency))
        return Job(path=job_dir, summary={"server_id": job_dir.name, "source": "specdec_bench"}, points=points)
    if summary_path.exists():
        summary = read_summary(job_dir)
        if summary is None:
            raise ResultsError(f"{summary_path}: not a JSON object")
        if not isinstance(summary.get("points") or [], list):
            raise ResultsError(f"{summary_path}: 'points' is not a list")
        rows = point_rows(summary)
    else:
        summary, rows = {}, _scan_points(job_dir)
    try:
        points = [_point_from_row(job_dir, r) for r in rows]
    except (TypeError, ValueError) as e:
        raise ResultsError(f"{summary_path}: a point entry cannot be read ({e})") from None
    points.sort(key=lambda p: (p.dataset, p.temperature, p.concurrency))
    return Job(path=job_dir, summary=summary, points=points,
               telemetry=read_json(JobPaths(job_dir).gpu_telemetry),
               spec=read_recorded_job(job_dir))


def find_job_dirs(root: Path) -> list[Path]:
    """Job folders at or below ``root`` (depth <= MAX_DEPTH), sorted by path."""
    root = Path(root)
    if not root.is_dir():
        raise ResultsError(f"{root}: not a directory")
    if has_summary(root) or _has_point_dirs(root) or is_run_dir(root):
        return [root]
    found: list[Path] = []

    def walk(d: Path, depth: int) -> None:
        try:
            children = sorted(c for c in d.iterdir() if c.is_dir() and c.name not in _SKIP)
        except OSError:
            return
        for c in children:
            if has_summary(c) or _has_point_dirs(c):
                found.append(c)
            elif is_run_dir(c):  # specdec_bench output folders: their parent is the job
                if d not in found:
                    found.append(d)
            elif depth < MAX_DEPTH:
                walk(c, depth + 1)

    walk(root, 1)
    if not found:
        raise ResultsError(f"{root}: no job folder found (no summary.json or <dataset>/t<T>_c<C>/ folders)")
    return found


def load_results(root: Path) -> list[Job]:
    """Every job under ``root``; raises ResultsError when there is none."""
    return [load_job(d) for d in find_job_dirs(root)]
