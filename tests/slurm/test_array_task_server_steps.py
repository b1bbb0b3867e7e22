"""Two tasks of one job array run at the same time (cluster.array_parallelism > 1), each with a
server step named specdec-server. Slurm gives the last task the array's own id as its
SLURM_JOB_ID, and `squeue -s -j <that id>` lists the steps of EVERY task of the array: a job
that looked its server steps up by SLURM_JOB_ID cancelled another task's server (seen in
tests/e2e/test_e2e_speedup.py with both k's jobs at once: the k=1 job's baseline server
"CANCELLED" while it started). A job names itself as Slurm's JOBID_TASK (slurm_job_id), and
finds and cancels its own steps only (launcher/node/servers.py stop_server)."""
from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from launcher.node.slurm_steps import SERVER_STEP_NAME, cancel_steps, job_steps, slurm_job_id

ARRAY = """#!/bin/bash
#SBATCH --array=0-1
#SBATCH --output={out}/task-%A_%a.out
#SBATCH --time=5
srun --overlap --ntasks=1 --job-name={name} sleep 120 &
sleep 130
"""


def _task_env(task: str) -> dict:
    """SLURM_JOB_ID, SLURM_ARRAY_JOB_ID and SLURM_ARRAY_TASK_ID of a task, as its job sees them."""
    info = subprocess.run(["scontrol", "show", "job", task], capture_output=True, text=True, timeout=30).stdout
    m = re.search(r"JobId=(\d+) ArrayJobId=(\d+) ArrayTaskId=(\d+)", info)
    assert m, info
    return {"SLURM_JOB_ID": m[1], "SLURM_ARRAY_JOB_ID": m[2], "SLURM_ARRAY_TASK_ID": m[3]}


def _wait(pred, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if v := pred():
            return v
        time.sleep(0.5)
    pytest.fail("timed out")


def test_an_array_task_finds_and_cancels_its_own_server_step_only(slurm_cluster, tmp_path: Path):
    script = tmp_path / "array.sh"
    script.write_text(ARRAY.format(out=tmp_path, name=SERVER_STEP_NAME))
    array = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True,
                           timeout=60).stdout.strip()
    try:
        tasks = [f"{array}_0", f"{array}_1"]
        # both tasks running, each with its server step
        _wait(lambda: all(job_steps(t, SERVER_STEP_NAME) for t in tasks))
        envs = {t: _task_env(t) for t in tasks}
        master = next(t for t in tasks if envs[t]["SLURM_JOB_ID"] == envs[t]["SLURM_ARRAY_JOB_ID"])
        other = next(t for t in tasks if t != master)
        # the known answer: the array's own id lists both tasks' server steps
        assert len(job_steps(envs[master]["SLURM_JOB_ID"], SERVER_STEP_NAME)) == 2
        assert slurm_job_id(envs[master]) == master
        mine = job_steps(slurm_job_id(envs[master]), SERVER_STEP_NAME)
        assert [s.split(".")[0] for s in mine] == [master], mine

        assert cancel_steps(slurm_job_id(envs[master]), SERVER_STEP_NAME) == []
        assert job_steps(master, SERVER_STEP_NAME) == []
        assert len(job_steps(other, SERVER_STEP_NAME)) == 1  # the other task's server still runs
    finally:
        subprocess.run(["scancel", array], capture_output=True, timeout=30)
