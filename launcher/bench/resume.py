"""Resuming a sweep: the points still to measure. A point already complete on disk (with
every repeat the sweep asks) is marked skipped and keeps its figures, unless --force."""
from __future__ import annotations

from pathlib import Path

from launcher.bench.bench_run import measured_repeats, server_starts
from launcher.bench.point_files import load_point_values
from launcher.contracts.job import BenchSpec
from launcher.results import is_complete
from launcher.results.repeats import record


def repeats_done(point_dir: Path) -> int:
    """How many repeats a complete point holds (1 without repeats.json)."""
    return int((record.read(point_dir) or {}).get("repeats") or 1)


def resume(outcomes: list, save_dir: Path, bench: BenchSpec) -> list:
    """The points still to measure; complete ones (with every repeat) are marked skipped
    and keep their figures."""
    todo = []
    expected = measured_repeats(bench) * server_starts(bench)  # every start's repeats (sweep.server_starts)
    for o in outcomes:
        if not bench.force and is_complete(save_dir / o.dir) and repeats_done(save_dir / o.dir) == expected:
            o.status, o.reason = "skipped", "already complete"
            o.values.update(load_point_values(save_dir / o.dir))
        else:
            todo.append(o)
    return todo
