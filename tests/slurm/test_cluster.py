"""The local single-node Slurm cluster really schedules and runs jobs.

Covers what the submitter relies on: GPU requests (stand-in GPUs), submitit
single jobs and job arrays, and how submitit reports job state with and without
accounting (SPECDEC_SLURM_ACCOUNTING=1 runs slurmdbd; the default does not).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import submitit

JOB_TIMEOUT_S = 60


def _wait_done(jobs: list[submitit.Job], timeout_s: float = JOB_TIMEOUT_S) -> None:
    """job.result() blocks forever if a job dies without a result file; bound it."""
    deadline = time.monotonic() + timeout_s
    while not all(j.done() for j in jobs):
        if time.monotonic() > deadline:
            for j in jobs:
                j.cancel(check=False)
            logs = "\n".join(f"--- {j.job_id}\n{j.stdout()}\n{j.stderr()}" for j in jobs)
            squeue = subprocess.run(["squeue", "-a"], capture_output=True, text=True).stdout
            pytest.fail(f"jobs not done after {timeout_s}s\n{squeue}\n{logs}")
        time.sleep(0.5)


def _squeue_gone(job_id: str, timeout_s: float = JOB_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-t", "PD,R,CG,CF,S"], capture_output=True, text=True
        ).stdout
        if not out.strip():
            return
        time.sleep(0.3)
    pytest.fail(f"job {job_id} still queued/running after {timeout_s}s")


def _sacct_state(job: submitit.Job, timeout_s: float = 15) -> str:
    """State as submitit sees it via sacct, once final.

    The result pickle can appear before slurmctld has recorded the job's end in
    slurmdbd, so right after done() sacct may still say RUNNING/COMPLETING.
    Without accounting it is UNKNOWN for ever.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        state = job.get_info(mode="force").get("State") or "UNKNOWN"
        if state not in {"PENDING", "RUNNING", "COMPLETING", "REQUEUED"} or time.monotonic() > deadline:
            return state
        time.sleep(0.5)


def test_node_is_idle_with_four_gpus(slurm_cluster):
    out = subprocess.run(
        ["sinfo", "-h", "-N", "-n", slurm_cluster.node, "-o", "%T %G %P"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    assert out[0] in {"idle", "mixed", "allocated", "completing"}  # completing: a job of an earlier test ending
    assert out[1] == f"gpu:{slurm_cluster.gpus_per_node}" == "gpu:4"
    assert out[2] == "debug*"


def test_sbatch_gpus_per_node(slurm_cluster, tmp_path: Path):
    script = tmp_path / "gpu.sh"
    script.write_text(
        "#!/bin/bash\n"
        "echo GPUS_ON_NODE=$SLURM_GPUS_ON_NODE\n"
        "echo CVD=$CUDA_VISIBLE_DEVICES\n"
        "srun bash -c 'echo STEP_CVD=$CUDA_VISIBLE_DEVICES'\n"
    )
    out = tmp_path / "gpu.out"
    proc = subprocess.run(
        ["sbatch", "--wait", "--parsable", "--gpus-per-node=4", "--time=2", "-o", str(out), str(script)],
        capture_output=True, text=True, timeout=JOB_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = out.read_text().splitlines()
    assert "GPUS_ON_NODE=4" in lines
    assert "CVD=0,1,2,3" in lines
    assert "STEP_CVD=0,1,2,3" in lines


def test_too_many_gpus_is_rejected(slurm_cluster, tmp_path: Path):
    proc = subprocess.run(
        ["sbatch", "--gpus-per-node=5", "--time=1", "-o", "/dev/null", "--wrap", "true"],
        capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode != 0
    assert "not available" in proc.stderr  # "Requested node configuration is not available"


def test_submitit_job_result(slurm_cluster, tmp_path: Path):
    ex = submitit.SlurmExecutor(folder=tmp_path / "%j")
    ex.update_parameters(time=2, partition=slurm_cluster.partition, gpus_per_node=2)

    def work(x):  # nested => pickled by value, no import of this test module on the node
        import os

        return x * 2, os.environ.get("SLURM_JOB_ID"), os.environ.get("CUDA_VISIBLE_DEVICES")

    job = ex.submit(work, 21)
    _wait_done([job])
    value, slurm_job_id, cvd = job.result()
    assert value == 42
    assert slurm_job_id == job.job_id
    assert cvd == "0,1"
    # Without slurmdbd, sacct fails ("Bypassing sacct error") and the state of
    # every job reads UNKNOWN; done()/result() work off the result pickle.
    expected = "COMPLETED" if slurm_cluster.accounting else "UNKNOWN"
    assert _sacct_state(job) == expected


@pytest.mark.parametrize("how", ["map_array", "batch"])
def test_submitit_array(slurm_cluster, tmp_path: Path, how: str):
    ex = submitit.SlurmExecutor(folder=tmp_path / "%j")
    ex.update_parameters(time=2, array_parallelism=3)

    def task(i):
        import os

        return i, os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")

    if how == "map_array":
        jobs = ex.map_array(task, [0, 1, 2])
    else:
        with ex.batch():
            jobs = [ex.submit(task, i) for i in range(3)]
    assert len(jobs) == 3
    array_id = jobs[0].job_id.split("_")[0]
    assert [j.job_id for j in jobs] == [f"{array_id}_{i}" for i in range(3)]
    _wait_done(jobs)
    results = [j.result() for j in jobs]
    assert [r[0] for r in results] == [0, 1, 2]
    assert {r[1] for r in results} == {array_id}
    assert [r[2] for r in results] == ["0", "1", "2"]


def test_job_dying_without_result(slurm_cluster, tmp_path: Path):
    """A job that dies before submitit's runner writes a result: only sacct knows.

    With accounting, submitit sees FAILED and done() is True.  Without it,
    done() stays False forever (job.result() would hang), so a submitter must
    fall back to squeue/scontrol to notice the job is gone.
    """
    ex = submitit.SlurmExecutor(folder=tmp_path / "%j")
    ex.update_parameters(time=2, setup=["exit 3"])  # sbatch script exits before srun
    job = ex.submit(int, 1)
    _squeue_gone(job.job_id)
    if slurm_cluster.accounting:
        assert _sacct_state(job) == "FAILED"
        assert job.done(force_check=True)
    else:
        assert not job.done(force_check=True)
        assert job.state == "UNKNOWN"
