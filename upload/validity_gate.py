"""The validity gate: launcher.results' one rule, applied to a run before upload.

A run is refused when it is not complete (our runs: no COMPLETE marker, i.e.
a recipe gate failed or the sweep died), generated no tokens, had more failed
requests than --max-failed-fraction allows (failed / (failed + succeeded)),
or is speculative with an Average_AL missing or below 1. specdec_bench's own
output folders are read the same way (they have no marker: complete when
their metric files are there).
"""
from __future__ import annotations

from pathlib import Path

from launcher.results import ValidityRule, point_problems, read_point

OVERRIDE = "--allow-invalid"
DEFAULT_MAX_FAILED_FRACTION = 0.05


def gate_problems(run_dir: Path, max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION) -> list[str]:
    """One line per reason the run is not a valid result, each ending with the override."""
    res = read_point(run_dir)
    problems = point_problems(res, ValidityRule(max_failed_fraction=max_failed_fraction))
    return [f"{p}; rerun the point, or pass {OVERRIDE} to upload it anyway" for p in problems]
