"""The node job's lifecycle through common/specdec_aiperf/run.sh, with a fake
server (tests/node/fake_server.py) that starts in well under a second. The
real vLLM server is in test_node_real_server.py."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from node_testlib import (
    FAKE_MODEL, PYTHON, RUN_SH, error_line, job_env, leftovers, read, run_job, server_pid_from_log, start_job, wait_for,
)

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs Linux /proc")

WAIT_BENCH = ["--model", "fk", "--num_requests", "0", "--then_wait_s", "120"]


def bench(job_dir: Path, *extra: str) -> list[str]:
    return ["--model", "fk", "--save_dir", str(job_dir / "out"), "--num_requests", "0", *extra]


def bench_running(job_dir: Path) -> bool:
    return (job_dir / "out" / "spec_stats.json").exists()


def test_success_writes_ready_file_telemetry_and_stops_server(tmp_path):
    job = tmp_path / "job"
    rc, took = run_job(job, ["--served-model-name", "fk", "--kv-cache-memory-bytes", "2G", "--child"],
                       bench(job), SPECDEC_HOST="0.0.0.0", SPECDEC_STOP_GRACE="2")
    assert rc == 0, read(job / "run_sh.stderr")
    ready = json.loads((job / "server_ready.json").read_text())
    assert ready["startup_s"] > 0 and ready["engine_version"] == "fake-1.0"
    assert ready["url"] == f"http://127.0.0.1:{ready['port']}"  # bound to 0.0.0.0, reached on 127.0.0.1
    assert ready["bind_host"] == "0.0.0.0" and ready["served_model_name"] == "fk"
    argv = ready["argv"]
    assert argv[argv.index("--host") + 1] == "0.0.0.0" and argv[argv.index("--port") + 1] == str(ready["port"])
    assert argv[argv.index("--model") + 1] == str(FAKE_MODEL)  # not a `... serve` command: --model
    # the benchmark got the URL and could read the ready file
    stats = json.loads((job / "out" / "spec_stats.json").read_text())
    assert stats["url"] == ready["url"] and stats["server_ready"]["port"] == ready["port"]
    tele = json.loads((job / "gpu_telemetry.json").read_text())
    assert tele["kv_cache_cap_bytes"] == 2 * 2**30 and tele["kv_cache_cap_set"] is True
    assert not (job / "logs" / "error.txt").exists()
    log = read(job / "logs" / "job.log")
    for event in ("starting server", "server ready after", "starting benchmark", "benchmark finished",
                  "no server or benchmark process left", "job exits with status 0"):
        assert event in log
    assert re.search(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ", log, re.M)  # timestamped
    assert "fake engine core up" in read(job / "logs" / "server.log")
    # the fake's child ignores SIGTERM: it must have been SIGKILLed too
    assert leftovers(ready["pid"], ready["port"]) == []


def test_spec_metrics_flag_added_for_speculative_config(tmp_path):
    job = tmp_path / "job"
    spec = '{"method":"ngram","num_speculative_tokens":3}'
    rc, _ = run_job(job, ["--served-model-name", "fk", "--speculative-config", spec], bench(job))
    assert rc == 0, read(job / "run_sh.stderr")
    argv = json.loads((job / "server_ready.json").read_text())["argv"]
    assert argv[argv.index("--per-request-spec-decode-metrics") + 1] == "detailed"
    assert argv[argv.index("--speculative-config") + 1] == spec


def test_server_exiting_during_startup_fails_fast_with_log_tail(tmp_path):
    job = tmp_path / "job"
    fake = (f"{PYTHON} -c \"import sys,time; print('boom', flush=True); time.sleep(1); "
            "print('exiting at', repr(time.time()), flush=True); sys.exit(3)\"")
    rc, took = run_job(job, [], bench(job), SPECDEC_SERVER_CMD=fake, timeout=60)
    t_end = time.time()
    assert rc == 3
    m = re.search(r"exiting at ([0-9.]+)", read(job / "logs" / "server.log"))
    assert m, read(job / "logs" / "server.log")
    assert t_end - float(m.group(1)) < 5.0, "the job must fail within 5 s of the server's exit"
    err = error_line(job)
    assert "server exited with code 3 before it was ready" in err
    stderr = read(job / "run_sh.stderr")
    assert "boom" in stderr and "last server log lines" in stderr  # the tail is in the error output
    assert "boom" in read(job / "logs" / "job.log")
    assert not (job / "server_ready.json").exists()
    assert not (job / "out").exists(), "the benchmark must not run"


def test_not_ready_in_time(tmp_path):
    job = tmp_path / "job"
    rc, took = run_job(job, ["--startup_s", "60"], bench(job), SPECDEC_READY_TIMEOUT="2", SPECDEC_STOP_GRACE="2")
    assert rc == 3 and took < 15
    assert "not ready after 2 s" in error_line(job)
    assert leftovers(server_pid_from_log(job)) == []


def test_models_must_list_the_served_name(tmp_path):
    job = tmp_path / "job"
    rc, _ = run_job(job, ["--served-model-name", "fk", "--list_name", "other"], bench(job),
                    SPECDEC_READY_TIMEOUT="3", SPECDEC_STOP_GRACE="2")
    assert rc == 3
    assert "lists ['other'], not 'fk'" in error_line(job)


def test_server_dying_during_benchmark_stops_it(tmp_path):
    job = tmp_path / "job"
    rc, took = run_job(job, ["--served-model-name", "fk", "--die_after_s", "1.5", "--exit_code", "7"],
                       bench(job, "--then_wait_s", "120"), timeout=60)
    assert rc == 3 and took < 30
    err = error_line(job)
    assert err == "the main server exited with code 7 during the benchmark (see logs/server.log)", err
    log = read(job / "logs" / "job.log")
    assert "stopping the benchmark" in log and "fake server dying with code 7" in log  # why, with the tail
    assert "benchmark succeeded" not in log
    assert leftovers(needles=[str(job / "out")]) == []  # the benchmark process is gone


def _sigterm_or_sigint_during_benchmark(tmp_path, sig, expected_rc):
    job = tmp_path / "job"
    p = start_job(job, ["--served-model-name", "fk", "--child", "--ignore_term"], bench(job, "--then_wait_s", "120"),
                  SPECDEC_STOP_GRACE="2")
    try:
        wait_for(lambda: bench_running(job), 30, what="the benchmark to run")
        ready = json.loads((job / "server_ready.json").read_text())
        assert leftovers(ready["pid"]), "the server should be running now"
        t0 = time.monotonic()
        p.send_signal(sig)  # the run.sh process (bash exec'd into python)
        rc = p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert rc == expected_rc
    assert time.monotonic() - t0 < 2 + 5 + 3  # grace + SIGKILL wait, with margin
    assert f"interrupted by {signal.Signals(sig).name}" in error_line(job)
    assert leftovers(ready["pid"], ready["port"], needles=[str(job / "out")]) == []


def test_sigterm_to_job_leaves_no_server(tmp_path):
    _sigterm_or_sigint_during_benchmark(tmp_path, signal.SIGTERM, 143)


def test_sigint_to_job_leaves_no_server(tmp_path):
    _sigterm_or_sigint_during_benchmark(tmp_path, signal.SIGINT, 130)


def test_sigterm_during_startup(tmp_path):
    job = tmp_path / "job"
    p = start_job(job, ["--startup_s", "60", "--child"], bench(job), SPECDEC_STOP_GRACE="2")
    try:
        pid = wait_for(lambda: server_pid_from_log(job), 20, what="the server to start")
        wait_for(lambda: "fake engine core up" in read(job / "logs" / "server.log"), 20, what="the child")
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert rc == 143
    assert leftovers(pid) == []


def test_sigkill_to_job_still_stops_server(tmp_path):
    """No cleanup can run after SIGKILL: PR_SET_PDEATHSIG takes the server down."""
    job = tmp_path / "job"
    p = start_job(job, ["--served-model-name", "fk"], bench(job, "--then_wait_s", "120"))
    try:
        wait_for(lambda: bench_running(job), 30, what="the benchmark to run")
        ready = json.loads((job / "server_ready.json").read_text())
        p.kill()
        p.wait(10)
        wait_for(lambda: not leftovers(ready["pid"], needles=[str(job / "out")]), 10,
                 what="the server and benchmark to exit")
    finally:
        if p.poll() is None:
            p.kill()


def test_port_in_use_fails_fast(tmp_path):
    job = tmp_path / "job"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        rc, took = run_job(job, [], bench(job), SPECDEC_PORT=str(port), timeout=30)
    assert rc == 3 and took < 10
    assert f"port {port} (SPECDEC_PORT or the spec's port) is already in use" in error_line(job)


def test_explicit_port_is_used(tmp_path):
    job = tmp_path / "job"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc, _ = run_job(job, ["--served-model-name", "fk"], bench(job), SPECDEC_PORT=str(port))
    assert rc == 0
    assert json.loads((job / "server_ready.json").read_text())["port"] == port


def test_benchmark_status_is_the_job_status(tmp_path):
    job = tmp_path / "job"
    rc, _ = run_job(job, ["--served-model-name", "fk"], bench(job), SPECDEC_BENCH_MODULE="no_such_bench_module")
    assert rc == 1
    assert error_line(job).startswith("benchmark exited with code 1")


def test_missing_separator_is_a_usage_error(tmp_path):
    job = tmp_path / "job"
    p = subprocess.run(["bash", str(RUN_SH), "--served-model-name", "fk"], env=job_env(job),
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "missing `--`" in p.stderr
    assert error_line(job).startswith("usage error")


def test_missing_model_is_a_usage_error(tmp_path):
    env = job_env(tmp_path / "job")
    del env["HF_MODEL_CKPT"]
    p = subprocess.run(["bash", str(RUN_SH), "--"], env=env, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "HF_MODEL_CKPT" in p.stderr


def test_run_sh_finds_the_launcher_without_pythonpath(tmp_path):
    """A python that cannot import the launcher (e.g. the system one): run.sh
    puts the repository root on PYTHONPATH itself."""
    py = "/usr/bin/python3"
    if not os.path.exists(py) or subprocess.run([py, "-c", "import launcher"], cwd=tmp_path,
                                                capture_output=True).returncode == 0:
        pytest.skip("needs a python3 that cannot import the launcher on its own")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["SPECDEC_PYTHON"] = py
    p = subprocess.run(["bash", str(RUN_SH), "--help"], env=env, cwd=tmp_path, capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0 and "usage: run.sh" in p.stdout


def test_default_job_dir_is_under_cwd(tmp_path):
    env = job_env(tmp_path)
    del env["SPECDEC_JOB_DIR"]
    p = subprocess.run(["bash", str(RUN_SH), "--served-model-name", "fk", "--", "--model", "fk", "--save_dir",
                        str(tmp_path / "out"), "--num_requests", "0"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    dirs = list(tmp_path.glob("specdec_job_*"))
    assert len(dirs) == 1 and (dirs[0] / "server_ready.json").exists() and (dirs[0] / "logs" / "job.log").exists()


def test_launcher_job_contract(tmp_path):
    """launcher/node/job_entry.py's run_job runs the node side on the job spec and reads
    logs/error.txt's first line on failure."""
    from launcher.node.job_entry import run_job as launcher_run_job
    from launcher.contracts.job import JobSpec

    def spec(job_dir, flags):
        return JobSpec(recipe="t", server_id="fake-job", job_dir=str(job_dir), model=str(FAKE_MODEL), engine="vllm",
                       served_name="fk", server_command=f"{PYTHON} {Path(__file__).with_name('fake_server.py')}",
                       bind_host="0.0.0.0", ready_timeout_s=60, port=None, server_flags=flags,
                       bench_module="mini_client", env={"PYTHONPATH": str(Path(__file__).parent)},
                       bench_args=["--model", "fk", "--save_dir", str(job_dir / "out"), "--num_requests", "0"]
                       ).to_dict()

    ok = launcher_run_job(spec(tmp_path / "ok", ["--served-model-name", "fk"]))
    assert ok["exit_code"] == 0
    assert (tmp_path / "ok" / "server_ready.json").exists() and (tmp_path / "ok" / "out" / "spec_stats.json").exists()
    with pytest.raises(RuntimeError, match=r"failed \(exit 3\): the main server exited with code 5 before it was ready \(\d+\.\d s after start\) "
                       r"\(see logs/server.log\)"):
        launcher_run_job(spec(tmp_path / "bad", ["--served-model-name", "fk", "--startup_s", "0.3",
                                                 "--die_after_s", "0", "--exit_code", "5", "--list_name", "x"]))


def test_an_engine_that_dies_of_sigill_is_named_with_its_signal_and_log(tmp_path):
    """The engine child dies of SIGILL and its API server exits 0 (as vLLM's does): the
    job's error names the server, the engine, the signal and the log that holds it."""
    job = tmp_path / "job"
    rc, took = run_job(job, ["--served-model-name", "fk", "--engine_dies_after_s", "3"],
                       bench(job, "--then_wait_s", "120"), timeout=60)
    assert rc == 3 and took < 30
    err = error_line(job)
    assert re.fullmatch(r"the main server's engine \(EngineCore_DP0, pid \d+\) died of SIGILL during the benchmark "
                        r"\(`Fatal Python error: Illegal instruction` in logs/server\.log\); its API server "
                        r"(then exited with code 0|was still running)", err), err
    assert "Fatal Python error: Illegal instruction" in read(job / "logs" / "server.log")


def test_a_stopped_server_is_named_as_not_answering(tmp_path):
    """SIGSTOP to the API server while the benchmark runs: the watchdog's probes get no
    answer; after SPECDEC_UNANSWERED_TIMEOUT the job stops and says since when."""
    job = tmp_path / "job"
    p = start_job(job, ["--served-model-name", "fk"], bench(job, "--then_wait_s", "120"),
                  SPECDEC_UNANSWERED_TIMEOUT="6", SPECDEC_STOP_GRACE="2")
    try:
        wait_for(lambda: bench_running(job) or p.poll() is not None, 60, what="the benchmark")
        pid = server_pid_from_log(job)
        t_stop = time.time()
        os.kill(pid, signal.SIGSTOP)
        rc = p.wait(timeout=60)
        took = time.time() - t_stop
    finally:
        if p.poll() is None:
            p.kill()
    assert rc == 3 and 3.5 <= took < 25, took  # 6 s from its last answer, up to one probe interval (2 s) before
    err = error_line(job)
    assert re.fullmatch(r"the main server stopped answering during the benchmark: no answer to its readiness probe "
                        r"since \d\d:\d\d:\d\dZ \(\d+ s; last probe: GET /health no answer within 5 s\); its API "
                        r"server process is stopped \(SIGSTOP or a debugger\) \(see logs/server\.log\)", err), err
    since = re.search(r"since (\d\d:\d\d:\d\d)Z", err).group(1)
    assert time.strftime("%H:%M:%S", time.gmtime(t_stop - 3)) <= since <= time.strftime("%H:%M:%S", time.gmtime(t_stop))
    assert leftovers(pid) == []  # the stopped server was ended (SIGCONT with the SIGTERM)


def test_a_benchmark_that_fails_while_its_server_is_silent_failed_because_of_it(tmp_path):
    """The benchmark fails on its own (a request timed out) long before
    SPECDEC_UNANSWERED_TIMEOUT: the server gave no answer meanwhile, so that is the job's
    error, not the benchmark's exit code."""
    job = tmp_path / "job"
    p = start_job(job, ["--served-model-name", "fk"],
                  bench(job, "--then_wait_s", "2", "--then_request", "--timeout_s", "8"), SPECDEC_STOP_GRACE="2")
    try:
        wait_for(lambda: bench_running(job) or p.poll() is not None, 60, what="the benchmark")
        pid = server_pid_from_log(job)
        os.kill(pid, signal.SIGSTOP)
        rc = p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert rc == 3, read(job / "logs" / "job.log")[-3000:]
    err = error_line(job)
    assert err.startswith("the main server stopped answering during the benchmark: no answer to its readiness "
                          "probe since "), err
    assert "mini_client: the last request failed" in read(job / "run_sh.stdout") + read(job / "run_sh.stderr")
    assert leftovers(pid) == []
