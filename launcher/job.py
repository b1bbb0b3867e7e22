"""The node-side job: what submitit runs on the allocation for one server configuration.

It runs common/specdec_aiperf/run.sh (server args before `--`, benchmark args
after), which owns the server's lifecycle, and turns its exit status into the
job's result. The argument is a plain dict (JobPlan.to_dict()).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from launcher.plan import RUN_SH


def job_environment(spec: dict) -> dict[str, str]:
    env = dict(os.environ)
    env.update({k: str(v) for k, v in spec.get("env", {}).items()})
    env.update({
        "HF_MODEL_CKPT": spec["model"],
        "SPECDEC_SERVER_CMD": spec["server_command"],
        "SPECDEC_HOST": spec["bind_host"],
        "SPECDEC_READY_TIMEOUT": str(spec["ready_timeout_s"]),
        "SPECDEC_JOB_DIR": spec["job_dir"],
        "SPECDEC_PYTHON": sys.executable,
    })
    if spec.get("port"):
        env["SPECDEC_PORT"] = str(spec["port"])
    repo = str(RUN_SH.parents[2])
    env["PYTHONPATH"] = repo + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_job(spec: dict) -> dict:
    job_dir = Path(spec["job_dir"])
    (job_dir / "logs").mkdir(parents=True, exist_ok=True)
    argv = ["bash", str(RUN_SH), *spec["server_flags"], "--", *spec["bench_args"]]
    env = job_environment(spec)
    print(f"[specdec] job {spec['server_id']} on {os.uname().nodename} "
          f"(SLURM_JOB_ID={os.environ.get('SLURM_JOB_ID', '-')})", flush=True)
    proc = subprocess.Popen(argv, env=env)

    def forward(signum, _frame):  # Slurm's SIGTERM/SIGUSR2 reach us: pass them on
        try:
            proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass

    old = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        rc = proc.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    summary_path = job_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else None
    result = {"server_id": spec["server_id"], "exit_code": rc, "job_dir": str(job_dir),
              "slurm_job_id": os.environ.get("SLURM_JOB_ID"), "summary": summary}
    (job_dir / "job_result.json").write_text(json.dumps(result, indent=2))
    if rc != 0:
        reason = ""
        err = job_dir / "logs" / "error.txt"
        if err.exists():
            reason = ": " + err.read_text().strip().splitlines()[0]
        raise RuntimeError(f"job {spec['server_id']} failed (exit {rc}){reason}; logs in {job_dir / 'logs'}")
    result["message"] = f"complete; results in {job_dir}"
    known = (summary or {}).get("known_answer")
    if known:
        from launcher.bench.known_answer import one_line
        result["message"] = f"complete ({one_line(known)}); results in {job_dir}"
    return result
