"""job.json as the tools that read results see it (launcher.contracts.job.read_recorded_job):
typed (JobSpec), and files of earlier versions still read."""
import json
import shutil
from pathlib import Path

from launcher.contracts.job import JobSpec, read_recorded_job
from launcher.results.job_dir import load_results

OLD = Path(__file__).resolve().parents[1] / "speedup" / "data" / "smoke_baseline"  # written by an earlier planner


def test_earlier_planners_job_json_reads_typed():
    raw = {d.name: json.loads((d / "job.json").read_text()) for d in OLD.iterdir() if (d / "job.json").exists()}
    assert len(raw) == 3 and all("runtime_params" in r and "num_speculative_tokens" in r for r in raw.values())
    for name, r in raw.items():
        spec = read_recorded_job(OLD / name)
        assert isinstance(spec, JobSpec)
        assert (spec.recipe, spec.server_id, spec.method, spec.model) == (r["recipe"], r["server_id"], r["method"],
                                                                            r["model"])
        assert spec.num_speculative_tokens == r["num_speculative_tokens"]  # k, now read from the config
        assert spec.compare_thresholds == r["compare_thresholds"]
        assert [p.id for p in spec.points] == [p["id"] for p in r["points"]]


def test_results_loader_gives_each_job_its_spec():
    jobs = {j.path.name: j for j in load_results(OLD)}
    assert {n: j.spec.method for n, j in jobs.items()} == {
        "tiny-none-tp1-6c4f8692": "none", "tiny-draft_model-k1-tp1-21a4f01b": "draft_model",
        "tiny-draft_model-k3-tp1-b4dfa9d2": "draft_model"}


def test_partial_newer_and_broken_files(tmp_path):
    (tmp_path / "job.json").write_text(json.dumps({"compare_thresholds": {"tps": 0.2}}))
    spec = read_recorded_job(tmp_path)
    assert spec.compare_thresholds == {"tps": 0.2}
    assert spec.method == "" and spec.recipe == ""  # not recorded: no default invented (not "none")
    # a newer writer's key and a section this version cannot read cost only themselves
    (tmp_path / "job.json").write_text(json.dumps({"method": "eagle3", "future_key": 1, "bench": {"unknown": 1},
                                                   "launch": {"tp": 2}}))
    spec = read_recorded_job(tmp_path / "job.json")
    assert (spec.method, spec.bench, spec.launch.tp) == ("eagle3", None, 2)
    (tmp_path / "job.json").write_text("[1, 2]")
    assert read_recorded_job(tmp_path) is None
    (tmp_path / "job.json").write_text("{not json")
    assert read_recorded_job(tmp_path) is None
    assert read_recorded_job(tmp_path / "absent") is None


def test_a_current_spec_reads_back_equal(tmp_path):
    src = OLD / "tiny-draft_model-k1-tp1-21a4f01b"
    shutil.copytree(src, tmp_path / "j")
    spec = read_recorded_job(tmp_path / "j")
    spec.write(tmp_path / "j" / "job.json")
    assert read_recorded_job(tmp_path / "j") == spec == JobSpec.read(tmp_path / "j" / "job.json")
