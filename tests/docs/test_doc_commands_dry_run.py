"""The launcher commands that README.md, upload/README.md and docs/*.md show, run as dry runs
(`dry_run=true` appended where the command would submit; inline `key=value` overrides as
`python -m launcher KEY=VALUE dry_run=true`): no server, so a light file that runs beside the
busy ones, each distinct line once and concurrently. The commands that need results run in
test_doc_commands_run.py."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.docs.doc_runs import RUN, as_run, failure, needs_results, run_env, run_line


@pytest.fixture(scope="module")
def doc_workdir(tmp_path_factory):
    """A scratch folder standing in for the repository root of the docs."""
    return tmp_path_factory.mktemp("doc_cwd")


DRY_RUNS = [c for c in RUN if not needs_results(c.entry_point)]


def _launcher_args(line: str):
    """The arguments after `-m launcher` of a plain launcher line (this venv's Python, no
    environment prefix, no shell syntax), else None: that line runs in a shell of its own."""
    words = shlex.split(line)
    if words[:3] == [sys.executable, "-m", "launcher"] and not any(
            ch in line for ch in "|;&<>$`") and all(w == w.strip() for w in words):
        return words[3:]
    return None


def _batch(lines: list[str], cwd) -> dict:
    """Plain launcher lines run in one process per half (tests/docs/dry_run_batch.py: the imports
    once, not once a line), the two halves side by side."""
    halves = [lines[0::2], lines[1::2]]

    def one(half):
        if not half:
            return {}
        p = subprocess.run([sys.executable, str(Path(__file__).with_name("dry_run_batch.py"))],
                           input=json.dumps([_launcher_args(line) for line in half]), cwd=cwd, env=run_env({}),
                           capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stderr[-3000:]
        return {line: subprocess.CompletedProcess(["bash", "-c", line], r["rc"], r["stdout"], r["stderr"])
                for line, r in zip(half, json.loads(p.stdout))}

    with ThreadPoolExecutor(max_workers=2) as ex:
        done = {}
        for part in ex.map(one, halves):
            done.update(part)
    return done


@pytest.fixture(scope="module")
def dry_run_results(doc_workdir):
    """The launcher commands (no server, no results needed), each distinct line once: plain ones
    in two batch processes, the rest (an environment prefix, shell syntax) each in a shell."""
    lines = list(dict.fromkeys(as_run(c) for c in DRY_RUNS))
    plain = [line for line in lines if _launcher_args(line) is not None]
    done = _batch(plain, doc_workdir)
    done.update({line: run_line(line, doc_workdir) for line in lines if line not in done})
    return {c: (as_run(c), done[as_run(c)]) for c in DRY_RUNS}


@pytest.mark.parametrize("cmd", DRY_RUNS, ids=[f"{c.where}:{c.entry_point}" for c in DRY_RUNS])
def test_documented_launcher_command_runs_as_a_dry_run(cmd, dry_run_results):
    line, p = dry_run_results[cmd]
    assert p.returncode == 0, failure(cmd, line, p)


def test_a_batched_line_that_fails_reads_as_failed(tmp_path):
    """The batch gives each line its own exit status and output, as its own process would."""
    bad, good = (f"{shlex.join([sys.executable, '-m', 'launcher'])} {a} dry_run=true" for a in ("no_such_key=1", "recipe=smoke"))
    done = _batch([bad, good], tmp_path)
    assert done[bad].returncode == 2 and "no_such_key" in done[bad].stderr and "Traceback" not in done[bad].stderr
    assert done[good].returncode == 0 and done[good].stdout
