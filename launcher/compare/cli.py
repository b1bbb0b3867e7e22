"""python -m launcher.compare A B [--al-threshold 0.02] [--tps-threshold 0.05]
[--single-run-tps-threshold 0.35] [--run-floor F] [--allow-missing]

Exit codes: 0 no regression (improvements, noise and SUSPECT points), 1 a
regression or a missing point (unless --allow-missing), 2 unusable input.
"""
from __future__ import annotations

import argparse
import sys

from launcher.compare.diff import compare_runs
from launcher.compare.console_table import print_verdict, render
from launcher.contracts.compare_thresholds import COMPARE_DEFAULTS as DEFAULT, CompareThresholds
from launcher.results.job_dir import ResultsError, load_results


def _fraction(s: str) -> float:
    v = float(s)
    if not 0 <= v < 10:
        raise argparse.ArgumentTypeError("a relative threshold such as 0.02 (2%)")
    return v


def recipe_thresholds(jobs) -> CompareThresholds:
    """The candidate's recipe thresholds (job.json's compare_thresholds), as recorded."""
    return CompareThresholds.recorded(job.spec.compare_thresholds for job in jobs if job.spec)


def recipe_threshold(jobs, key: str, default: float) -> float:
    """One of the candidate's recipe thresholds, ``default`` when not recorded."""
    value = getattr(recipe_thresholds(jobs), key)
    return default if value is None else value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m launcher.compare",
        description="Compare two benchmark runs (job folders, or folders of jobs matched by server_id).")
    ap.add_argument("a", help="baseline results (job folder or folder of jobs)")
    ap.add_argument("b", help="candidate results, compared against A")
    ap.add_argument("--al-threshold", type=_fraction, default=None,
                    help="relative Average_AL change that counts (default: B's recipe, "
                         f"bench.gates.compare_al_threshold, else {DEFAULT.al:g})")
    ap.add_argument("--tps-threshold", type=_fraction, default=None,
                    help="relative Output TPS change that counts (default: B's recipe, "
                         f"bench.gates.compare_tps_threshold, else {DEFAULT.tps:g})")
    ap.add_argument("--single-run-tps-threshold", type=_fraction, default=None,
                    help="with one repeat on a side (no noise estimate), the relative Output TPS change that "
                         f"counts (default: B's recipe, bench.gates.compare_single_run_tps_threshold, else "
                         f"{DEFAULT.single_run_tps:g})")
    ap.add_argument("--run-floor", type=_fraction, default=None,
                    help="between-run relative sd of a point's mean Output TPS added to the interval "
                         f"(default: B's recipe, bench.gates.compare_run_floor, else {DEFAULT.run_floor:g}; "
                         "docs/repeats.md)")
    ap.add_argument("--allow-missing", action="store_true",
                    help="points present (complete) on one side only do not fail the comparison")
    args = ap.parse_args(argv)
    try:
        jobs_a, jobs_b = load_results(args.a), load_results(args.b)
    except (ResultsError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    flags = CompareThresholds(al=args.al_threshold, tps=args.tps_threshold,
                              single_run_tps=args.single_run_tps_threshold, run_floor=args.run_floor)
    th = CompareThresholds.first_set(flags, recipe_thresholds(jobs_b), DEFAULT)  # the flag, B's recipe, the default
    diffs = compare_runs(jobs_a, jobs_b, th)
    render(diffs, args.a, args.b, th)
    return print_verdict(diffs, args.allow_missing)
