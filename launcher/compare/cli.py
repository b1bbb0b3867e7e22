"""python -m launcher.compare A B [--al-threshold 0.02] [--tps-threshold 0.05]
[--single-run-tps-threshold 0.35] [--run-floor F] [--allow-missing]

Exit codes: 0 no regression (improvements, noise and SUSPECT points), 1 a
regression or a missing point (unless --allow-missing), 2 unusable input.
"""
from __future__ import annotations

import argparse
import sys

from launcher.compare.diff import RUN_FLOOR, Thresholds, compare_runs
from launcher.compare.table import print_verdict, render
from launcher.results.job_dir import ResultsError, load_results


def _fraction(s: str) -> float:
    v = float(s)
    if not 0 <= v < 10:
        raise argparse.ArgumentTypeError("a relative threshold such as 0.02 (2%)")
    return v


def recipe_threshold(jobs, key: str, default: float) -> float:
    """The candidate's recipe thresholds (job.json's compare_thresholds), when recorded."""
    for job in jobs:
        value = ((job.spec.compare_thresholds if job.spec else None) or {}).get(key)
        if value is not None:
            return float(value)
    return default


def recipe_min_speedup(jobs) -> dict:
    """bench.gates.min_speedup of the candidate's recipe (job.json), {} when unset."""
    for job in jobs:
        gates = ((job.spec.compare_thresholds if job.spec else None) or {}).get("min_speedup")
        if gates:
            return {str(k): float(v) for k, v in gates.items()}
    return {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m launcher.compare",
        description="Compare two benchmark runs (job folders, or folders of jobs matched by server_id).")
    ap.add_argument("a", help="baseline results (job folder or folder of jobs)")
    ap.add_argument("b", help="candidate results, compared against A")
    ap.add_argument("--al-threshold", type=_fraction, default=None,
                    help="relative Average_AL change that counts (default: B's recipe, "
                         "bench.gates.compare_al_threshold, else 0.02)")
    ap.add_argument("--tps-threshold", type=_fraction, default=None,
                    help="relative Output TPS change that counts (default: B's recipe, "
                         "bench.gates.compare_tps_threshold, else 0.05)")
    ap.add_argument("--single-run-tps-threshold", type=_fraction, default=None,
                    help="with one repeat on a side (no noise estimate), the relative Output TPS change that "
                         "counts (default: B's recipe, bench.gates.compare_single_run_tps_threshold, else 0.35)")
    ap.add_argument("--run-floor", type=_fraction, default=None,
                    help="between-run relative sd of a point's mean Output TPS added to the interval "
                         f"(default: B's recipe, bench.gates.compare_run_floor, else {RUN_FLOOR}; docs/repeats.md)")
    ap.add_argument("--allow-missing", action="store_true",
                    help="points present (complete) on one side only do not fail the comparison")
    args = ap.parse_args(argv)
    try:
        jobs_a, jobs_b = load_results(args.a), load_results(args.b)
    except (ResultsError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    th = Thresholds(al=args.al_threshold if args.al_threshold is not None else recipe_threshold(jobs_b, "al", 0.02),
                    tps=args.tps_threshold if args.tps_threshold is not None else recipe_threshold(jobs_b, "tps", 0.05))
    th.min_speedup = recipe_min_speedup(jobs_b)
    th.single_run_tps = (args.single_run_tps_threshold if args.single_run_tps_threshold is not None
                         else recipe_threshold(jobs_b, "single_run_tps", th.single_run_tps))
    th.run_floor = (args.run_floor if args.run_floor is not None
                    else recipe_threshold(jobs_b, "run_floor", th.run_floor))
    diffs = compare_runs(jobs_a, jobs_b, th)
    render(diffs, args.a, args.b, th)
    return print_verdict(diffs, args.allow_missing)
