"""The node job's key handling and input checks, through run.sh with the fake
server (fast); the real-stack versions are in tests/e2e/test_e2e_faults.py."""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from node_testlib import FAKE_SERVER_CMD, error_line, read, run_job, start_job, wait_for

from tests.support.stack import AIPERF


def server_environ(pid: int) -> dict:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(kv.decode().split("=", 1) for kv in raw if b"=" in kv)


def files_holding(root: Path, needle: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def test_off_loopback_the_job_generates_a_key_passed_only_through_the_environment(tmp_path):
    job = tmp_path / "job"
    p = start_job(job, ["--served-model-name", "fake"], ["--save_dir", str(job / "out")],
                  SPECDEC_HOST="0.0.0.0", SPECDEC_BENCH_MODULE="key_client")
    try:
        check = wait_for(lambda: (job / "out" / "key_check.json").exists() and
                         json.loads((job / "out" / "key_check.json").read_text()), 60, what="the key check")
        pid = json.loads((job / "server_ready.json").read_text())["pid"]
        env = server_environ(pid)
        key = env["VLLM_API_KEY"]
        assert key not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        (job / "out" / "release").write_text("")
        assert p.wait(60) == 0, read(job / "run_sh.stderr")[-2000:]
    finally:
        if p.poll() is None:
            p.kill()
    assert check["sha256"] == hashlib.sha256(key.encode()).hexdigest()  # the client got the server's key
    assert (check["with_key"], check["without_key"]) == (200, 401)  # readiness passed with it too
    assert not check["vllm_api_key_in_client_env"]
    assert "generated for this job" in read(job / "logs" / "job.log")
    assert files_holding(job, key) == []  # job.log, server.log, run.sh's stdout/stderr, ...


def test_a_key_from_the_environment_is_used_on_loopback_too(tmp_path):
    job = tmp_path / "job"
    p = start_job(job, ["--served-model-name", "fake"], ["--save_dir", str(job / "out")],
                  SPECDEC_BENCH_MODULE="key_client", SPECDEC_API_KEY="user-key-123456")
    try:
        wait_for(lambda: (job / "out" / "key_check.json").exists(), 60, what="the key check")
        (job / "out" / "release").write_text("")
        assert p.wait(60) == 0
    finally:
        if p.poll() is None:
            p.kill()
    check = json.loads((job / "out" / "key_check.json").read_text())
    assert (check["with_key"], check["without_key"]) == (200, 401)
    assert files_holding(job, "user-key-123456") == []


def test_readiness_401_is_an_immediate_clear_error(tmp_path):
    job = tmp_path / "job"
    t0 = time.monotonic()
    rc, _ = run_job(job, ["--served-model-name", "fake", "--require_key", "another-key"],
                    ["--save_dir", str(job / "out")], SPECDEC_READY_TIMEOUT="300", SPECDEC_BENCH_MODULE="key_client")
    took = time.monotonic() - t0
    assert rc == 3
    assert took < 30  # not the 300 s readiness timeout
    err = error_line(job)
    assert err.startswith("server refused the readiness probe: GET /v1/models -> 401 without an API key"), err
    assert "SPECDEC_API_KEY" in err


def test_api_key_in_server_args_is_refused_before_the_server_starts(tmp_path):
    job = tmp_path / "job"
    rc, _ = run_job(job, ["--served-model-name", "fake", "--api-key", "leaky-secret-1"],
                    ["--save_dir", str(job / "out")], SPECDEC_BENCH_MODULE="key_client")
    assert rc == 2
    assert error_line(job).startswith("server arguments: --api-key on the command line is refused (fix: remove "
                                      "--api-key from the server arguments and export SPECDEC_API_KEY=<key>")
    assert not (job / "logs" / "server.log").exists()


def test_missing_dataset_stops_the_job_before_the_server_starts(tmp_path):
    """The real benchmark's arguments: a missing dataset is an input error (exit 2)
    before any server start; summary.json lists the points as not run, with why."""
    job = tmp_path / "job"
    t0 = time.monotonic()
    rc, _ = run_job(job, ["--served-model-name", "fake"],
                    ["--model", "fake", "--tokenizer", "fake/tok", "--mtbench", "/nonexistent/q.jsonl",
                     "--temperature", "0", "--concurrency", "1", "2", "--save_dir", str(job),
                     "--aiperf", str(AIPERF)],
                    SPECDEC_BENCH_MODULE="launcher.bench", SPECDEC_SERVER_CMD=FAKE_SERVER_CMD)
    assert rc == 2 and time.monotonic() - t0 < 30
    assert error_line(job) == ("input check failed before the server started: sweep.dataset_paths.mtbench: "
                               "/nonexistent/q.jsonl: no such file (fix: point sweep.dataset_paths.mtbench at the "
                               "dataset file)")
    assert not (job / "logs" / "server.log").exists()
    s = json.loads((job / "summary.json").read_text())
    assert [(p["dir"], p["status"]) for p in s["points"]] == [("mtbench/t0_c1", "not_run"), ("mtbench/t0_c2", "not_run")]
    assert s["job_end"]["reason"] == ("input check failed: sweep.dataset_paths.mtbench: /nonexistent/q.jsonl: no such "
                                      "file (fix: point sweep.dataset_paths.mtbench at the dataset file); "
                                      "0 of 2 points complete, 2 not run")
