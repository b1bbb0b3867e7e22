"""tests/gpu/run_gpu_8b.sh's stage logic on the CPU (DRY=1): the models stage builds the small
shape and keeps it on the next call, each kK:L[+base] (and e3:L) stage plans one server of recipe=gpu_8b
through the main command (dry_run=true), an unknown stage is refused, timings are written."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.stack import VLLM_PYTHON

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "gpu" / "run_gpu_8b.sh"


@pytest.fixture(scope="module")
def dry_env(tmp_path_factory):
    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} missing: run common/setup/install.sh"
    root = tmp_path_factory.mktemp("gpu8b_dry")
    data = root / "data"
    data.mkdir()
    (data / "mt_bench_question.jsonl").write_text("".join(
        json.dumps({"question_id": 81 + i, "category": "writing", "turns": [f"q {i}", f"f {i}"]}) + "\n"
        for i in range(80)))
    env = {**os.environ, "DRY": "1", "RES": str(root / "res"), "SPECDEC_HOME_DIR": str(root / "sh"),
           "PARTS": str(root / "parts"), "DATA": str(data), "PARITY_DIR": str(root / "parity"),
           "PY": sys.executable, "BUILD_PYTHON": str(VLLM_PYTHON)}
    return root, env


def run(env, out: Path, *stages: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *stages], env={**env, "OUT": str(out)}, capture_output=True,
                          text=True, timeout=600, cwd=REPO)


def test_stages_build_then_plan_one_server_each(dry_env):
    root, env = dry_env
    r = run(env, root / "out1", "models", "k3:2.5+base", "k5:k+1", "e3:2.5", "base")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    out = root / "out1"
    assert json.loads((out / "models.json").read_text())["models"]["target"]["kept"] is False
    first = (out / "k3_2.5.launcher.log").read_text()
    assert "1 job(s), 8 client point(s)" in first and "-k3-fal2.5-" in first and "baseline llama8b-shaped-none" in first
    last = (out / "k5_kp1.launcher.log").read_text()
    assert "1 job(s), 4 client point(s)" in last and "-k5-fal6-" in last and "baseline" not in last
    base = (out / "base.launcher.log").read_text()
    assert "1 job(s), 4 client point(s)" in base and base.split("job llama8b-shaped-none-tp1-")[1][:8] == \
        first.split("baseline llama8b-shaped-none-tp1-")[1][:8]  # the folder +base would use
    assert "llama8b-shaped-eagle3-k3-fal2.5-" in (out / "eagle3_2.5.launcher.log").read_text()
    timings = (out / "timings.txt").read_text()
    assert all(f"{s} rc=0" in timings for s in ("models", "k3:2.5+base", "k5:k+1", "e3:2.5"))
    r = run(env, root / "out2", "models")  # the next call keeps what the first built
    assert r.returncode == 0 and json.loads((root / "out2" / "models.json").read_text())["models"]["target"]["kept"]


def test_an_unknown_stage_is_refused(dry_env):
    root, env = dry_env
    r = run(env, root / "out3", "bogus")
    assert r.returncode == 2 and "unknown stage bogus" in r.stdout
