"""What a waited-for launcher run ends with: the results tables and verdicts of every
job, then the HTML report built and its path.

    python -m launcher.report.end_of_run RESULTS_DIR [--no-report]

The launcher runs it in its own process once every job has ended (its login side
imports no reader of results); it prints to stdout and never fails the run: a
folder it cannot read is one line.
"""
from __future__ import annotations

import argparse
import sys

from rich.console import Console

from launcher.report.console import print_results
from launcher.results.job_dir import ResultsError, load_results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m launcher.report.end_of_run",
                                 description="Results tables, verdicts and the HTML report of a finished run.")
    ap.add_argument("results_dir")
    ap.add_argument("--no-report", action="store_true", help="print the tables only (the launcher's report=false)")
    args = ap.parse_args(argv)

    console = Console(highlight=False)
    try:
        jobs = load_results(args.results_dir)
    except (ResultsError, OSError) as e:
        console.print(f"no results to show: {e}", markup=False)
        return 0
    print_results(jobs, console)
    if args.no_report:
        console.print("report: not built (report=false)", markup=False)
        return 0
    from launcher.report.build import build_report  # lazy: matplotlib (~0.3 s), report=true only
    try:
        index = build_report(args.results_dir)
    except (ResultsError, OSError, ValueError) as e:
        console.print(f"report: not built ({e})", markup=False)
        return 0
    console.print(f"report: {index.resolve()}", markup=False, soft_wrap=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
