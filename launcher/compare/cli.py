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
from launcher.contracts.compare_thresholds import CompareThresholds
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
    recipe, default = recipe_thresholds(jobs_b), Thresholds()

    def pick(flag: float | None, key: str) -> float:  # the flag, else B's recipe, else compare's default
        return next(v for v in (flag, getattr(recipe, key), getattr(default, key)) if v is not None)

    th = Thresholds(al=pick(args.al_threshold, "al"), tps=pick(args.tps_threshold, "tps"),
                    min_speedup=dict(recipe.min_speedup),
                    single_run_tps=pick(args.single_run_tps_threshold, "single_run_tps"),
                    run_floor=pick(args.run_floor, "run_floor"))
    diffs = compare_runs(jobs_a, jobs_b, th)
    render(diffs, args.a, args.b, th)
    return print_verdict(diffs, args.allow_missing)
