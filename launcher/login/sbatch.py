"""Slurm job parameters and the rendered sbatch texts. Pure functions.

Two scripts per submission: submitit's (its own `_make_sbatch_string`, fed
the parameters we compute, so a dry run shows exactly what a submission sends)
and, per job, a standalone `job.sbatch` that plain `sbatch` runs as is (the
same node command on the same job spec, no pickle).

Where the container runs (cluster.container_scope): "server" (default) puts
the pyxis flags on the server's own srun step only (launcher.contracts.job.LaunchSpec),
the job's orchestration runs from this checkout's environment; "job" puts them
on the job's srun line, so the image needs the repository mounted and the node
side's dependencies.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

from submitit.slurm.slurm import _make_sbatch_string

from launcher.login.config.schema import ClusterConfig
from launcher.node.job_entry import node_command
from launcher.runtime.files import REPO_ROOT
from launcher.contracts import placement
from launcher.contracts.job import TIME_LIMIT_SIGNAL, TIME_LIMIT_WARNING_S, JobSpec, shell_join
from launcher.contracts.job_paths import JobPaths
from launcher.contracts.server_steps import disagg_env, router_argv, server_step
from launcher.engines import Engine


def container_srun_args(cl: ClusterConfig) -> list[str]:
    """pyxis flags for the job's srun line (container_scope=job only; with the
    default scope they go on the server's step, see LaunchSpec.server_step_prefix)."""
    if not cl.container_image or cl.container_scope != "job":
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
        # multi-node: the job itself is one task on the head node; the server's own
        # steps (one per node) are started by the node side
        "srun_args": [*cl.srun_args, *container_srun_args(cl), *(["--nodes=1", "--ntasks=1"] if cl.nodes > 1 else [])],
        "array_parallelism": cl.array_parallelism,
        "signal_delay_s": TIME_LIMIT_WARNING_S,  # submitit's --signal=USR2@N
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


def describe_commands(job: JobSpec, eng: Engine) -> list[str]:
    """Comment lines for the sbatch script: the exact commands each job runs (``eng``: the
    engine the plan resolved)."""
    L = job.launch
    port = job.port if job.port else "<free port>"
    lines = [f"# job {job.server_id}: {len(job.points)} client points, results in {job.job_dir}",
             f"#   node:   {shell_join(node_command(JobPaths(job.job_dir).spec))}"]
    if job.topology is not None and job.topology.kind == "disagg":  # each server its own process, then the router

        t = job.topology
        urls: dict[str, list[str]] = {"prefill": [], "decode": []}
        srun = L.server == "srun"
        if t.placement == "split":
            lines.append(f"#   placement: {placement.describe(t.roles(), t.server_nodes)}; the router on node 0")
        for n, (role, i) in enumerate(t.roles()):
            node = t.node_of(n)
            addr = f"<node{node} address>" if srun else "<host>"
            env = disagg_env(job, eng, 0, side_channel_host=addr if srun else None)
            env = {k: (f"<free port {role}{i}>" if v == "0" else v) for k, v in env.items()}
            argv = server_step(job, eng, job.bind_host, f"<{role}{i} port>", node=f"<node{node}>" if srun else None,
                               disagg_role=role)
            lines.append(f"#   {role} {i}: {' '.join(f'{k}={shell_join([v])}' for k, v in env.items())} "
                         f"{shell_join(argv)}")
            urls[role].append(f"http://{addr}:<{role}{i} port>")
        router = router_argv(job, eng, "<router port>", urls["prefill"], urls["decode"], "<router metrics port>")
        lines.append(f"#   router: {shell_join(router)}")
    elif L.nodes > 1:
        for rank in range(L.nodes):
            argv = server_step(job, eng, job.bind_host, port, node=f"<node{rank}>", rank=rank, head="<node0>",
                               rpc_port="<rpc port>")
            lines.append(f"#   server node {rank}: {shell_join(argv)}")
    else:
        argv = server_step(job, eng, job.bind_host, port)
        lines.append(f"#   server: {shell_join(argv)}")
    if job.bench is not None:  # launcher.bench reads the spec
        bench = [job.python or sys.executable, "-m", job.bench_module, "--spec", str(JobPaths(job.job_dir).spec),
                 "--url", "http://<host>:<port>"]
    else:
        bench = [job.python or sys.executable, "-m", job.bench_module, *job.bench_args, "--url", "http://<host>:<port>"]
    lines.append(f"#   bench:  {shell_join(bench)}")
    return lines


def submitit_command(folder: str | Path, python: str | None = None) -> str:
    """The command submitit's SlurmExecutor puts on the srun line."""
    return " ".join([shlex.quote(python or sys.executable), "-u -m submitit.core._submit", shlex.quote(str(folder))])


def sbatch_setup(cl: ClusterConfig, jobs: list[JobSpec], eng: Engine) -> list[str]:
    """Lines run by sbatch before srun: the commands as comments."""
    setup = []
    for i, job in enumerate(jobs):
        if len(jobs) > 1:
            setup.append(f"# --- array task {i}")
        setup += describe_commands(job, eng)
    return setup


def render_sbatch(cl: ClusterConfig, jobs: list[JobSpec], folder: str | Path, job_name: str, eng: Engine) -> str:
    """The sbatch script submitit will submit for these jobs (an array when several)."""
    params = slurm_parameters(cl, job_name)
    params["setup"] = sbatch_setup(cl, jobs, eng)
    if len(jobs) > 1:
        params["map_count"] = len(jobs)
    folder = Path(folder)
    return _make_sbatch_string(command=submitit_command(folder / "%j", cl.node_python), folder=folder / "%j",
                               **params)


def sbatch_directives(cl: ClusterConfig, job_name: str, paths: JobPaths) -> list[str]:
    """#SBATCH lines for one standalone job (the same resource shape submitit asks for)."""
    p = slurm_parameters(cl, job_name)
    d = [f"--job-name={p['job_name']}", f"--output={paths.slurm_output('out')}", f"--error={paths.slurm_output('err')}",
         "--open-mode=append", f"--time={p['time']}", f"--nodes={p['nodes']}",
         f"--ntasks-per-node={p['ntasks_per_node']}", f"--signal={TIME_LIMIT_SIGNAL.removeprefix('SIG')}@{p['signal_delay_s']}"]
    for key, flag in (("partition", "partition"), ("account", "account"), ("qos", "qos"),
                      ("gpus_per_node", "gpus-per-node"), ("cpus_per_task", "cpus-per-task"), ("mem", "mem")):
        if key in p:
            d.append(f"--{flag}={p[key]}")
    for k, v in p.get("additional_parameters", {}).items():
        d.append(f"--{k}={v}")
    return [f"#SBATCH {x}" for x in d]


def render_standalone(cl: ClusterConfig, job: JobSpec, job_name: str, eng: Engine) -> str:
    """A self-contained sbatch script for one job: `sbatch JOB_DIR/job.sbatch` runs
    it as is, on the job spec beside it, and reproduces the job."""
    paths = JobPaths(job.job_dir)
    node = node_command(paths.spec, cl.node_python)
    run = shell_join(node)
    if cl.container_scope == "job" and cl.container_image:
        run = shell_join(["srun", "--ntasks=1", *cl.srun_args, *container_srun_args(cl)]) + " " + run
    lines = ["#!/bin/bash", *sbatch_directives(cl, job_name, paths), "",
             f"# specdec job {job.server_id}: {len(job.points)} client point(s); the job spec is",
             f"# {paths.spec} (server, points, gates, timeouts). Submit with: sbatch {paths.standalone_script}",
             *describe_commands(job, eng)[2:], "",
             "set -euo pipefail",
             f"export PYTHONPATH={shlex.quote(str(REPO_ROOT))}${{PYTHONPATH:+:$PYTHONPATH}}",
             f"mkdir -p {shlex.quote(str(paths.logs))}",
             f"cd {shlex.quote(str(paths.folder))}",
             f"exec {run}", ""]
    return "\n".join(lines)
