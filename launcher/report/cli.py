"""python -m launcher.report RESULTS_DIR [--out DIR]"""
from __future__ import annotations

import argparse
import sys

from launcher.results.job_dir import ResultsError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m launcher.report",
                                 description="Static HTML report (index.html + PNG plots) of benchmark results.")
    ap.add_argument("results_dir", help="a job folder (with summary.json) or a folder of job folders")
    ap.add_argument("--out", help="output folder (default: RESULTS_DIR/report)")
    args = ap.parse_args(argv)
    from launcher.report.build import build_report  # lazy: matplotlib (~0.3 s), not for --help
    try:
        index = build_report(args.results_dir, args.out)
    except ResultsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(index.resolve())
    return 0
