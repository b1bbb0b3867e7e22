"""The sweep-level table printed at the end of a benchmark."""
from __future__ import annotations

import sys

from launcher.engines.forced_acceptance import label
from launcher.golden.text import verdict_line
from launcher.results.summary import point_rows
from launcher.results.validity import thin_sample
from launcher.results.repeats.record import FAILED_OVER_REPEATS_WORDS, failed_over_repeats


def _f(v, fmt="{:.2f}"):
    return "-" if v is None else fmt.format(v)


def timing_cell(value, count, total, fmt: str) -> str:
    """A timing median, or a marked figure when it rests on few samples
    (fewer than 5, or fewer than half the requests): "(12.3 n=2)"."""
    if value is None:
        return "-"
    if thin_sample(count, total):
        return f"({fmt.format(value)} n={count})"
    return fmt.format(value)


def print_table(summary: dict, file=None) -> None:
    from rich.console import Console  # lazy: the node side needs no rich (any engine Python; test_node_spec.py)
    from rich.table import Table  # lazy: as Console above

    out = file or sys.stdout
    t = Table(title=f"{summary.get('server_id') or summary.get('model')}: wall {_f(summary.get('wall_time_s'), '{:.1f}')} s, "
                    f"server start {_f(summary.get('server_startup_s'), '{:.1f}')} s")
    for col in ("point", "status", "Average_AL", "Server_AL", "Output TPS", "TTFT median ms", "decode tok/s",
                "failed", "bench s"):
        t.add_column(col, justify="left" if col in ("point", "status") else "right")
    thin = False
    marks: set[str] = set()
    rows = point_rows(summary)
    for p in rows:
        status = {"complete": "[green]complete[/]", "failed": "[red]failed[/]"}.get(p.status, p.status)
        total = p.num_turns or None
        ttft = p.ttft_median_s
        ttft_cell = timing_cell(None if ttft is None else ttft * 1e3, p.ttft_count, total, "{:.1f}")
        dec_cell = timing_cell(p.decode_tps_median, p.decode_tps_count, total, "{:.1f}")
        thin = thin or ttft_cell.startswith("(") or dec_cell.startswith("(")
        if p.forced_acceptance:
            status += " [yellow]FORCED[/]"
        if p.engine_warning:
            status += " [magenta]! SUSPECT T[/]"
            marks.add("suspect")
        tps_cell, rep = _f(p.output_tps, "{:.1f}"), p.repeats or {}
        if (rep.get("n") or 1) > 1 and rep.get("Output TPS lo") is not None:
            half = (rep["Output TPS hi"] - rep["Output TPS lo"]) / 2
            tps_cell = f"{rep['Output TPS mean']:.1f} ±{half:.1f} (n={rep['n']})" + (" ~noisy" if rep.get("noisy") else "")
            marks.add("repeats")
            if rep.get("noisy"):
                marks.add("noisy")
        failed_cell = failed_over_repeats(rep) or str(p.failed_requests if "failed_requests" in p.held else 0)
        t.add_row(p.dir, status, _f(p.average_al, "{:.3f}"), _f(p.server_al, "{:.3f}"),
                  tps_cell, ttft_cell, dec_cell, failed_cell,
                  _f(p.benchmark_duration_s, "{:.2f}"))
    Console(file=out, width=140).print(t)
    if thin:
        print("(x n=N): a median over N samples only (fewer than 5, or fewer than half the requests); "
              "not a headline figure", file=out)
    if "repeats" in marks:
        print("Output TPS a ± b (n=N): the mean over N repeats and its 95% half-interval (repeats.json); "
              + FAILED_OVER_REPEATS_WORDS
              + ("; ~noisy: relative MAD over the repeats, or one repeat's distance from the median, above bench.gates.noisy_rel_mad" if "noisy" in marks else ""),
              file=out)
    if "suspect" in marks:
        known = sorted({p.engine_warning.split(" (known-answer")[0] for p in rows
                        if str(p.engine_warning or "").startswith("known defect")})
        print("! SUSPECT T: the known-answer probe failed at this temperature ("
              + ("; ".join(known) if known else "engine defect suspected")
              + "); its acceptance figures reflect the engine, not the draft", file=out)
    for p in rows:
        if p.forced_acceptance:
            print(f"FORCED {p.dir}: {label(p.forced_acceptance)} (vLLM synthetic acceptance: "
                  "the AL is set, not the draft's)", file=out)
        if p.per_position_rates:
            print(f"per-position {p.dir}: " + ", ".join(f"{r:.4f}" for r in p.per_position_rates)
                  + " (accepted at position i / drafts)", file=out)
    golden = summary.get("golden")
    if golden:
        for v in golden.get("points") or []:
            print(verdict_line(v), file=out)
        if not golden.get("points"):
            print(f"golden {golden.get('id')}: {golden.get('verdict')} ({'; '.join(golden.get('problems') or [])})",
                  file=out)
    for p in rows:
        if p.status == "failed":
            print(f"FAILED {p.dir}: {p.reason}", file=out)
