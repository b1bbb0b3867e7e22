"""report=true|false: the job spec carries it to the node (launcher.node.job_entry builds JOB_DIR/report),
and the job's own report is built from its folder when it ends."""
from __future__ import annotations

import shutil
from pathlib import Path

from launcher.login.plan import make_plan
from tests.support.login import with_engine

SMOKE = Path(__file__).resolve().parents[1] / "report" / "data" / "smoke_run1"


def test_the_job_spec_carries_report(compose):
    assert make_plan(*with_engine(compose())).jobs[0].report is True
    plan = make_plan(*with_engine(compose("report=false")))
    assert plan.jobs[0].report is False and plan.jobs[0].to_dict()["report"] is False


def test_a_job_builds_its_own_report_when_it_ends(tmp_path, capsys):
    from launcher.node.job_entry import build_job_report

    job = shutil.copytree(SMOKE, tmp_path / "job")
    path = build_job_report(job)
    index = (job / "report" / "index.html").resolve()
    assert path == str(index) and index.is_file() and "mtbench/t0_c1" in index.read_text()
    assert f"[specdec] report: {index}" in capsys.readouterr().out


def test_a_job_without_results_says_why_no_report(tmp_path, capsys):
    from launcher.node.job_entry import build_job_report

    (tmp_path / "empty").mkdir()
    assert build_job_report(tmp_path / "empty") is None
    out = capsys.readouterr().out
    assert "[specdec] report not built:" in out and "no job folder found" in out, out
