"""How the suite spreads over its pytest-xdist workers (pyproject's addopts: ``-n auto --dist
loadfile``; ``-n auto`` is 2 here, SPECDEC_TEST_WORKERS to change it).

A worker is a session of its own: a session fixture used on two workers starts twice. So every
test file goes to one worker whole (its module fixtures start once: xdist's loadfile), and the
files that use the same costly session fixture (one real server, run or cluster) are one unit
of work, on one worker. Which files use which fixture is read from the files' code (parameters,
getfixturevalue, usefixtures): the scheduler runs in the controller, which collects no tests.
tests/test_workers.py checks that reading against what collection finds.
"""
from __future__ import annotations

import ast
from pathlib import Path

from xdist.scheduler import LoadFileScheduling

# The costly session fixtures (tests/conftest.py), and the unit of work of the files using each
SHARED_ON_ONE_WORKER = {"smoke_run": "smoke-run", "spec_server": "vllm-servers", "ref_server": "vllm-servers",
                        "slurm_cluster": "slurm", "slurm_multinode": "slurm-multinode"}


def fixtures_asked_for(path: Path) -> set[str]:
    """The fixture names a test file asks for: its functions' parameters (tests and fixtures),
    and the names given to request.getfixturevalue and pytest.mark.usefixtures."""
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except (OSError, SyntaxError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.update(a.arg for a in node.args.args + node.args.kwonlyargs)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("getfixturevalue", "usefixtures"):
            names.update(a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return names


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

    def _split_scope(self, nodeid: str) -> str:
        if not self.groups:
            files = [str(p.relative_to(self.root)) for p in sorted((self.root / "tests").rglob("test_*.py"))]
            self.groups = file_groups(self.root, files)
        f = nodeid.split("::", 1)[0]
        return self.groups.get(f, f)
