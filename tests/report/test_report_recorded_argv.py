"""The report shows the server argv the job recorded and never rebuilds one from job.json (issue 52:
report/html.py looked the engine up again to rebuild an argv the job had already recorded)."""
from __future__ import annotations

from types import SimpleNamespace

from launcher.contracts.job import JobSpec
from launcher.contracts.server_ready import ServerReady, write_server_ready
from launcher.report.html import provenance_block, recorded_server_argv
from launcher.results.job_dir import Job


def job_with(tmp_path, points=(), spec=None) -> Job:
    return Job(path=tmp_path, summary={}, points=list(points), spec=spec)


def test_the_argv_is_the_one_a_point_recorded(tmp_path):
    write_server_ready(tmp_path, ServerReady(argv=["vllm", "serve", "--from-ready"]))
    point = SimpleNamespace(configuration={"serving": {"server_argv": ["vllm", "serve", "--from-point"]}})
    assert recorded_server_argv(job_with(tmp_path, [point])) == ["vllm", "serve", "--from-point"]


def test_without_a_point_it_is_the_one_server_ready_recorded(tmp_path):
    write_server_ready(tmp_path, ServerReady(argv=["vllm", "serve", "--from-ready"]))
    assert recorded_server_argv(job_with(tmp_path)) == ["vllm", "serve", "--from-ready"]


def test_nothing_recorded_shows_no_argv_rather_than_a_rebuilt_one(tmp_path):
    spec = JobSpec(recipe="r", server_id="s", job_dir=str(tmp_path), model="/m", served_name="t",
                   server_command="python3 -m sglang.launch_server", server_flags=["--tp-size", "1"], engine="sglang")
    job = job_with(tmp_path, spec=spec)
    assert recorded_server_argv(job) == []
    assert "server argv" not in provenance_block(job)
