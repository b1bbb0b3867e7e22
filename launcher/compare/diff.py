"""Match two runs' points and judge each point's differences (docs/repeats.md).

Points are matched by what they measured (launcher.compare.match). A point is
flagged on Average_AL only when the paired per-request interval (Request_AL,
matched by question id) excludes zero AND the relative change is beyond
``al_threshold``. Output TPS (and the speedup over a matched baseline) are judged
against the repeats (``sweep.repeats``, the point's repeats.json): flagged only
when the change of the means exceeds ``tps_threshold`` AND the 95% interval of
the difference (Welch's, widened by the between-run floor) excludes zero. With
one repeat on a side the noise is unknown: the change is flagged only beyond
``single_run_tps`` (wide), and the point says so. A point at a temperature the
known-answer probe marked "engine defect suspected" is SUSPECT: shown, never a
regression or an improvement. B worse than A is a regression.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from launcher.compare.match import label, match_points, serving_difference
from launcher.contracts.compare_thresholds import CompareThresholds
from launcher.results.identity import run_identity
from launcher.results.job_dir import Job, Point
from launcher.results.repeats import record
from launcher.stats.repeats import Difference, difference, summarize, Summary
from launcher.speedup.analysis import read_speedup
from launcher.stats.paired import Paired, paired_interval

REGRESSION, IMPROVEMENT, NOISE, MISSING, SUSPECT = "regression", "improvement", "ok", "missing", "suspect"


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
    tps_a: Summary | None = None     # Output TPS over each side's repeats (n=1: the one figure)
    tps_b: Summary | None = None
    tps_diff: Difference | None = None
    tps_judged: bool = False         # both sides had >= 2 repeats: judged against the noise
    suspect: str | None = None       # the known-answer probe's warning for this temperature
    notes: list[str] = field(default_factory=list)
    serving: str | None = None       # what B's server sets differently from A's ("+ --async-scheduling")

    @property
    def where(self) -> str:
        """The point and its pair of jobs, with the server setting that differs between them."""
        return f"{self.dir} [job {self.job}" + (f"; B's server: {self.serving}" if self.serving else "") + "]"

    def describe(self) -> str:
        """One line naming the point and why it was flagged."""
        if self.verdict == MISSING:
            return f"{self.where}: " + "; ".join(n for n in self.notes if n != self.serving_note)
        parts = []
        if self.al_flag:
            ci = (f", paired Δ {self.paired.mean_diff:+.3f} [{self.paired.lo:+.3f}, {self.paired.hi:+.3f}] n={self.paired.n}"
                  if self.paired and self.paired.has_interval else "")
            parts.append(f"Average_AL {self.al_rel:+.1%}{ci}")
        if self.tps_flag:
            ci = (f" [{self.tps_diff.lo / self.tps_a.mean:+.1%}, {self.tps_diff.hi / self.tps_a.mean:+.1%}]"
                  f" n={self.tps_a.n}+{self.tps_b.n}" if self.tps_judged and self.tps_diff and self.tps_a.mean
                  else " (one repeat: beyond the single-run threshold)")
            parts.append(f"{self.tps_key} {self.tps_rel:+.1%}{ci}")
        if self.speedup_flag:
            parts.append(f"speedup {self.speedup_a:.2f}x -> {self.speedup_b:.2f}x ({self.speedup_rel:+.1%})")
        if self.gate:
            parts.append(self.gate)
        if self.verdict == SUSPECT:
            parts.append(self.suspect or "engine defect suspected")
        return f"{self.where}: " + ", ".join(parts)

    @property
    def serving_note(self) -> str | None:
        return f"B's server: {self.serving}" if self.serving else None


def _rel(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return (b - a) / a


def _flag(rel: float | None, threshold: float) -> str | None:
    if rel is None or abs(rel) <= threshold:
        return None
    return IMPROVEMENT if rel > 0 else REGRESSION


def judge_point(job: str, a: Point, b: Point, th: CompareThresholds, job_b: Job | None = None) -> PointDiff:
    """A and B's point judged: AL, TPS and the speedup over each side's baseline. ``job_b`` (B's
    job) tells whether B is speculative, for the min_speedup gate (launcher.results.identity);
    without it, B is speculative when it has a speedup.json."""
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
    per_gpu = bool(gpus_a and gpus_b and gpus_a != gpus_b)
    if per_gpu:
        d.tps_key = "Output TPS/gpu"
        d.notes.append(f"GPUs differ ({gpus_a} vs {gpus_b}): TPS per GPU compared")
    d.tps_a, d.tps_b = tps_summary(a, per_gpu), tps_summary(b, per_gpu)
    d.tps_rel, d.tps_flag, d.tps_diff, d.tps_judged = judge_figure(d.tps_a, d.tps_b, th)
    for side, rep in (("A", d.tps_a), ("B", d.tps_b)):
        if rep is not None and rep.noisy:
            d.notes.append(f"{side} noisy (TPS rel. MAD {rep.rel_mad:.0%})")
    _judge_speedup(d, a, b, th, run_identity(job_b, b).method != "none" if job_b is not None else None)
    warning = b.row.engine_warning or a.row.engine_warning
    flags = {d.al_flag, d.tps_flag, d.speedup_flag, REGRESSION if d.gate else None}
    if warning:
        d.suspect = warning
        d.verdict = SUSPECT
        return d
    d.verdict = REGRESSION if REGRESSION in flags else IMPROVEMENT if IMPROVEMENT in flags else NOISE
    return d


def tps_summary(p: Point, per_gpu: bool = False) -> Summary | None:
    """Output TPS over the point's repeats (repeats.json), else its one figure as n=1."""
    doc = record.read(p.path)
    s = record.figure(doc, "Output TPS")
    if s is None:
        v = p.output_tps_per_gpu if per_gpu else p.output_tps
        return summarize([v])
    if per_gpu and p.num_gpus:
        g = float(p.num_gpus)
        s = Summary(s.n, s.mean / g, None if s.sd is None else s.sd / g, None if s.lo is None else s.lo / g,
                    None if s.hi is None else s.hi / g, s.median / g, s.mad / g, s.rel_mad, s.noisy, s.worst_rel_dev)
    return s


def judge_figure(a: Summary | None, b: Summary | None, th: CompareThresholds):
    """(relative change, flag, difference, judged against the noise) of a throughput-like
    figure: with >= 2 repeats a side, flagged beyond the threshold AND the interval;
    otherwise beyond the single-run threshold only."""
    if a is None or b is None or not a.mean:
        return None, None, None, False
    diff = difference(a, b, th.run_floor)
    if diff.has_interval:
        flag = _flag(diff.rel, th.tps) if diff.excludes_zero else None
        return diff.rel, flag, diff, True
    return diff.rel, _flag(diff.rel, th.single_run_tps), diff, False


def _judge_speedup(d: PointDiff, a: Point, b: Point, th: CompareThresholds,
                   speculative: bool | None = None) -> None:
    """Speedup over each run's matched baseline (speedup.json): the delta is
    flagged beyond the TPS threshold; B below bench.gates.min_speedup fails."""

    docs = [read_speedup(p) or {} for p in (a, b)]
    sa, sb = (doc.get("speedup", {}).get("throughput") for doc in docs)
    d.speedup_a, d.speedup_b = sa, sb
    reps = [Summary.from_dict(doc.get("throughput_repeats") or {}) if doc.get("throughput_repeats")
            else summarize([v]) for doc, v in zip(docs, (sa, sb))]
    if reps[0] is not None and reps[1] is not None and reps[0].n > 1 and reps[1].n > 1:
        sa, sb = reps[0].mean, reps[1].mean
        d.speedup_a, d.speedup_b = sa, sb
    d.speedup_rel, d.speedup_flag, _, _ = judge_figure(reps[0], reps[1], th)
    gate = th.min_speedup.get(b.dataset)
    if gate is not None and (speculative or sb is not None):
        if sb is None:
            d.gate = f"no throughput speedup for B (no speedup.json; gate min_speedup.{b.dataset}={gate})"
        elif sb < gate:
            d.gate = f"speedup {sb:.2f}x below the gate min_speedup.{b.dataset}={gate}"


def _missing(job: str, rel_dir: str, a: Point | None, b: Point | None, why: str) -> PointDiff:
    return PointDiff(job=job, dir=rel_dir, verdict=MISSING, a=a, b=b, notes=[why])


def _state(p: Point | None) -> str:
    """A side's point in words: "complete", "absent", or what keeps it from being compared
    (its status and reason, or the validity rule's problems: "invalid (no timing.json)")."""
    if p is None:
        return "absent"
    if p.ok:
        return "complete"
    why = "; ".join(p.problems) or (p.reason or "")
    if p.status in ("complete", "skipped"):
        return f"invalid ({why or 'no acceptance figures'})"
    return f"{p.status} ({why})" if why else p.status


def _sides(a: Point | None, b: Point | None) -> str:
    """Both sides' states, once when they are the same: "A and B invalid (timing.json missing)"."""
    sa, sb = _state(a), _state(b)
    return f"A and B {sa}" if sa == sb else f"A {sa}, B {sb}"


def compare_runs(jobs_a: list[Job], jobs_b: list[Job], th: CompareThresholds) -> list[PointDiff]:
    """Every matched pair judged; points on one side only (or not complete on both) missing."""

    pairs, only_a, only_b = match_points(jobs_a, jobs_b)
    out: list[PointDiff] = []
    for ja, a, jb, b, note in pairs:
        name = label(ja, jb)
        if a.ok and b.ok:
            d = judge_point(name, a, b, th, jb)
            if b.dir != a.dir:
                d.dir = f"{a.dir} ~ {b.dir}"
        else:
            d = _missing(name, a.dir if a.dir == b.dir else f"{a.dir} ~ {b.dir}", a, b, _sides(a, b))
        if note:
            d.notes.append(note)
        d.serving = serving_difference(ja, a, jb, b)
        if d.serving:  # an A/B of a server setting: the pair's line says which
            d.notes.append(d.serving_note)
        out.append(d)
    for side, left, jobs in (("A", only_a, jobs_a), ("B", only_b, jobs_b)):
        for j in jobs:
            mine = [p for jj, p in left if jj is j]
            if not mine:
                continue
            if len(mine) == len(j.points):
                out.append(_missing(j.name, "*", None, None, f"job only in {side} ({len(j.points)} points)"))
                continue
            for p in mine:
                a, b = (p, None) if side == "A" else (None, p)
                out.append(_missing(j.name, p.dir, a, b, _sides(a, b)))
    return out
