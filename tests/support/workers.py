"""How the suite spreads over its pytest-xdist workers (pyproject's addopts: ``-n auto --dist
loadfile``; ``-n auto`` is 2 here, SPECDEC_TEST_WORKERS to change it).

A worker is a session of its own: a session fixture used on two workers starts twice. So every
test file goes to one worker whole (its module fixtures start once: xdist's loadfile), and the
files that use the same costly session fixture (one real server, run or cluster) are one unit
of work, on one worker. Which files use which fixture is read from the files' code (parameters,
getfixturevalue, usefixtures): the scheduler runs in the controller, which collects no tests.
tests/test_workers.py checks that reading against what collection finds.

A file marked ``takes_both_cores`` runs its jobs side by side and keeps both of CI's cores busy
on its own: its unit runs with no real part beside it, while the other units run two at a time.
Two such files at once, or one beside another unit that starts real parts, took as long as one
after the other (a module's jobs slowed by the other's); two units that each run one server or
job at a time took 29 % less together than one after the other. Such a file still leaves about
a fifth of the two cores idle (waits for readiness, Slurm, the next point), so the other worker
runs unit-test files beside it: files that start no real part (``light``: no e2e or slurm mark,
no real-part fixture, not in tests/e2e or tests/slurm).
"""
from __future__ import annotations

import ast
import json
import multiprocessing
import os
import time
from pathlib import Path

from xdist.scheduler import LoadFileScheduling

ALONE_MARK = "takes_both_cores"
# The costly session fixtures (tests/conftest.py), and the unit of work of the files using each
SHARED_ON_ONE_WORKER = {"smoke_run": "smoke-run", "spec_server": "vllm-servers", "ref_server": "vllm-servers",
                        "slurm_cluster": "slurm", "slurm_multinode": "slurm-multinode"}
# A test using one of these starts real parts (tests/conftest.py marks it e2e or slurm)
E2E_FIXTURES = {"real_stack", "spec_server", "ref_server", "smoke_run", "moto_server"}
SLURM_FIXTURES = {"slurm_cluster", "slurm_multinode"}
REAL_PART_MARKS = ("e2e", "slurm")
E2E_FOLDER = ("tests", "e2e")
REAL_PART_FOLDERS = (E2E_FOLDER, ("tests", "slurm"))  # every test in them is marked (the conftest files)


# Two workers pay only where two processes really run at once: two busy files at once took as
# long as one after the other here, so on cores that do not run two processes at full speed
# (hyperthreads of one core, a CPU quota) the suite runs on one worker.
MIN_SPEEDUP_FOR_TWO = 1.6


def _spin(seconds: float) -> int:
    end, n = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        n += 1
    return n


def parallel_speedup(seconds: float = 0.5) -> float:
    """How much more work two busy processes do at once than one alone, in the same time."""
    with multiprocessing.get_context("fork").Pool(2) as pool:
        one = pool.apply(_spin, (seconds,))
        two = sum(pool.map(_spin, [seconds, seconds], chunksize=1))
    return two / max(one, 1)


def workers_for(cpus: int, speedup: float) -> int:
    """-n auto: two workers where two processes run at once at nearly full speed, else one."""
    return 2 if cpus >= 2 and speedup >= MIN_SPEEDUP_FOR_TWO else 1


def auto_workers() -> tuple[int, str]:
    """The number of workers for -n auto, and why (SPECDEC_TEST_WORKERS overrides)."""
    if os.environ.get("SPECDEC_TEST_WORKERS"):
        return int(os.environ["SPECDEC_TEST_WORKERS"]), "SPECDEC_TEST_WORKERS"
    cpus = len(os.sched_getaffinity(0))
    speedup = parallel_speedup() if cpus >= 2 else 1.0
    return workers_for(cpus, speedup), f"{cpus} CPUs; two processes at once did {speedup:.2f}x one's work"


def _nodes(path: Path) -> list[ast.AST]:
    """Every node of a file's syntax tree (none for a file that cannot be read or parsed)."""
    try:
        return list(ast.walk(ast.parse(path.read_text(errors="replace"))))
    except (OSError, SyntaxError):
        return []


def fixtures_asked_for(path: Path) -> set[str]:
    """The fixture names a test file asks for: its functions' parameters (tests and fixtures),
    and the names given to request.getfixturevalue and pytest.mark.usefixtures."""
    names: set[str] = set()
    for node in _nodes(path):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.update(a.arg for a in node.args.args + node.args.kwonlyargs)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("getfixturevalue", "usefixtures"):
            names.update(a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return names


def runs_alone(path: Path) -> bool:
    """Whether a test file carries the ``takes_both_cores`` mark (read from its code)."""
    return any(isinstance(n, ast.Attribute) and n.attr == ALONE_MARK for n in _nodes(path))


def is_light(root: Path, path: str) -> bool:
    """Whether a test file starts no real part: outside tests/e2e and tests/slurm, no e2e or
    slurm mark and no real-part fixture in its code (the conftest files mark by the same
    fixtures and folders)."""
    if Path(path).parts[:2] in REAL_PART_FOLDERS:
        return False
    nodes = _nodes(root / path)
    if any(isinstance(n, ast.Attribute) and n.attr in REAL_PART_MARKS
           and getattr(n.value, "attr", "") == "mark" for n in nodes):
        return False
    return not fixtures_asked_for(root / path) & (E2E_FIXTURES | SLURM_FIXTURES)


# The seconds each unit took in a recorded suite (python -m tests.support.timeline FILE --unit-seconds
# tests/support/unit_seconds.json): the costly units are handed out longest first, so the last
# ones to start are short and the two workers end together. A unit it does not know (a new file)
# counts UNKNOWN_UNIT_S if it starts real parts.
UNIT_SECONDS = Path(__file__).with_name("unit_seconds.json")
UNKNOWN_UNIT_S = 120.0


def recorded_unit_seconds(path: Path = UNIT_SECONDS) -> dict[str, float]:
    """{unit: seconds} from the recorded file ({} if it is missing or unreadable)."""
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text())["units"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def unit_order(units: list[str], alone: set[str], real: dict[str, int], seconds: dict[str, float]) -> list[str]:
    """The order the units wait in (``units``: in collection order): those that run alone first,
    then the ones that start real parts (``real``: how many of a unit's tests do), then the light
    ones; within each, the longest first by ``seconds`` (a real-part unit not in it:
    UNKNOWN_UNIT_S), collection order breaking ties."""
    def estimate(u: str) -> float:
        return seconds.get(u, UNKNOWN_UNIT_S if real.get(u) else 0.0)
    first = {u: i for i, u in reversed(list(enumerate(units)))}
    return sorted(first, key=lambda u: (u not in alone, not real.get(u), -estimate(u), first[u]))


def next_unit(waiting: list[str], alone: set[str], others: list[list[str]], light: set[str] = frozenset()) -> str | None:
    """The unit a worker asking for work gets, in the order they wait, or None (it waits):
    beside a unit that runs alone, only a light one; a unit that runs alone only while the other
    workers hold nothing but light units; else the first waiting unit that may run beside theirs.
    ``others``: the unfinished units each other worker holds; ``light``: the units that start no
    real part."""
    held = [u for units in others for u in units]
    if any(u in alone for u in held):
        return next((u for u in waiting if u in light), None)
    heavy_beside = any(u not in light for u in held)
    return next((u for u in waiting if u not in alone or not heavy_beside), None)


def file_groups(root: Path, files: list[str]) -> dict[str, str]:
    """The unit of work of each test file (paths relative to ``root``): its own path, or the
    name of the costly session fixtures' group it shares with other files (union-find, so a file
    using two of them joins both groups into one)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for f in files:
        for fixture in sorted(fixtures_asked_for(root / f) & SHARED_ON_ONE_WORKER.keys()):
            a, b = find(f), find(SHARED_ON_ONE_WORKER[fixture])
            if a != b:  # the unit takes a fixture group's name over a file's
                keep = min((a, b), key=lambda x: (x not in SHARED_ON_ONE_WORKER.values(), x))
                parent[b if keep == a else a] = keep
    return {f: find(f) for f in files}


class SharedFixtureScheduling(LoadFileScheduling):
    """xdist's loadfile, with the files of one costly session fixture as one unit of work."""

    def __init__(self, config, log=None) -> None:
        super().__init__(config, log)
        self.root = Path(str(config.rootpath))
        self.groups: dict[str, str] = {}
        self.alone: set[str] = set()
        self.light: set[str] = set()

    def _split_scope(self, nodeid: str) -> str:
        if not self.groups:
            files = [str(p.relative_to(self.root)) for p in sorted((self.root / "tests").rglob("test_*.py"))]
            self.groups = file_groups(self.root, files)
            self.alone = {self.groups[f] for f in files if runs_alone(self.root / f)}
            self.light = {f for f in files if self.groups[f] == f and is_light(self.root, f)}
        f = nodeid.split("::", 1)[0]
        return self.groups.get(f, f)

    def _held(self, node) -> list[str]:
        """The units a worker is running. A worker keeps its last test until it gets more work
        or is shut down (pytest runs a test knowing the next one): with one test left, it waits."""
        work = self.assigned_work.get(node, {})
        if self._pending_of(work) < 2:
            return []
        return [scope for scope, tests in work.items() if not all(tests.values())]

    def _assign_work_unit(self, node) -> None:
        others = [self._held(n) for n in self.nodes if n is not node]
        unit = next_unit(list(self.workqueue), self.alone, others, self.light)
        if unit is not None:
            self.workqueue.move_to_end(unit, last=False)
            super()._assign_work_unit(node)

    def _reschedule(self, node) -> None:
        """xdist's, but a worker asks for its next unit only once it holds its last test (xdist:
        its last two), so the longest-first order holds: a unit of two long tests (the
        disaggregated file's) took the next unit as it started, leaving a shorter one to the
        worker that came free first."""
        if node.shutting_down:
            return
        if not self.workqueue:
            node.shutdown()
            return
        if self._pending_of(self.assigned_work[node]) > 1:
            return
        self._assign_work_unit(node)

    def mark_test_complete(self, node, item_index: int, duration: float = 0) -> None:
        super().mark_test_complete(node, item_index, duration)
        for other in self.nodes:  # a worker left waiting may take a unit now
            if other is not node and not other.shutting_down and not self._held(other):
                self._reschedule(other)
