"""Match two runs' jobs and points and judge each point's differences.

A point is flagged on Average_AL only when the paired per-request interval
(Request_AL, matched by question id) excludes zero AND the relative change is
beyond ``al_threshold``; Output TPS has no per-request pairing, so it is
flagged on ``tps_threshold`` alone. B worse than A is a regression.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from launcher.speedup.stats import Paired, paired_interval
from launcher.results.job_dir import Job, Point

REGRESSION, IMPROVEMENT, NOISE, MISSING = "regression", "improvement", "ok", "missing"


@dataclass
class PointDiff:
    job: str
    dir: str
    verdict: str = NOISE
    a: Point | None = None
    b: Point | None = None
    paired: Paired | None = None
    al_rel: float | None = None
    tps_rel: float | None = None
    tps_key: str = "Output TPS"
    al_flag: str | None = None
    tps_flag: str | None = None
    speedup_a: float | None = None   # throughput speedup over each run's matched baseline
    speedup_b: float | None = None
    speedup_rel: float | None = None
    speedup_flag: str | None = None
    gate: str | None = None          # why B fails bench.gates.min_speedup
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """One line naming the point and why it was flagged."""
        if self.verdict == MISSING:
            return f"{self.dir} [job {self.job}]: " + "; ".join(self.notes)
        parts = []
        if self.al_flag:
            ci = (f", paired Δ {self.paired.mean_diff:+.3f} [{self.paired.lo:+.3f}, {self.paired.hi:+.3f}] n={self.paired.n}"
                  if self.paired and self.paired.has_interval else "")
            parts.append(f"Average_AL {self.al_rel:+.1%}{ci}")
        if self.tps_flag:
            parts.append(f"{self.tps_key} {self.tps_rel:+.1%}")
        if self.speedup_flag:
            parts.append(f"speedup {self.speedup_a:.2f}x -> {self.speedup_b:.2f}x ({self.speedup_rel:+.1%})")
        if self.gate:
            parts.append(self.gate)
        return f"{self.dir} [job {self.job}]: " + ", ".join(parts)


@dataclass
class Thresholds:
    al: float = 0.02
    tps: float = 0.05
    min_speedup: dict = field(default_factory=dict)  # dataset -> least throughput speedup of B


def pair_jobs(jobs_a: list[Job], jobs_b: list[Job]) -> tuple[list[tuple[str, Job, Job]], list[Job], list[Job]]:
    """(label, job A, job B) pairs, then the jobs only in A and only in B.
    One job on each side: paired whatever their names; otherwise by name (server_id)."""
    if len(jobs_a) == 1 and len(jobs_b) == 1:
        a, b = jobs_a[0], jobs_b[0]
        return [(a.name if a.name == b.name else f"{a.name} vs {b.name}", a, b)], [], []
    by_b = {j.name: j for j in jobs_b}
    pairs = [(j.name, j, by_b[j.name]) for j in jobs_a if j.name in by_b]
    names_a = {j.name for j in jobs_a}
    return pairs, [j for j in jobs_a if j.name not in by_b], [j for j in jobs_b if j.name not in names_a]


def _rel(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return (b - a) / a


def _flag(rel: float | None, threshold: float) -> str | None:
    if rel is None or abs(rel) <= threshold:
        return None
    return IMPROVEMENT if rel > 0 else REGRESSION


def judge_point(job: str, a: Point, b: Point, th: Thresholds) -> PointDiff:
    d = PointDiff(job=job, dir=a.dir, a=a, b=b)
    ra, rb = a.request_al, b.request_al
    common = sorted(set(ra) & set(rb))
    d.paired = paired_interval([ra[q] for q in common], [rb[q] for q in common])
    if len(common) < max(len(ra), len(rb)):
        d.notes.append(f"{len(common)} of {max(len(ra), len(rb))} requests paired")
    if d.paired and d.paired.has_interval:
        d.al_rel = _rel(d.paired.mean_a, d.paired.mean_a + d.paired.mean_diff)
        if d.paired.excludes_zero:
            d.al_flag = _flag(d.al_rel, th.al)
    else:
        # Nothing to build an interval from (no Request_AL, or one request): threshold alone.
        d.al_rel = _rel(a.average_al, b.average_al)
        d.al_flag = _flag(d.al_rel, th.al)
        d.notes.append("AL: no paired interval, threshold only")
    gpus_a, gpus_b = (p.num_gpus for p in (a, b))
    if gpus_a and gpus_b and gpus_a != gpus_b:
        d.tps_key = "Output TPS/gpu"
        d.tps_rel = _rel(a.output_tps_per_gpu, b.output_tps_per_gpu)
        d.notes.append(f"GPUs differ ({gpus_a} vs {gpus_b}): TPS per GPU compared")
    else:
        d.tps_rel = _rel(a.output_tps, b.output_tps)
    d.tps_flag = _flag(d.tps_rel, th.tps)
    _judge_speedup(d, a, b, th)
    flags = {d.al_flag, d.tps_flag, d.speedup_flag, REGRESSION if d.gate else None}
    d.verdict = REGRESSION if REGRESSION in flags else IMPROVEMENT if IMPROVEMENT in flags else NOISE
    return d


def _judge_speedup(d: PointDiff, a: Point, b: Point, th: Thresholds) -> None:
    """Speedup over each run's matched baseline (speedup.json): the delta is
    flagged beyond the TPS threshold; B below bench.gates.min_speedup fails."""
    from launcher.speedup.collect import read_speedup

    sa, sb = ((read_speedup(p) or {}).get("speedup", {}).get("throughput") for p in (a, b))
    d.speedup_a, d.speedup_b = sa, sb
    d.speedup_rel = _rel(sa, sb)
    d.speedup_flag = _flag(d.speedup_rel, th.tps)
    gate = th.min_speedup.get(b.dataset)
    sc = (b.configuration or {}).get("speculative_config") or {}
    speculative = sb is not None or (bool(sc) and sc.get("method") != "none")
    if gate is not None and speculative:
        if sb is None:
            d.gate = f"no throughput speedup for B (no speedup.json; gate min_speedup.{b.dataset}={gate})"
        elif sb < gate:
            d.gate = f"speedup {sb:.2f}x below the gate min_speedup.{b.dataset}={gate}"


def _missing(job: str, rel_dir: str, a: Point | None, b: Point | None, why: str) -> PointDiff:
    return PointDiff(job=job, dir=rel_dir, verdict=MISSING, a=a, b=b, notes=[why])


def _state(p: Point | None) -> str:
    if p is None:
        return "absent"
    return p.status if not p.ok else "complete"


def compare_jobs(label: str, ja: Job, jb: Job, th: Thresholds) -> list[PointDiff]:
    pa, pb = {p.dir: p for p in ja.points}, {p.dir: p for p in jb.points}
    order = [p.dir for p in ja.points] + [d for d in (p.dir for p in jb.points) if d not in pa]
    out = []
    for rel_dir in order:
        a, b = pa.get(rel_dir), pb.get(rel_dir)
        if a is not None and b is not None and a.ok and b.ok:
            out.append(judge_point(label, a, b, th))
        else:
            out.append(_missing(label, rel_dir, a, b, f"A {_state(a)}, B {_state(b)}"))
    return out


def compare_runs(jobs_a: list[Job], jobs_b: list[Job], th: Thresholds) -> list[PointDiff]:
    pairs, only_a, only_b = pair_jobs(jobs_a, jobs_b)
    out: list[PointDiff] = []
    for label, ja, jb in pairs:
        out += compare_jobs(label, ja, jb, th)
    for side, jobs in (("A", only_a), ("B", only_b)):
        for j in jobs:
            out.append(_missing(j.name, "*", None, None, f"job only in {side} ({len(j.points)} points)"))
    return out
