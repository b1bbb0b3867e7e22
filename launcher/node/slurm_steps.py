"""The allocation's nodes, the server's own Slurm steps, and what Slurm says of the job
(its state, start and time limit: launcher.node.point_status.SlurmJobView) (Slurm's CLI; stdlib only).

The server runs as `srun --overlap ...` steps of the job (see
launcher.contracts.job.LaunchSpec.server_step_prefix). Stopping the srun client
forwards SIGTERM to the step; a step that outlives that is cancelled by name
with `scancel JOBID.STEPID`, so nothing is left on any node.
"""
from __future__ import annotations

import os
import subprocess
import time
from typing import Callable, Mapping, Optional

from launcher.node import point_status


SERVER_STEP_NAME = "specdec-server"


class SlurmStepError(RuntimeError):
    pass


def in_allocation(env: Mapping[str, str] = os.environ) -> bool:
    return bool(env.get("SLURM_JOB_ID"))


def allocation_nodes(env: Mapping[str, str] = os.environ) -> list[str]:
    """The job's hostnames, head first (`scontrol show hostnames`)."""
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise SlurmStepError("SLURM_JOB_NODELIST is not set: multi-node servers need a Slurm allocation")
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                             timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise SlurmStepError(f"scontrol show hostnames {nodelist} failed: {e}") from None
    return [h for h in out.split() if h]


def job_steps(job_id: str, name: str) -> list[str]:
    """Step ids (JOBID.STEPID) of this job whose name is ``name``."""
    try:
        q = subprocess.run(["squeue", "-h", "-s", "-j", str(job_id), "-o", "%i %j"], capture_output=True,
                           text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    steps = []
    for line in q.stdout.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1].strip() == name:
            steps.append(parts[0])
    return steps


def cancel_steps(job_id: str, name: str, log: Callable[[str], None] = lambda m: None,
                 wait_s: float = 30.0) -> list[str]:
    """Cancel this job's steps named ``name``; returns the ids still listed after ``wait_s``."""
    steps = job_steps(job_id, name)
    if not steps:
        return []
    log(f"cancelling server step(s) {', '.join(steps)}")
    subprocess.run(["scancel", *steps], capture_output=True, timeout=30)
    deadline = time.monotonic() + wait_s
    left = steps
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = job_steps(job_id, name)
    return left


def slurm_job_id(env: Mapping[str, str]) -> Optional[str]:
    """This job's id as scontrol takes it (an array task's JOBID_TASK), None outside Slurm."""
    if env.get("SLURM_ARRAY_JOB_ID") and env.get("SLURM_ARRAY_TASK_ID"):
        return f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
    return env.get("SLURM_JOB_ID") or None


def read_slurm_job(env: Mapping[str, str]) -> Optional[point_status.SlurmJobView]:
    """What `scontrol -o show job` says of this job now; an empty view when it does not
    answer, None outside Slurm."""
    job_id = slurm_job_id(env)
    if not job_id:
        return None
    try:
        r = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return point_status.SlurmJobView()
    return point_status.parse_scontrol_job(r.stdout.strip())
