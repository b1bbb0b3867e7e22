"""The node-side job submitit runs on the allocation for one server configuration: the node's
entry, the one node module the login side imports (it hands ``run_job`` to submitit and renders
``node_command`` into the dry run; tests/test_dependencies.py allows that edge and no other).

It runs the node side on the job spec the launcher wrote
(`python -m launcher.node.serve_and_bench --spec JOB_DIR/job.json`, the same
command the standalone job.sbatch runs) and turns its exit status into the
job's result. The argument is the spec as a plain dict (JobSpec.to_dict()).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from launcher.golden import summary_line
from launcher.results.job_result import known_answer_line, write_job_result
from launcher.results.status import read_error
from launcher.results.summary import read_summary
from launcher.contracts.job import NODE_HELD_SIGNALS, TIME_LIMIT_SIGNAL, JobSpec, recorded_job_from_dict
from launcher.contracts.job_paths import JobPaths
from launcher.runtime.files import REPO_ROOT



def node_command(spec_path: str | Path, python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", "launcher.node.serve_and_bench", "--spec", str(spec_path)]


def node_environment(base: dict | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    repo = str(REPO_ROOT)
    if repo not in env.get("PYTHONPATH", "").split(os.pathsep):
        env["PYTHONPATH"] = repo + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def build_job_report(job_dir: Path, timeout_s: float = 900) -> str | None:
    """JOB_DIR/report/index.html (python -m launcher.report, in its own process: the
    report draws with matplotlib); its path, or None with the reason in the job log."""
    try:
        p = subprocess.run([sys.executable, "-m", "launcher.report", str(job_dir)], env=node_environment(),
                           capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError) as e:
        print(f"[specdec] report not built: {e}", flush=True)
        return None
    lines = (p.stdout if p.returncode == 0 else p.stderr).strip().splitlines()
    if p.returncode != 0 or not lines:
        print(f"[specdec] report not built: {lines[-1] if lines else f'exit {p.returncode}'}", flush=True)
        return None
    print(f"[specdec] report: {lines[-1]}", flush=True)
    return lines[-1]


def run_job(spec: dict) -> dict:
    """The job on its node (submitit's function): ``spec`` is job.json's content (JobSpec.to_dict)."""
    job = recorded_job_from_dict(spec)
    job_dir = Path(job.job_dir)
    paths = JobPaths(job_dir)
    paths.make_logs()
    spec_path = paths.spec
    if not spec_path.exists():  # submit writes it; a hand call may not have
        JobSpec.from_dict(spec).write(spec_path)
    print(f"[specdec] job {job.server_id} on {os.uname().nodename} "
          f"(SLURM_JOB_ID={os.environ.get('SLURM_JOB_ID', '-')})", flush=True)
    # The node starts with the stop signals blocked (it unblocks them once its handlers are in
    # place): Slurm's SIGUSR2 reaches every process of the job, and before, one that came while
    # the node was still importing ended it by the signal's default action (exit -12, no summary).
    held_signals = {getattr(signal, n) for n in NODE_HELD_SIGNALS if hasattr(signal, n)}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, held_signals)
    try:
        proc = subprocess.Popen(node_command(spec_path), env=node_environment())
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        raise

    def forward(signum, _frame):  # Slurm's SIGTERM reaches us: pass it on
        try:
            proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass

    held: list[int] = []

    def hold(signum, _frame):
        """Slurm's time-limit warning (--signal=USR2@N). submitit's own handler would end
        this process at once (UncompletedJobError), the job would end FAILED while the node
        still stops its servers and records why, and Slurm would then end the node too.
        The node gets it (from Slurm, and from here where only this process got it) and
        ends the job; submitit's handler runs after that (its requeue or its error)."""
        held.append(signum)
        try:
            proc.send_signal(signum)
        except ProcessLookupError:
            pass

    warning = getattr(signal, TIME_LIMIT_SIGNAL)
    old = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    old[warning] = signal.signal(warning, hold)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # ours, now that our handlers are in place
    try:
        rc = proc.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    summary = read_summary(job_dir)
    result = {"server_id": job.server_id, "exit_code": rc, "job_dir": str(job_dir),
              "slurm_job_id": os.environ.get("SLURM_JOB_ID"), "summary": summary}
    if job.report:  # the job's own report, so a cluster user opens it from the results folder
        result["report"] = build_job_report(job_dir)
    write_job_result(job_dir, result)
    if held and callable(old[warning]):  # submitit's handling of its signal, now that the node has ended
        old[warning](held[0], None)
    if rc != 0:
        err = read_error(job_dir)
        reason = f": {err}" if err else ""
        raise RuntimeError(f"job {job.server_id} failed (exit {rc}){reason}; logs in {paths.logs}")
    known = (summary or {}).get("known_answer")
    notes = [known_answer_line(known)] if known else []
    golden = summary_line((summary or {}).get("golden"))  # pass, or too small to judge (a fail fails the job)
    if golden:
        notes.append(golden)
    result["message"] = f"complete ({'; '.join(notes)}); results in {job_dir}" if notes else \
        f"complete; results in {job_dir}"
    return result
