"""Every command that README.md, upload/README.md and docs/*.md show, run as
written (tests/docs/doc_commands.py collects them):

- launcher commands as dry runs (`dry_run=true` appended where the command would
  submit), inline `key=value` overrides as `python -m launcher KEY=VALUE dry_run=true`
  (no server: not e2e, run concurrently once per module);
- report, compare and upload_to_s3 against the real results of the session's
  smoke run (copied to `results/smoke`, `results/a`, `results/b` in a scratch
  folder) and a real S3 server (moto_server), bucket created from the s3:// URL
  (e2e); so is any later `python -m launcher.X` module the docs show.

A command line that several places show (the same text, run the same way) runs once,
and each place's test judges that one run: the line is what is tested, not where it is
written.

A command marked `<!-- doc-test: skip: REASON -->` is not run; the last test
lists and counts those. Usage lines (`[--flag X]`, `<placeholder>`, `...`) are
not run either: test_doc_parsing.py compares their flags with --help."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from tests.docs.doc_commands import REPO_ROOT, DocCommand, collect, is_launcher_module

COMMANDS = collect()
RUN = [c for c in COMMANDS if c.skip_reason is None and c.kind != "synopsis"]
MARKED = [c for c in COMMANDS if c.skip_reason is not None]


def needs_results(ep) -> bool:
    """report, compare, upload_to_s3 and any later `python -m launcher.X` (but the
    benchmark) run in a folder holding the smoke run's results as results/{smoke,a,b}."""
    return ep == "upload" or (is_launcher_module(ep) and ep != "bench")


def as_run(cmd: DocCommand) -> str:
    """The command line the test runs: the interpreter is this venv's, and a
    launcher command that would submit becomes a dry run."""
    text = cmd.text.split("&&")[-1].strip() if cmd.entry_point == "launcher" else cmd.text
    if cmd.kind == "override":
        text = f"python -m launcher {text}"
    if cmd.entry_point in ("launcher", "override") and "--cfg" not in text and "dry_run=" not in text:
        text += " dry_run=true"
    words = shlex.split(text)
    if re.fullmatch(r"\S*python3?", words[0]):
        words[0] = sys.executable
    return shlex.join(words)


@pytest.fixture(scope="module")
def doc_workdir(tmp_path_factory, request):
    """A scratch folder standing in for the repository root of the docs."""
    return tmp_path_factory.mktemp("doc_cwd")


@pytest.fixture(scope="module")
def results_tree(smoke_run, doc_workdir):
    assert smoke_run["proc"].returncode == 0, smoke_run["proc"].stderr[-3000:]
    for name in ("smoke", "a", "b"):
        dst = doc_workdir / "results" / name
        if not dst.exists():
            shutil.copytree(smoke_run["out"] / "smoke", dst)
    return doc_workdir / "results"


def _env(extra: dict) -> dict:
    env = {**os.environ, **extra}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("COLUMNS", "200")
    return env


def _run_line(line: str, cwd: Path, extra: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=_env(extra or {}), capture_output=True, text=True,
                          timeout=600)


def _failure(cmd: DocCommand, line: str, p: subprocess.CompletedProcess) -> str:
    return f"{cmd.where}: `{cmd.text}` (run as `{line}`) exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"


DRY_RUNS = [c for c in RUN if not needs_results(c.entry_point)]
ON_RESULTS = [c for c in RUN if needs_results(c.entry_point)]


@pytest.fixture(scope="module")
def dry_run_results(doc_workdir):
    """The launcher commands (no server, no results needed) run concurrently, each
    distinct line once."""
    lines = list(dict.fromkeys(as_run(c) for c in DRY_RUNS))
    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as ex:
        done = dict(zip(lines, ex.map(lambda line: _run_line(line, doc_workdir), lines)))
    return {c: (as_run(c), done[as_run(c)]) for c in DRY_RUNS}


@pytest.mark.parametrize("cmd", DRY_RUNS, ids=[f"{c.where}:{c.entry_point}" for c in DRY_RUNS])
def test_documented_launcher_command_runs_as_a_dry_run(cmd, dry_run_results):
    line, p = dry_run_results[cmd]
    assert p.returncode == 0, _failure(cmd, line, p)


@pytest.fixture(scope="module")
def results_runs() -> dict:
    """Each distinct line run on the results, by line: when it started, and its one run."""
    return {}


@pytest.mark.e2e
@pytest.mark.parametrize("cmd", ON_RESULTS, ids=[f"{c.where}:{c.entry_point}" for c in ON_RESULTS])
def test_documented_command_runs_on_real_results(cmd, request, doc_workdir, results_tree, results_runs):
    extra: dict = {}
    if cmd.entry_point == "upload":
        url = request.getfixturevalue("moto_server")
        extra = {"SPECDEC_BENCH_S3_ENDPOINT": url, "AWS_ACCESS_KEY_ID": "doc-test", "AWS_SECRET_ACCESS_KEY": "doc-test",
                 "AWS_DEFAULT_REGION": "us-east-1"}
        s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="doc-test",
                          aws_secret_access_key="doc-test", config=Config(s3={"addressing_style": "path"}))
        for bucket in re.findall(r"s3://([^/\s]+)", cmd.text):
            try:
                s3.create_bucket(Bucket=bucket)
            except s3.exceptions.BucketAlreadyOwnedByYou:
                pass
    line = as_run(cmd)
    if line not in results_runs:
        results_runs[line] = (time.time(), _run_line(line, doc_workdir, extra))
    started, p = results_runs[line]
    assert p.returncode == 0, _failure(cmd, line, p)
    if cmd.entry_point == "report":  # the smoke run built a report too: this one must have written its own
        written = [f for f in (doc_workdir / "results").rglob("index.html") if f.stat().st_mtime >= started - 0.5]
        assert written, "the report wrote no index.html"


def test_marked_commands_are_counted_with_their_reasons(capsys):
    with capsys.disabled():
        print(f"\n[doc-test] {len(RUN)} documented commands run; {len(MARKED)} marked as not runnable here:")
        for c in MARKED:
            print(f"  {c.where}: {c.text[:70]} -- {c.skip_reason}")
    assert len(RUN) >= 8
    assert all(c.skip_reason for c in MARKED)
