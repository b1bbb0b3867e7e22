"""The answer on screen: one results table per job (rich) and the job's verdicts, one line each.

What a waited-for run ends with (launcher.report.end_of_run): per point the
dataset, T, C, Average_AL, Server_AL, Output TPS (mean ± the 95% half-interval
with repeats), the throughput speedup over the matched baseline where one ran, and
where the speedup analysis split it (launcher.speedup.why) the step cost it implies (speedup =
Server_AL / step cost, ± the 95% half-interval over repeats) and the causes, one word each
with a legend; the marks of launcher.report.marks (! suspect, D known defect, † few
samples, ~ noisy) or
FAILED with the reason; then the known answer, lossless, golden, forced and
disagg-parity verdicts. The tables fold long cells instead of cutting them, so
an 80-column terminal shows every figure.
"""
from __future__ import annotations

from typing import Optional

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from launcher.engines.known_defects import names_known_defect
from launcher.report.marks import FEW, IMPOSSIBLE, KNOWN_DEFECT, NOISY, SUSPECT, WORDS as MARKS_WORDS, point_marks

FORCED = "F"  # the point's acceptance was forced; its level is in the legend
from launcher.results.disagg_parity import read_parity
from launcher.results.identity import (configuration_label, describe, folder_labels, forced, identity,
                                       run_identity, tag)
from launcher.results.job_dir import Job, Point
from launcher.results.job_result import known_answer_line
from launcher.speedup.causes import legend as cause_legend, words as cause_words
from launcher.speedup.analysis import read_speedup

MARK_WORDS = {**MARKS_WORDS,  # the marks' own words (launcher.report.marks), and the console's two more
              "n": "n=N: Output TPS is the mean ± the 95% half-interval over N repeats (repeats.json)",
              FORCED: f"{FORCED} forced acceptance ({{levels}}, the engine's own mechanism): Average_AL is set by "
                      "the server, not earned by the draft"}
MARK_SEP = " "  # between two marks of one cell: each stands apart
UNLIKE_WORDS = "unlike here: the speculative server's settings against its baseline's: "
STEP_COST_WORDS = ("step cost: what one speculative step cost in baseline steps, Server_AL / speedup "
                   "(± the 95% half-interval over repeats); cause: why, one word each (docs/speedup.md):")


def _n(v: Optional[float], fmt: str) -> str:
    return "–" if v is None else fmt.format(v)


def _speedup(p: Point) -> Optional[float]:

    doc = read_speedup(p) or {}
    v = (doc.get("speedup") or {}).get("throughput")
    return float(v) if isinstance(v, (int, float)) else None


def _why(p: Point) -> Optional[dict]:
    """The point's decomposition and causes (speedup.json, launcher.speedup.why), or None."""
    doc = read_speedup(p) or {}
    return doc if isinstance(doc.get("decomposition"), dict) else None


def _cost(why: Optional[dict]) -> str:
    d = (why or {}).get("decomposition")
    if not d:
        return "–"
    return f"{d['step_cost']:.2f}" + (f"±{(d['hi'] - d['lo']) / 2:.2f}" if d.get("lo") is not None else "")


def _tps(p: Point, marks) -> str:
    if marks.tps is not None and marks.tps.lo is not None:  # the repeats' count is in the marks column
        return f"{marks.tps.mean:.1f}±{(marks.tps.hi - marks.tps.lo) / 2:.1f}"
    return _n(p.output_tps, "{:.1f}")


def _mark_cell(job: Job, p: Point, marks) -> Text:
    if not p.ok:  # the reason is printed under the table, where it has the whole width
        return Text("FAILED" if p.status != "complete" else "invalid", style="red")
    parts = [(m, "red" if m == IMPOSSIBLE else "magenta" if m in (SUSPECT, KNOWN_DEFECT) else "yellow")
             for m in marks.listed]
    if marks.tps is not None:
        parts.append((f"n={marks.tps.n}", "dim"))
    if forced(job, p):
        parts.append((FORCED, "cyan"))
    cell = Text()
    for i, (word, style) in enumerate(parts):  # each mark stands apart: "† ~ !", "n=3 F", never "†~!" or "n=3F"
        cell.append((MARK_SEP if i else "") + word, style=style)
    return cell


def job_title(job: Job, configuration: str = "") -> str:
    """The job in one line, from its first point's identity (launcher.results.identity);
    ``configuration``: what its server changes from the others of the folder ("+ --async-scheduling")."""
    if not job.points:
        return f"job {job.name}" + tag(configuration)
    i = identity(job, job.points[0])
    short = lambda x: str(x).rstrip("/").rsplit("/", 1)[-1]  # noqa: E731
    return f"job {job.name}: {short(i.model)}, {describe(i)}" + (
        f" · engine {i.engine_version}" if i.engine_version != "?" else "") + tag(configuration)


def results_table(job: Job, configuration: str = "") -> tuple[Table, set[str]]:
    """The job's points as a table, and the marks it used (for the legend)."""
    speedups = {p.dir: _speedup(p) for p in job.points}
    with_speedup = any(v is not None for v in speedups.values())
    t = Table(title=job_title(job, configuration), title_justify="left", expand=False, box=box.SIMPLE_HEAD, padding=(0, 1),
              show_edge=False)
    for name in ("dataset", "T", "C", "Average_AL", "Server_AL", "Output TPS", *(("speedup",) if with_speedup else ()),
                 "marks"):  # the figures never fold; a long dataset name or failure reason does
        fig = name not in ("dataset", "marks")
        t.add_column(name, justify="right" if fig else "left", no_wrap=fig, min_width=len(name) if fig else 7,
                     overflow="fold", ratio=None if fig else 1)
    used: set[str] = set()
    for p in job.points:
        mk = point_marks(p)
        if p.ok:
            used.update(mk.listed)
            used.update(["n"] if mk.tps is not None else [])
            used.update([FORCED] if forced(job, p) else [])
        t.add_row(p.dataset, f"{p.temperature:g}", str(p.concurrency), _n(p.average_al, "{:.3f}"),
                  _n(p.server_al, "{:.3f}"), _tps(p, mk),
                  *((_n(speedups[p.dir], "{:.2f}x"),) if with_speedup else ()), _mark_cell(job, p, mk))
    return t, used


def why_table(job: Job) -> tuple[Optional[Table], set[str]]:
    """The results table's second part where the speedup analysis split the speedups
    (launcher.speedup.why): per point the speedup, Server_AL, the step cost they imply and the
    causes, one word each; and the cause words it used (for the legend). None without one."""
    whys = [(p, _why(p)) for p in job.points if p.ok]
    whys = [(p, w) for p, w in whys if w]
    if not whys:
        return None, set()
    t = Table(title="why: speedup = Server_AL / step cost", title_justify="left", expand=False,
              box=box.SIMPLE_HEAD, padding=(0, 1), show_edge=False)
    for name in ("dataset", "T", "C", "speedup", "Server_AL", "step cost", "cause"):
        fig = name not in ("dataset", "cause")
        t.add_column(name, justify="right" if fig else "left", no_wrap=fig, min_width=len(name) if fig else 7,
                     overflow="fold", ratio=None if fig else 1)
    used: set[str] = set()
    for p, w in whys:
        d, cs = w["decomposition"], w.get("causes") or []
        used.update(c.get("word") for c in cs)
        used.update(f"{UNLIKE_WORDS}{s}" for s in w.get("settings_differ") or [])
        t.add_row(p.dataset, f"{p.temperature:g}", str(p.concurrency), f"{d['speedup']:.2f}x", f"{d['al']:.3f}",
                  _cost(w), cause_words(cs))
    return t, used


def verdict_lines(job: Job) -> list[str]:
    """The job's checks, one line each (only those that ran)."""
    s = job.summary
    out = []
    known = s.get("known_answer")
    if isinstance(known, dict):
        line = known_answer_line(known)
        out.append("known answer: " + line.removeprefix("known-answer ").removeprefix("known-answer probe "))
    lossless = s.get("lossless")
    if isinstance(lossless, dict):
        passed = lossless.get("passed")
        if passed is None:
            out.append(f"lossless: {lossless.get('status') or 'no verdict'}")
        else:
            out.append(f"lossless: {'PASSED' if passed else 'FAILED'}, {lossless.get('matches', '?')} of "
                       f"{lossless.get('prompts', '?')} outputs identical to the target without speculation")
    golden = s.get("golden")
    if isinstance(golden, dict):
        pts = golden.get("points") or []
        bad = [v.get("point") for v in pts if v.get("verdict") == "fail"]
        out.append(f"golden {golden.get('id')}: {str(golden.get('verdict')).upper()} ({len(pts)} point(s) judged"
                   + (f"; failed: {', '.join(map(str, bad))}" if bad else "") + ")")
    levels = forced_levels(job)
    if levels:
        out.append(f"forced: {levels} (the engine's forced acceptance: the AL is set, not the draft's)")
    impossible = [p for p in job.points if p.ok and point_marks(p).impossible]
    if impossible:
        out.append(f"acceptance: IMPOSSIBLE at {len(impossible)} of {len(job.points)} point(s) ("
                   + ", ".join(p.dir for p in impossible[:4]) + ("…" if len(impossible) > 4 else "")
                   + f": {point_marks(impossible[0]).impossible})")
    parity = read_parity(job.path) or s.get("disagg_parity")
    if isinstance(parity, dict):
        checks = parity.get("checks") or {}
        out.append(f"disagg parity: {str(parity.get('verdict')).upper()} ("
                   + ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in checks.items()) + ")")
    return out


def forced_levels(job: Job) -> str:
    """The job's forced levels in words: "forced AL 3.5"."""
    return ", ".join(sorted({forced(job, p) for p in job.points} - {""}))


def print_results(jobs: list[Job], console: Console) -> None:
    """Every job's table, the legend of the marks it used, and its verdict lines; where two
    server configurations share the folder, each title says what its server changes."""
    labels = folder_labels(jobs)
    for job in jobs:
        table, used = results_table(job, configuration_label(run_identity(job), labels))
        console.print(table)
        for sym in (IMPOSSIBLE, SUSPECT, KNOWN_DEFECT, FEW, NOISY, "n", FORCED):
            if sym in used:
                console.print(Text(MARK_WORDS[sym].replace("{levels}", forced_levels(job)), style="dim"))
        why, causes_used = why_table(job)
        if why is not None:
            console.print(why)
            console.print(Text(STEP_COST_WORDS, style="dim"))
            for word, meaning in cause_legend().items():
                if word in causes_used:
                    console.print(Text(f"{word}: {meaning}", style="dim"))
            differ = sorted(u.removeprefix(UNLIKE_WORDS) for u in causes_used if u.startswith(UNLIKE_WORDS))
            if differ:
                console.print(Text(UNLIKE_WORDS + "; ".join(differ)))
        for p in job.points:
            if not p.ok:
                reason = p.reason or ("; ".join(p.problems) if p.problems else p.status)
                word = "FAILED" if p.status != "complete" else "invalid"
                console.print(Text(f"{word} {p.dir}: {reason}", style="red"))
        for p in job.points:
            why = point_marks(p).impossible
            if p.ok and why:
                console.print(Text(f"{IMPOSSIBLE} {p.dir}: impossible acceptance: {why}", style="red"))
        warnings = sorted({str(p.row.engine_warning) for p in job.points if p.row.engine_warning})
        for w in warnings:
            console.print(Text(f"{KNOWN_DEFECT if names_known_defect(w) else SUSPECT} {w}", style="magenta"))
        for line in verdict_lines(job):
            console.print(Text(line, style="red" if "FAIL" in line or "IMPOSSIBLE" in line else None))
        console.print()
