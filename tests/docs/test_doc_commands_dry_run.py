"""The launcher commands that README.md, upload/README.md and docs/*.md show, run as dry runs
(`dry_run=true` appended where the command would submit; inline `key=value` overrides as
`python -m launcher KEY=VALUE dry_run=true`): no server, so a light file that runs beside the
busy ones, each distinct line once and concurrently. The commands that need results run in
test_doc_commands_run.py."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.docs.doc_runs import RUN, as_run, failure, needs_results, run_line


@pytest.fixture(scope="module")
def doc_workdir(tmp_path_factory):
    """A scratch folder standing in for the repository root of the docs."""
    return tmp_path_factory.mktemp("doc_cwd")


DRY_RUNS = [c for c in RUN if not needs_results(c.entry_point)]


@pytest.fixture(scope="module")
def dry_run_results(doc_workdir):
    """The launcher commands (no server, no results needed) run concurrently, each
    distinct line once."""
    lines = list(dict.fromkeys(as_run(c) for c in DRY_RUNS))
    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as ex:
        done = dict(zip(lines, ex.map(lambda line: run_line(line, doc_workdir), lines)))
    return {c: (as_run(c), done[as_run(c)]) for c in DRY_RUNS}


@pytest.mark.parametrize("cmd", DRY_RUNS, ids=[f"{c.where}:{c.entry_point}" for c in DRY_RUNS])
def test_documented_launcher_command_runs_as_a_dry_run(cmd, dry_run_results):
    line, p = dry_run_results[cmd]
    assert p.returncode == 0, failure(cmd, line, p)
