"""The sweep-level table printed at the end of a benchmark."""
from __future__ import annotations

import sys


def _f(v, fmt="{:.2f}"):
    return "-" if v is None else fmt.format(v)


def print_table(summary: dict, file=None) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{summary.get('server_id') or summary.get('model')}: wall {_f(summary.get('wall_time_s'), '{:.1f}')} s, "
                    f"server start {_f(summary.get('server_startup_s'), '{:.1f}')} s")
    for col in ("point", "status", "Average_AL", "Server_AL", "Output TPS", "TTFT p50 ms", "decode tok/s",
                "failed", "bench s"):
        t.add_column(col, justify="left" if col in ("point", "status") else "right")
    for p in summary.get("points", []):
        status = {"complete": "[green]complete[/]", "failed": "[red]failed[/]"}.get(p["status"], p["status"])
        t.add_row(p["dir"], status, _f(p.get("Average_AL"), "{:.3f}"), _f(p.get("Server_AL"), "{:.3f}"),
                  _f(p.get("Output TPS"), "{:.1f}"), _f(p.get("TTFT p50 ms"), "{:.1f}"),
                  _f(p.get("Decode tok/s p50"), "{:.1f}"), str(p.get("failed_requests", 0)),
                  _f(p.get("benchmark_duration_s"), "{:.2f}"))
    Console(file=file or sys.stdout, width=140).print(t)
    for p in summary.get("points", []):
        if p["status"] == "failed":
            print(f"FAILED {p['dir']}: {p['reason']}", file=file or sys.stdout)
