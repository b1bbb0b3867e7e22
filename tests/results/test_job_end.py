"""Pure rules: each point's final status from disk + the job's record, and the end in words."""
from __future__ import annotations

import json
import signal

from launcher.node.point_status import end_cause
from launcher.node.server_fault import ServerFault, fault_cause
from launcher.results.job_end import end_reason, finalize_job_dir, finalize_points, planned_rows

PTS = [{"dir": f"mtbench/t0_c{c}", "status": "pending", "reason": None} for c in (1, 2, 3, 4)]


def test_server_sigkill_during_point_2_of_4():
    cause = fault_cause(ServerFault(label="main server", log="logs/server.log", rc=-9))
    assert cause == "the main server exited with SIGKILL"
    rows = finalize_points(PTS, complete_dirs=["mtbench/t0_c1"], running=["mtbench/t0_c2"], cause=cause)
    assert [r["status"] for r in rows] == ["complete", "failed", "not_run", "not_run"]
    assert rows[1]["reason"] == "the main server exited with SIGKILL during this point"
    assert rows[2]["reason"] == "the main server exited with SIGKILL before this point started"
    assert end_reason(cause, rows, ["mtbench/t0_c2"]) == (
        "the main server exited with SIGKILL during point mtbench/t0_c2; 1 of 4 points complete, 1 failed, 2 not run")


def test_slurm_states_in_words():
    assert end_cause(signum=signal.SIGTERM, slurm_state="CANCELLED") == "cancelled by Slurm (scancel)"
    assert end_cause(signum=signal.SIGTERM, slurm_state="TIMEOUT") == "the Slurm time limit was reached"
    assert end_cause(signum=signal.SIGTERM, slurm_state="PREEMPTED") == "preempted by Slurm"
    assert end_cause(signum=signal.SIGTERM) == "stopped by SIGTERM"
    assert end_cause(bench_rc=-9) == "the benchmark exited with SIGKILL"
    assert end_cause(bench_rc=2, phase="lossless comparison") == "the lossless comparison exited with code 2"


def test_benchmark_verdicts_and_disk_truth_win():
    pts = [{"dir": "a/t0_c1", "status": "failed", "reason": "Average_AL 0.5 is below 1"},
           {"dir": "a/t0_c2", "status": "complete", "reason": None},  # marker gone: not complete
           {"dir": "a/t0_c3", "status": "skipped", "reason": "already complete"},
           {"dir": "a/t0_c4", "status": "pending", "reason": None}]
    rows = finalize_points(pts, complete_dirs=["a/t0_c3", "a/t0_c4"], running=["a/t0_c1"], cause="x")
    assert rows[0]["reason"] == "Average_AL 0.5 is below 1"
    assert rows[1]["status"] == "failed" and "COMPLETE" in rows[1]["reason"]
    assert rows[2]["status"] == "skipped"
    assert rows[3] == {"dir": "a/t0_c4", "status": "complete", "reason": None}


def test_normal_end_changes_nothing_but_disk_truth():
    rows = finalize_points(PTS, complete_dirs=[p["dir"] for p in PTS], running=[], cause=None)
    assert {r["status"] for r in rows} == {"complete"}


def test_planned_rows_from_the_spec_points():
    rows = planned_rows([(ds, t, c) for ds in ("mtbench", "speed_qualitative") for t in (0.0, 0.7) for c in (1, 8)])
    assert [r["dir"] for r in rows] == ["mtbench/t0_c1", "mtbench/t0_c8", "mtbench/t0.7_c1", "mtbench/t0.7_c8",
                                        "speed_qualitative/t0_c1", "speed_qualitative/t0_c8",
                                        "speed_qualitative/t0.7_c1", "speed_qualitative/t0.7_c8"]


def test_finalize_job_dir_from_files(tmp_path):
    (tmp_path / "mtbench" / "t0_c1").mkdir(parents=True)
    (tmp_path / "mtbench" / "t0_c1" / "COMPLETE").write_text("x\n")
    (tmp_path / "summary.json").write_text(json.dumps({"points": PTS, "model": "tiny"}))
    (tmp_path / "progress.json").write_text(json.dumps({"running": ["mtbench/t0_c2"], "current": "point 2/4"}))
    s = finalize_job_dir(tmp_path, rc=143, cause="cancelled by Slurm (scancel)", reason="interrupted by SIGTERM")
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk == s and on_disk["model"] == "tiny"
    assert [p["status"] for p in s["points"]] == ["complete", "failed", "not_run", "not_run"]
    assert s["job_end"]["reason"].startswith("cancelled by Slurm (scancel) during point mtbench/t0_c2")
    assert s["job_end"]["detail"] == "interrupted by SIGTERM" and s["job_end"]["exit_code"] == 143
    prog = json.loads((tmp_path / "progress.json").read_text())
    assert prog["running"] == [] and prog["finished"] is True
    again = finalize_job_dir(tmp_path, rc=143, cause="cancelled by Slurm (scancel)", reason="interrupted by SIGTERM")
    assert again["points"] == s["points"] and again["job_end"]["reason"] == s["job_end"]["reason"]


def test_finalize_without_summary_uses_the_plan(tmp_path):
    """The job failed before the benchmark wrote anything (server start, input check)."""
    s = finalize_job_dir(tmp_path, rc=3, cause="the server failed to start", reason=None,
                         points=[("specbench", 0.0, 1), ("specbench", 0.0, 2)])
    assert [(p["dir"], p["status"]) for p in s["points"]] == [("specbench/t0_c1", "not_run"),
                                                             ("specbench/t0_c2", "not_run")]
    assert s["points"][0]["reason"] == "the server failed to start before this point started"


def test_slurm_durations():
    from launcher.node.point_status import slurm_seconds

    assert slurm_seconds("1-00:00:10") == 86410 and slurm_seconds("05:03") == 303
    assert slurm_seconds("UNLIMITED") is None  # the stop's states: tests/node/test_slurm_stop_cause.py


def test_a_benchmark_that_said_why_keeps_its_words(tmp_path):
    pts = [{"dir": "m/t0_c1", "status": "complete", "reason": None},
           {"dir": "m/t0_c2", "status": "failed", "reason": "Average_AL 0.9 is below 1"}]
    (tmp_path / "m" / "t0_c1").mkdir(parents=True)
    (tmp_path / "m" / "t0_c1" / "COMPLETE").write_text("x")
    (tmp_path / "summary.json").write_text(json.dumps({"points": pts}))
    s = finalize_job_dir(tmp_path, rc=1, cause=None, reason="1 of 2 points failed: m/t0_c2: Average_AL 0.9 is below 1")
    assert s["points"] == pts
    assert s["job_end"]["reason"] == "1 of 2 points failed: m/t0_c2: Average_AL 0.9 is below 1"


def test_a_failure_the_benchmark_recorded_while_a_server_failed_is_put_on_the_server():
    """Point 2 failed in the benchmark's words ("results unreadable") while the server gave no
    answer: its reason says why first, the benchmark's words after (issue 27)."""
    cause = "the main server stopped answering (no answer since 01:02:03Z)"
    pts = [dict(p) for p in PTS]
    pts[1].update(status="failed", reason="results unreadable: no successful profiling request")
    pts[2].update(status="failed", reason="AIPerf exited with code 1")
    rows = finalize_points(pts, complete_dirs=["mtbench/t0_c1"], running=[], cause=cause, blamed=["mtbench/t0_c2"])
    assert rows[1]["reason"] == (f"{cause} during this point (the benchmark: results unreadable: no successful "
                                 "profiling request)")
    assert rows[2]["reason"] == "AIPerf exited with code 1"  # not running while the server failed: its own words
    assert rows[3]["status"] == "not_run"
    # without a cause (a normal end) nothing is blamed
    assert finalize_points(pts, ["mtbench/t0_c1"], [], None, blamed=["mtbench/t0_c2"])[1]["reason"].startswith(
        "results unreadable")
