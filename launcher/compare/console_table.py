"""Print a comparison as a rich table plus one line per flagged point."""
from __future__ import annotations

import sys
from typing import TextIO

from rich.console import Console
from rich.table import Table

from launcher.compare.diff import IMPROVEMENT, MISSING, REGRESSION, SUSPECT, PointDiff
from launcher.contracts.compare_thresholds import CompareThresholds

_STYLE = {REGRESSION: "bold red", IMPROVEMENT: "green", MISSING: "yellow", SUSPECT: "magenta", "ok": "dim"}


def _n(v: float | None, fmt: str) -> str:
    return "–" if v is None else fmt.format(v)


def _pct(v: float | None, flag: str | None) -> str:
    s = _n(v, "{:+.1%}")
    return f"[{_STYLE[flag]}]{s}[/]" if flag else s


def _ci(d: PointDiff) -> str:
    p = d.paired
    if p is None:
        return "–"
    if not p.has_interval:
        return f"{p.mean_diff:+.3f} (n={p.n})"
    return f"{p.mean_diff:+.3f} [{p.lo:+.3f}, {p.hi:+.3f}] n={p.n}"


def _tps(s, fallback) -> str:
    """A side's Output TPS: the mean ± the 95% half-width over its repeats, or the one figure (n=1)."""
    if s is None or s.n < 2 or s.hi is None:
        return _n(fallback if s is None else s.mean, "{:.1f}") + ("" if s is None else " (n=1)")
    return f"{s.mean:.1f} ±{(s.hi - s.lo) / 2:.1f} (n={s.n}){' noisy' if s.noisy else ''}"


def _dtps(d: PointDiff) -> str:
    s = _pct(d.tps_rel, d.tps_flag)
    if d.tps_judged and d.tps_diff is not None and d.tps_a is not None and d.tps_a.mean:
        s += f" [{d.tps_diff.lo / d.tps_a.mean:+.1%}, {d.tps_diff.hi / d.tps_a.mean:+.1%}]"
    return s


def render(diffs: list[PointDiff], a_name: str, b_name: str, th: CompareThresholds,
           file: TextIO | None = None) -> None:
    out = file or sys.stdout
    console = Console(file=out, width=None if out.isatty() else 170, highlight=False)
    table = Table(title=f"A = {a_name}\nB = {b_name}\n(thresholds: AL {th.al:.1%}, TPS {th.tps:.1%} and beyond "
                        f"the 95% interval over the repeats (between-run floor {th.run_floor:.0%}); "
                        f"with one repeat TPS {th.single_run_tps:.0%})")
    # speedup over each run's matched baseline: only when a run has one (sweep.baseline=true)
    speedup = any(d.speedup_a is not None or d.speedup_b is not None or d.gate for d in diffs)
    for col in ("job", "point", "AL A", "AL B", "ΔAL", "paired ΔRequest_AL [95% CI]", "TPS A", "TPS B", "ΔTPS [95% CI]",
                *(("speedup A", "speedup B", "Δspeedup") if speedup else ()), "verdict", "notes"):
        table.add_column(col, justify="left" if col in ("job", "point", "verdict", "notes") else "right")
    for d in diffs:
        a, b = d.a, d.b
        tps_a = None if a is None else (a.output_tps_per_gpu if d.tps_key.endswith("gpu") else a.output_tps)
        tps_b = None if b is None else (b.output_tps_per_gpu if d.tps_key.endswith("gpu") else b.output_tps)
        table.add_row(
            d.job, d.dir,
            _n(a and a.average_al, "{:.3f}"), _n(b and b.average_al, "{:.3f}"), _pct(d.al_rel, d.al_flag), _ci(d),
            _tps(d.tps_a, tps_a), _tps(d.tps_b, tps_b), _dtps(d),
            *((_n(d.speedup_a, "{:.2f}x"), _n(d.speedup_b, "{:.2f}x"),
               _pct(d.speedup_rel, d.speedup_flag or (REGRESSION if d.gate else None))) if speedup else ()),
            f"[{_STYLE[d.verdict]}]{d.verdict}[/]", "; ".join(d.notes + ([d.gate] if d.gate else [])))
    console.print(table)


def print_verdict(diffs: list[PointDiff], allow_missing: bool, file: TextIO | None = None) -> int:
    """Print the flagged points and return the exit code (0 fine, 1 regression or missing)."""
    out = file or sys.stdout
    regs = [d for d in diffs if d.verdict == REGRESSION]
    miss = [d for d in diffs if d.verdict == MISSING]
    for d in regs:
        print(f"REGRESSION {d.describe()}", file=out)
    for d in diffs:
        if d.verdict == IMPROVEMENT:
            print(f"improvement {d.describe()}", file=out)
    for d in diffs:
        if d.verdict == SUSPECT:
            print(f"SUSPECT {d.describe()} (not judged)", file=out)
    for d in miss:
        print(f"MISSING {d.describe()}", file=out)
    single = sum(1 for d in diffs if d.verdict != MISSING and d.tps_a is not None and d.tps_b is not None
                 and not d.tps_judged)
    if single:
        print(f"{single} point(s) with one repeat on a side: throughput cannot be judged against the noise "
              "(sweep.repeats=3 gives an interval); flagged only beyond the single-run threshold", file=out)
    rc = 1 if regs or (miss and not allow_missing) else 0
    compared = len(diffs) - len(miss)
    print(f"{compared} point(s) compared: {len(regs)} regression(s), "
          f"{sum(d.verdict == IMPROVEMENT for d in diffs)} improvement(s), "
          f"{sum(d.verdict == SUSPECT for d in diffs)} suspect, {len(miss)} missing"
          f"{' (allowed)' if miss and allow_missing else ''} -> exit {rc}", file=out)
    return rc
