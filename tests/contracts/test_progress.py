"""progress.json through its one owner (launcher.results.status.JobProgress)."""
import json

from launcher.results.job_end import finalize_job_dir
from launcher.results.status import JobProgress, read_progress, write_progress


def test_the_benchmarks_progress_round_trips_with_todays_keys(tmp_path):
    p = JobProgress(points_total=4, points_done=1, current="mtbench/t0_c1: complete", running=["mtbench/t0_c2"],
                    elapsed_s=12.5)
    write_progress(tmp_path, p)
    assert json.loads((tmp_path / "progress.json").read_text()) == {
        "points_total": 4, "points_done": 1, "current": "mtbench/t0_c1: complete", "running": ["mtbench/t0_c2"],
        "elapsed_s": 12.5}
    assert read_progress(tmp_path) == p


def test_missing_torn_and_unknown(tmp_path):
    assert read_progress(tmp_path) is None
    (tmp_path / "progress.json").write_text('{"points_to')
    assert read_progress(tmp_path) is None
    (tmp_path / "progress.json").write_text(json.dumps({"running": "not a list", "from_a_newer_writer": 1}))
    p = read_progress(tmp_path)
    assert p.running == [] and p.extra == {"from_a_newer_writer": 1}
    write_progress(tmp_path, p, durable=True)
    assert json.loads((tmp_path / "progress.json").read_text()) == {"running": [], "from_a_newer_writer": 1}


def test_the_jobs_end_closes_it(tmp_path):
    write_progress(tmp_path, JobProgress(points_total=2, points_done=0, current="x", running=["mtbench/t0_c1"],
                                         elapsed_s=1.0))
    finalize_job_dir(tmp_path, rc=143, cause="cancelled by Slurm (scancel)", reason=None,
                     points=[("mtbench", 0.0, 1), ("mtbench", 0.0, 2)])
    p = read_progress(tmp_path)
    assert (p.running, p.running_at_end, p.finished, p.points_total) == ([], ["mtbench/t0_c1"], True, 2)
    finalize_job_dir(tmp_path, rc=143, cause="cancelled by Slurm (scancel)", reason=None)  # twice: harmless
    assert read_progress(tmp_path).running_at_end == ["mtbench/t0_c1"]
