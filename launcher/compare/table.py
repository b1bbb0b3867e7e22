"""Print a comparison as a rich table plus one line per flagged point."""
from __future__ import annotations

import sys
from typing import TextIO

from launcher.compare.diff import IMPROVEMENT, MISSING, REGRESSION, PointDiff, Thresholds

_STYLE = {REGRESSION: "bold red", IMPROVEMENT: "green", MISSING: "yellow", "ok": "dim"}


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


def render(diffs: list[PointDiff], a_name: str, b_name: str, th: Thresholds, file: TextIO | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    out = file or sys.stdout
    console = Console(file=out, width=None if out.isatty() else 170, highlight=False)
    table = Table(title=f"A = {a_name}\nB = {b_name}\n(thresholds: AL {th.al:.1%}, TPS {th.tps:.1%})")
    # speedup over each run's matched baseline: only when a run has one (sweep.baseline=true)
    speedup = any(d.speedup_a is not None or d.speedup_b is not None or d.gate for d in diffs)
    for col in ("job", "point", "AL A", "AL B", "ΔAL", "paired ΔRequest_AL [95% CI]", "TPS A", "TPS B", "ΔTPS",
                *(("speedup A", "speedup B", "Δspeedup") if speedup else ()), "verdict", "notes"):
        table.add_column(col, justify="left" if col in ("job", "point", "verdict", "notes") else "right")
    for d in diffs:
        a, b = d.a, d.b
        tps_a = None if a is None else (a.output_tps_per_gpu if d.tps_key.endswith("gpu") else a.output_tps)
        tps_b = None if b is None else (b.output_tps_per_gpu if d.tps_key.endswith("gpu") else b.output_tps)
        table.add_row(
            d.job, d.dir,
            _n(a and a.average_al, "{:.3f}"), _n(b and b.average_al, "{:.3f}"), _pct(d.al_rel, d.al_flag), _ci(d),
            _n(tps_a, "{:.1f}"), _n(tps_b, "{:.1f}"), _pct(d.tps_rel, d.tps_flag),
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
    for d in miss:
        print(f"MISSING {d.describe()}", file=out)
    rc = 1 if regs or (miss and not allow_missing) else 0
    compared = len(diffs) - len(miss)
    print(f"{compared} point(s) compared: {len(regs)} regression(s), "
          f"{sum(d.verdict == IMPROVEMENT for d in diffs)} improvement(s), {len(miss)} missing"
          f"{' (allowed)' if miss and allow_missing else ''} -> exit {rc}", file=out)
    return rc
