"""Slurm job parameters and the rendered sbatch text. Pure functions.

submitit renders the script (its `_make_sbatch_string`); we compute the
parameters it is given, so a dry run shows exactly what a submission sends.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

from launcher.config.schema import ClusterConfig
from launcher.plan import JobPlan, shell_join
from launcher.server_args import compose_server_argv


def container_srun_args(cl: ClusterConfig) -> list[str]:
    """pyxis flags for srun."""
    if not cl.container_image:
        return []
    args = [f"--container-image={cl.container_image}"]
    if cl.container_mounts:
        args.append(f"--container-mounts={','.join(cl.container_mounts)}")
    args.append("--no-container-mount-home")
    return args


def slurm_parameters(cl: ClusterConfig, job_name: str) -> dict:
    """Parameters for submitit's SlurmExecutor.update_parameters (one resource shape)."""
    params: dict = {
        "job_name": job_name,
        "time": cl.time_min,
        "nodes": cl.nodes,
        "ntasks_per_node": 1,  # one task: the server must start once per node
        "srun_args": [*cl.srun_args, *container_srun_args(cl)],
        "array_parallelism": cl.array_parallelism,
        "signal_delay_s": 120,
    }
    if cl.partition:
        params["partition"] = cl.partition
    if cl.account:
        params["account"] = cl.account
    if cl.qos:
        params["qos"] = cl.qos
    if cl.gpus_per_node > 0:
        params["gpus_per_node"] = cl.gpus_per_node
    if cl.cpus_per_task:
        params["cpus_per_task"] = cl.cpus_per_task
    if cl.mem_gb:
        params["mem"] = f"{cl.mem_gb}GB"
    if cl.segment:
        params["additional_parameters"] = {"segment": cl.segment}
    return params


def describe_commands(job: JobPlan) -> list[str]:
    """Comment lines for the sbatch script: the exact commands each job runs."""
    server = compose_server_argv(job.server_command, job.model, job.server_flags, job.bind_host,
                                 job.port if job.port else "<free port>")
    bench = [sys.executable, "-m", "launcher.bench", *job.bench_args, "--url", "http://<host>:<port>"]
    return [
        f"# job {job.server_id}: {len(job.points)} client points, results in {job.job_dir}",
        f"#   server: {shell_join(server)}",
        f"#   bench:  {shell_join(bench)}",
        f"#   via:    {shell_join(job.run_sh_argv())}",
    ]


def submitit_command(folder: str | Path, python: str | None = None) -> str:
    """The command submitit's SlurmExecutor puts on the srun line."""
    return " ".join([shlex.quote(python or sys.executable), "-u -m submitit.core._submit", shlex.quote(str(folder))])


def sbatch_setup(cl: ClusterConfig, jobs: list[JobPlan]) -> list[str]:
    """Lines run by sbatch before srun: the commands as comments, and the container env."""
    setup = []
    for i, job in enumerate(jobs):
        if len(jobs) > 1:
            setup.append(f"# --- array task {i}")
        setup += describe_commands(job)
    if cl.container_image:
        setup.append(f"export CONTAINER_IMAGE={shlex.quote(cl.container_image)}")
    return setup


def render_sbatch(cl: ClusterConfig, jobs: list[JobPlan], folder: str | Path, job_name: str) -> str:
    """The sbatch script submitit will submit for these jobs (an array when several)."""
    from submitit.slurm.slurm import _make_sbatch_string

    params = slurm_parameters(cl, job_name)
    params["setup"] = sbatch_setup(cl, jobs)
    if len(jobs) > 1:
        params["map_count"] = len(jobs)
    folder = Path(folder)
    return _make_sbatch_string(command=submitit_command(folder / "%j", cl.node_python), folder=folder / "%j",
                               **params)
