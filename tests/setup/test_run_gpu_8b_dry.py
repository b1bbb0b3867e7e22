"""tests/gpu/run_gpu_8b.sh's stage logic on the CPU (DRY=1): the models stage builds the small
shape and keeps it on the next call, each kK:L[+base] (and e3:L) stage plans one server of recipe=gpu_8b
through the main command (dry_run=true), an unknown stage is refused, timings are written."""
from __future__ import annotations

import json
import re
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


def test_seed_recipes_with_shaped_drafts_plan_one_server_each(dry_env):
    """Issue 38's stages: qmodels builds the Qwen3-8B family (small shape), qd/qe/le plan
    recipe=qwen3_dflash / qwen3_eagle3 / llama31_eagle3 through the main command with the
    shaped model and draft (k=15 for DFlash, 3 for EAGLE3), forced acceptance, +base the matched
    baseline, X:base the baseline alone in the same folder; the golden checks are skipped."""
    root, env = dry_env
    r = run(env, root / "out4", "models", "qmodels", "qd:8+base", "qd:k+1", "qe:2.5", "le:2.5+base", "qd:base")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    out = root / "out4"
    built = json.loads((out / "qmodels.json").read_text())
    assert built["model"] == "qwen3_8b" and set(built["models"]) == {"target", "dflash", "eagle3"}
    qd = (out / "qd_8pbase.launcher.log").read_text()
    assert "recipe qwen3_dflash: 1 job(s), 8 client point(s)" in qd and "qwen3-8b-shaped-dflash-k15-fal8-" in qd
    assert '"method":"dflash"' in qd and '"synthetic_acceptance_length":8.0' in qd and "baseline qwen3-8b-shaped-none" in qd
    assert "-k15-fal16-" in (out / "qd_kp1.launcher.log").read_text()  # k+1 = 16: every draft accepted
    qe = (out / "qe_2.5.launcher.log").read_text()
    assert "recipe qwen3_eagle3: 1 job(s), 4 client point(s)" in qe and "qwen3-8b-shaped-eagle3-k3-fal2.5-" in qe
    assert "note: bench.golden=vllm_ci_qwen3_8b_eagle3 skipped: model.random_weights and draft.random_weights" in qe
    le = (out / "le_2.5pbase.launcher.log").read_text()
    assert "recipe llama31_eagle3: 1 job(s), 8 client point(s)" in le and "llama8b-shaped-eagle3-k3-fal2.5-" in le
    assert "note: bench.golden=vllm_ci_llama31_8b_eagle3 skipped" in le
    base = (out / "qd_base.launcher.log").read_text()
    assert "recipe qwen3_dflash: 1 job(s), 4 client point(s)" in base and \
        base.split("job qwen3-8b-shaped-none-tp1-")[1][:8] == qd.split("baseline qwen3-8b-shaped-none-tp1-")[1][:8]
    timings = (out / "timings.txt").read_text()
    assert all(f"{s} rc=0" in timings for s in ("qmodels", "qd:8+base", "qd:k+1", "qe:2.5", "le:2.5+base", "qd:base"))


def test_facts_record_one_cores_speed_beside_the_cpu_model(dry_env, tmp_path):
    """The facts stage: every machine records the same one-core loop (the draft-model path is
    bound by one host core), so two machines' hosts compare by a figure, not only by a name."""
    _, env = dry_env
    p = run(env, tmp_path, "facts")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    facts = (tmp_path / "machine_facts.txt").read_text()
    assert "== lscpu" in facts and "== nproc" in facts
    ms = re.search(r"== one core: ([0-9.]+) ms for 2e6 Python additions", facts)
    assert ms and 0 < float(ms.group(1)) < 10_000, facts
    # the launch line is there on every machine: a figure where CUDA is, "no CUDA" where not
    launch = re.search(r"== kernel launch: (no CUDA|[0-9.]+ us a launch)", facts)
    assert launch, facts
