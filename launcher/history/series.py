"""Runs into series: one per (model, draft, method, k, forced acceptance, dataset, T, C), ordered by time,
each run judged against the one before it by launcher.compare's noise-aware rule.

A run is read through launcher.results (launcher.results.job_dir.load_job on its
folder: ours or specdec_bench's), its identity through launcher.results.identity (the
reader compare and the report use). Its time is configuration.json's ``timestamp``;
its labels are the engine version, the container image and the tool version
(ours: ``specdec_launcher.tool_version``; specdec_bench: its version or sha).
Consecutive valid runs of a series are compared with
launcher.compare.diff.judge_point (Average_AL: the paired per-request interval
beyond the threshold; Output TPS: against the repeats, or the wide single-run
threshold): a regression is marked at the run where it begins, and the runs that
stay at the new level are not flagged again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from launcher.compare.diff import NOISE, judge_point
from launcher.contracts.compare_thresholds import COMPARE_DEFAULTS, CompareThresholds
from launcher.contracts.run_identity import RunIdentity
from launcher.results.identity import configuration_label, configuration_labels, identity, tag
from launcher.results.job_dir import Job, Point, ResultsError, load_job
from launcher.results.layout import EXTENSION_KEY
from launcher.results.repeats import record


@dataclass
class Run:
    where: str                    # the run's place in the source (key prefix or folder)
    job: Job
    point: Point
    time: Optional[datetime]
    key: tuple                    # (model, draft, method, k, forced, dataset, T, C)
    identity: RunIdentity         # launcher.results.identity: its server configuration keeps series apart
    engine_version: str
    image: str
    tool: str
    origin: str                   # "specdec_launcher" or "specdec_bench"
    al: Optional[float]
    tps: Optional[float]
    al_ci: Optional[tuple] = None   # the 95% interval over the repeats, when there are repeats
    tps_ci: Optional[tuple] = None
    n: int = 1
    verdict: Optional[str] = None   # against the previous run of its series (None: the first)
    al_flag: Optional[str] = None   # "regression" / "improvement" on Average_AL alone
    tps_flag: Optional[str] = None  # ... on Output TPS alone
    al_rel: Optional[float] = None
    tps_rel: Optional[float] = None
    why: str = ""

    @property
    def stamp(self) -> str:
        return self.time.strftime("%Y-%m-%d %H:%M") if self.time else "?"

    @property
    def iso(self) -> str:
        return self.time.isoformat() if self.time else ""


@dataclass
class Series:
    key: tuple
    runs: list[Run] = field(default_factory=list)
    fingerprint: str = ""         # the server configuration's (launcher.contracts.run_identity): never two in a series
    configuration: str = ""       # what it changes from the other configurations of its model, draft and method

    @property
    def label(self) -> str:
        model, draft, method, k, forced, ds, t, c = self.key
        return f"{short(model)} · {short(draft)} · {method} k={k}" + (f" · {forced}" if forced else "") \
            + f" · {ds} T={t:g} C={c}" + tag(self.configuration)

    @property
    def regressions(self) -> list[Run]:
        return [r for r in self.runs if r.verdict == "regression"]


def short(name) -> str:
    return str(name).rstrip("/").rsplit("/", 1)[-1] if name else "none"


def _time(text) -> Optional[datetime]:
    if not text:
        return None
    try:
        t = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _ci(doc, name: str) -> tuple[Optional[tuple], int]:
    s = record.figure(doc, name)
    if s is None or s.n < 2 or s.lo is None:
        return None, 1 if s is None else s.n
    return (s.lo, s.hi), s.n


def read_run(where: str, folder: Path) -> Optional[Run]:
    """One run folder as a Run; None when it holds no point."""
    job = load_job(folder)
    if len(job.points) != 1:
        return None
    p = job.points[0]
    ident = identity(job, p)
    ext = (p.configuration or {}).get(EXTENSION_KEY) or {}
    # ours: the dataset the benchmark recorded (its run arguments leave a dataset's path null when
    # the job spec named it); specdec_bench's: inferred from its arguments by launcher.results
    dataset = str(ext.get("dataset") or p.dataset)
    doc = record.read(p.path)
    al_ci, n = _ci(doc, "Average_AL")
    tps_ci, n2 = _ci(doc, "Output TPS")
    return Run(where=where, job=job, point=p, time=_time(ident.timestamp),
               key=(ident.model, ident.draft, ident.method, ident.k, ident.forced, dataset, float(p.temperature),
                    int(p.concurrency)), identity=ident.run,
               engine_version=ident.engine_version, image=ident.image, tool=ident.tool, origin=ident.origin,
               al=p.average_al, tps=p.output_tps, al_ci=al_ci, tps_ci=tps_ci, n=max(n, n2))


@dataclass
class History:
    series: list[Series]
    left_out: list[tuple[str, str]]   # (where, why) of runs not in any series


def build_history(runs: list[tuple[str, Path]], th: Optional[CompareThresholds] = None) -> History:
    th = th or COMPARE_DEFAULTS
    by_key: dict[tuple, Series] = {}
    left_out: list[tuple[str, str]] = []
    for where, folder in runs:
        try:
            run = read_run(where, folder)
        except (ResultsError, OSError, ValueError, TypeError) as e:
            left_out.append((where, f"cannot be read ({e})"))
            continue
        if run is None:
            left_out.append((where, "holds no point"))
        elif run.time is None:
            left_out.append((where, "configuration.json has no timestamp"))
        elif not run.point.ok:
            left_out.append((where, "not a valid point: " + "; ".join(run.point.problems or [run.point.status])))
        else:
            by_key.setdefault((run.key, run.identity.fingerprint),
                              Series(run.key, fingerprint=run.identity.fingerprint)).runs.append(run)
    labels = configuration_labels(s.runs[-1].identity for s in by_key.values())
    for s in by_key.values():
        s.configuration = configuration_label(s.runs[-1].identity, labels)
        s.runs.sort(key=lambda r: (r.time, r.where))
        for prev, cur in zip(s.runs, s.runs[1:]):
            d = judge_point(s.label, prev.point, cur.point, th, cur.job)
            cur.verdict, cur.al_rel, cur.tps_rel = d.verdict, d.al_rel, d.tps_rel
            cur.al_flag, cur.tps_flag = d.al_flag, d.tps_flag
            cur.why = d.describe().split(": ", 1)[-1] if d.verdict != NOISE else ""
    ordered = sorted(by_key.values(), key=lambda s: (tuple(str(x) for x in s.key), s.configuration, s.fingerprint))
    return History(series=ordered, left_out=left_out)
