"""tests/gpu/run_gpu_bg.sh on a CPU machine: it starts the stages in the background, waits for
them, and brings back the facts and the log under $OUT (the GPU protocol of issue 37)."""
import os
import subprocess
from pathlib import Path

from tests.support import stack

REPO = Path(__file__).resolve().parents[2]


def test_background_stages_finish_and_come_back(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    p = subprocess.run(["bash", str(REPO / "tests/gpu/run_gpu_bg.sh"), "start", "facts"], cwd=REPO,
                       env={**stack.machine_env(), "OUT": str(out), "DRY": "1", "WAIT_S": "60"},
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "finished" in p.stdout
    facts = (out / "machine_facts.txt").read_text()
    assert "== lscpu" in facts and f"== nproc {os.cpu_count()}" in facts
    assert (out / "run.log").exists()
    again = subprocess.run(["bash", str(REPO / "tests/gpu/run_gpu_bg.sh"), "wait"], cwd=REPO,
                           env={**os.environ, "OUT": str(out), "WAIT_S": "5"}, capture_output=True, text=True,
                           timeout=60)
    assert "finished" in again.stdout   # a later call finds the run done at once
