"""``summary.json``: one per job folder, the job's points with their status,
what the job checked (lossless, known answer, golden, speedups) and how it
ended. This module is the only one that opens the file (a test checks it)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Callable, Iterable, Optional

from launcher.runtime.files import write_json_atomic

SUMMARY_FILE = "summary.json"

# A point row: (attribute, summary.json key). The keys are specdec_bench's figure names and
# the fields readers of summary.json (ours and others') know: they are the file's format.
_ROW_KEYS = (
    # always written, in this order (the benchmark starts every row with them)
    ("dataset", "dataset"), ("temperature", "temperature"), ("concurrency", "concurrency"), ("dir", "dir"),
    ("status", "status"), ("reason", "reason"), ("average_al", "Average_AL"), ("server_al", "Server_AL"),
    ("output_tps", "Output TPS"), ("ttft_median_s", "TTFT median s"), ("decode_tps_median", "Decode tok/s median"),
    ("failed_requests", "failed_requests"), ("benchmark_duration_s", "benchmark_duration_s"),
    # written once the point was measured (launcher.bench.point_files.point_values), or a check marked it
    ("prometheus_al", "Prometheus_AL"), ("output_tps_per_gpu", "Output TPS/gpu"), ("ttft_count", "TTFT count"),
    ("decode_tps_count", "Decode tok/s count"), ("num_requests", "num_requests"), ("num_turns", "num_turns"),
    ("per_position_rates", "per_position_rates"), ("forced_acceptance", "forced_acceptance"),
    ("goodput", "goodput"), ("schedule_check", "schedule_check"), ("repeats", "repeats"),
    ("acceptance_exact", "acceptance_exact"), ("kv_transfer", "kv_transfer"), ("forced_verdict", "forced_verdict"),
    ("golden", "golden"), ("engine_warning", "engine_warning"), ("search_probe", "search_probe"),
    ("num_spec_steps", "num_spec_steps"), ("num_accepted_draft_tokens", "num_accepted_draft_tokens"),
    ("acceptance_impossible", "acceptance_impossible"),
)
_ALWAYS = 13
ROW_KEY = dict(_ROW_KEYS)  # attribute -> summary.json key
_ROW_ATTR = {k: a for a, k in _ROW_KEYS}


@dataclass(frozen=True)
class PointRow:
    """One entry of summary.json's ``points``. ``to_dict`` writes today's keys (ROW_KEY):
    each one that is set or that the row held (``held``: the row it was read from, or the
    thirteen every row of the benchmark starts with, ``PointRow.begun``); keys this version
    does not know are kept (``extra``). A row reads back as it was written."""
    dataset: Optional[str] = None
    temperature: Optional[float] = None
    concurrency: Optional[int] = None
    dir: Optional[str] = None  # the point's folder in the job folder, <dataset>/t<T>_c<C>
    status: Optional[str] = None  # pending, complete, failed, skipped, not_run
    reason: Optional[str] = None
    average_al: Optional[float] = None
    server_al: Optional[float] = None
    output_tps: Optional[float] = None
    ttft_median_s: Optional[float] = None
    decode_tps_median: Optional[float] = None
    failed_requests: Optional[int] = None
    benchmark_duration_s: Optional[float] = None
    prometheus_al: Optional[float] = None
    output_tps_per_gpu: Optional[float] = None
    ttft_count: Optional[int] = None
    decode_tps_count: Optional[int] = None
    num_requests: Optional[int] = None
    num_turns: Optional[int] = None
    per_position_rates: Optional[list] = None
    forced_acceptance: Optional[dict] = None
    goodput: Optional[dict] = None
    schedule_check: Optional[dict] = None
    repeats: Optional[dict] = None
    acceptance_exact: Optional[bool] = None
    kv_transfer: Optional[dict] = None
    forced_verdict: Optional[str] = None  # pass / fail: the forced-acceptance known answer
    golden: Optional[str] = None  # the golden check's verdict of this point
    engine_warning: Optional[str] = None  # a known engine defect reflected in its figures
    search_probe: Optional[bool] = None  # measured by the SLO search, not planned
    num_spec_steps: Optional[int] = None  # the disagg parity's step counts, when a row holds them
    num_accepted_draft_tokens: Optional[int] = None
    acceptance_impossible: Optional[str] = None  # why its acceptance cannot be true (launcher.results.plausibility)
    held: frozenset = field(default=frozenset(), compare=False)  # optional keys the source row held
    extra: dict = field(default_factory=dict)  # keys this version does not know

    @classmethod
    def begun(cls, dataset: str, temperature: float, concurrency: int, dir: str, status: str = "pending",
              reason: Optional[str] = None) -> "PointRow":
        """A row as the benchmark starts it: the first thirteen keys, nothing measured yet."""
        return cls(dataset, temperature, concurrency, dir, status, reason, failed_requests=0,
                   held=frozenset(k for _, k in _ROW_KEYS[:_ALWAYS]))

    @classmethod
    def planned(cls, dataset: str, temperature: float, concurrency: int, dir: str) -> "PointRow":
        """A row of a point the job planned and the benchmark never listed (status pending)."""
        return cls(dataset, temperature, concurrency, dir, "pending", None, held=frozenset({"reason"}))

    @property
    def done(self) -> bool:
        """Complete, or skipped as complete (resumed)."""
        return self.status in ("complete", "skipped")

    def to_dict(self) -> dict:
        d = {key: getattr(self, attr) for attr, key in _ROW_KEYS
             if getattr(self, attr) is not None or key in self.held}
        return {**d, **self.extra}

    @classmethod
    def from_dict(cls, d: dict) -> "PointRow":
        """A row as summary.json (of any version) holds it."""
        known = {_ROW_ATTR[k]: v for k, v in d.items() if k in _ROW_ATTR}
        return cls(**known, held=frozenset(k for k in d if k in _ROW_ATTR),
                   extra={k: v for k, v in d.items() if k not in _ROW_ATTR})

    def with_figures(self, figures: dict) -> "PointRow":
        """The row with ``figures`` (summary.json keys, as launcher.bench.point_files.point_values
        gives them) set; keys this version does not know go to ``extra``."""
        known = {_ROW_ATTR[k]: v for k, v in figures.items() if k in _ROW_ATTR}
        return replace(self, **known, held=self.held | {k for k in figures if k in _ROW_ATTR},
                       extra={**self.extra, **{k: v for k, v in figures.items() if k not in _ROW_ATTR}})


def as_row(row) -> PointRow:
    """A PointRow, or a summary.json row (a dict) read as one."""
    return row if isinstance(row, PointRow) else PointRow.from_dict(dict(row))


def point_rows(summary: Optional[dict]) -> list[PointRow]:
    """The typed rows of a summary (its ``points``; rows that are not objects are skipped)."""
    rows = (summary or {}).get("points")
    return [PointRow.from_dict(r) for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def row_dicts(rows: Iterable[PointRow]) -> list[dict]:
    """The rows as summary.json holds them."""
    return [r.to_dict() for r in rows]


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
