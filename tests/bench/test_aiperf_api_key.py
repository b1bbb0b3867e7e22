"""The key reaches AIPerf whatever its first character: AIPerf's own parser (cyclopts)
reads a separate value that starts with "-" as the next flag, and a generated key
(token_urlsafe) started with "-" once in 64 jobs (issue 27: every point of a job failed
with `--api-key requires an argument`)."""
from __future__ import annotations

import subprocess

import pytest

from launcher.bench.aiperf_runner import GroupRun, aiperf_argv, multiphase_argv
from launcher.runtime import apikey
from tests.support.stack import AIPERF

PARSE = """
import sys
from aiperf.cli import app
cmd, bound, _ = app.parse_args(sys.argv[1:], exit_on_error=False, print_error=False)
print("parsed")
"""


def aiperf_parses(argv: list[str]) -> subprocess.CompletedProcess:
    python = AIPERF.parent / "python"
    if not python.exists():
        pytest.skip(f"AIPerf's environment is not installed ({python})")
    return subprocess.run([str(python), "-c", PARSE, *argv[1:]], capture_output=True, text=True, timeout=120)


def test_a_key_that_starts_with_a_dash_reaches_aiperf(tmp_path):
    run = GroupRun("mtbench", 0.0, [1], tmp_path / "in.jsonl", 2, tmp_path / "a")
    key = "-3xJ_secret"
    argv = aiperf_argv("aiperf", model="tiny", url="http://127.0.0.1:1", tokenizer="t", run=run,
                       request_timeout_s=60, api_key=key)
    assert f"--api-key={key}" in argv and key not in argv  # one word: never read as a flag
    assert multiphase_argv("aiperf", tmp_path / "c.yaml", api_key=key)[-1] == f"--api-key={key}"
    p = aiperf_parses(["aiperf", "profile", "--model", "tiny", "--url", "http://127.0.0.1:1",
                       *[a for a in argv if a.startswith("--api-key")]])
    assert p.returncode == 0 and "parsed" in p.stdout, p.stdout + p.stderr
    old = aiperf_parses(["aiperf", "profile", "--model", "tiny", "--url", "http://127.0.0.1:1", "--api-key", key])
    assert old.returncode != 0 and "requires an argument" in old.stderr  # what the two-word form did


def test_a_generated_key_never_starts_with_a_dash():
    keys = {apikey.job_key("0.0.0.0", {}) for _ in range(2000)}
    assert len(keys) == 2000 and all(len(k) >= 32 and not k.startswith("-") for k in keys)
