"""Submission with submitit: one job per server configuration, grouped by
resource shape into job arrays; the local executor when cluster=local.

Jobs receive plain dicts (JobPlan.to_dict), never live objects.
"""
from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import submitit
from rich.console import Console
from rich.live import Live
from rich.table import Table

from launcher.contracts.job_paths import JobPaths
from launcher.engines import Engine
from launcher.login.config.schema import LauncherConfig
from launcher.node.job_entry import run_job
from launcher.login.plan import JobPlan, Plan
from launcher.login.sbatch import render_standalone, sbatch_setup, slurm_parameters
from launcher.results.job_end import finalize_job_dir
from launcher.results.status import JobProgress, read_error, read_progress
from launcher.results.summary import point_rows, read_summary

@dataclass
class Submitted:
    job: JobPlan
    handle: object  # submitit.Job
    gone_since: float | None = None  # first time squeue no longer listed it

    @property
    def job_id(self) -> str:
        return str(self.handle.job_id)

    def log_path(self) -> str:
        return str(self.handle.paths.stdout)


def write_job_files(cfg: LauncherConfig, job: JobPlan, eng: Engine) -> None:
    """Write what the node side reads (the job spec) and, on Slurm, the standalone
    script that reproduces the job with plain sbatch (``eng``: the plan's engine)."""
    paths = JobPaths(job.job_dir)
    paths.make_logs()
    job.write()
    if cfg.cluster.executor == "slurm":
        paths.standalone_script.write_text(render_standalone(cfg.cluster, job, f"specdec-{cfg.name}", eng))


def submitit_folder(plan: Plan) -> Path:
    return Path(plan.results_dir) / SUBMITIT_DIR


SUBMITIT_DIR = "_submitit"  # beside the jobs in the results folder: submitit's pickles and logs, a folder per job id
STAGING = "%j"  # submitit's folder template: the literal folder it stages in before the job id is known


def remove_staging_folder(folder: Path) -> None:
    """The empty literal "%j" folder submitit leaves: it stages the pickles there before the job
    id is known, and its local controller makes it again as it starts (after submit returned),
    so this runs after the submission and again once the jobs ended. Kept if not empty."""
    try:
        (folder / STAGING).rmdir()
    except OSError:
        pass


def make_executor(cfg: LauncherConfig, folder: Path, jobs: list[JobPlan], eng: Engine):
    cl = cfg.cluster
    if cl.executor == "local":
        ex = submitit.LocalExecutor(folder=str(folder / STAGING))
        # submitit's local jobs see CUDA_VISIBLE_DEVICES="" unless GPUs are asked for:
        # a GPU recipe on the local executor (recipe=gpu_smoke) would start vLLM on no device.
        ex.update_parameters(timeout_min=cl.time_min, gpus_per_node=max(0, int(cl.gpus_per_node)))
        return ex
    ex = submitit.SlurmExecutor(folder=str(folder / STAGING), python=cl.node_python)
    ex.update_parameters(**slurm_parameters(cl, f"specdec-{cfg.name}"))
    ex.update_parameters(setup=sbatch_setup(cl, jobs, eng))
    return ex


def submit(cfg: LauncherConfig, plan: Plan) -> list[Submitted]:

    folder = submitit_folder(plan)
    folder.mkdir(parents=True, exist_ok=True)
    for job in plan.jobs + ([plan.baseline] if plan.baseline else []):
        write_job_files(cfg, job, plan.engine)  # the baseline's too: its host job runs it
    ex = make_executor(cfg, folder, plan.jobs, plan.engine)
    specs = [j.to_dict() for j in plan.jobs]
    if len(specs) == 1:
        handles = [ex.submit(run_job, specs[0])]
    else:  # one resource shape per recipe: a single job array
        handles = ex.map_array(run_job, specs)
    out = [Submitted(j, h) for j, h in zip(plan.jobs, handles)]
    remove_staging_folder(folder)
    (Path(plan.results_dir) / "submission.json").write_text(json.dumps(
        [{"server_id": s.job.server_id, "job_id": s.job_id, "log": s.log_path(), "job_dir": s.job.job_dir,
          "submitted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())} for s in out], indent=2))
    return out


def points_complete(job: JobPlan, default: int = 0) -> int:
    """Points complete or skipped-as-complete, from summary.json."""
    try:
        summary = read_summary(job.job_dir)
        if summary is None or not isinstance(summary.get("points"), list):
            return default
        return sum(1 for p in point_rows(summary) if p.done)
    except (OSError, ValueError, KeyError, TypeError):
        return default


def job_progress(job: JobPlan) -> JobProgress:
    """What the node side reported so far (progress.json, written by the benchmark)."""
    return read_progress(job.job_dir) or JobProgress()


def job_end_reason(job: JobPlan) -> str | None:
    """Why a job ended, in words, from what the node side wrote: summary.json's
    job_end (the node job's own finalization), else logs/error.txt."""
    d = Path(job.job_dir)
    end = (read_summary(d) or {}).get("job_end") or {}
    if not isinstance(end, dict):
        end = {}
    if end.get("status") == "failed" and (end.get("reason") or end.get("cause")):
        return str(end.get("reason") or end.get("cause"))
    return read_error(d)


def finalize_lost_job(job: JobPlan, cause: str) -> None:
    """The node job could not finalize summary.json (it was SIGKILLed, or never
    started): do it here, from the files on disk, with ``cause`` in words."""
    d = Path(job.job_dir)
    if (read_summary(d) or {}).get("job_end"):  # the node job wrote its own end
        return
    try:
        finalize_job_dir(d, rc=-9, cause=cause, reason=cause,
                         points=[(p.dataset, p.temperature, p.concurrency) for p in job.points],
                         identity=job.identity())
    except OSError:
        pass


def head_task(handle):
    """The submitit job's task on the head node, the one that runs the node job. A multi-node
    allocation (nodes x 1 task) is a job of several tasks to submitit, done when every task
    wrote a result; but its srun runs one task (--nodes=1 --ntasks=1, launcher.login.sbatch),
    so only task 0 ever writes one: without accounting, the whole job would never be done."""
    try:
        return handle.task(0)
    except (AttributeError, ValueError, IndexError):
        return handle


def job_outcome(s: Submitted) -> tuple[bool, str]:
    """(ok, message) for a finished job; a failure's message is the reason in words."""
    try:
        res = head_task(s.handle).result()
    except Exception as e:  # submitit re-raises the job's exception
        reason = job_end_reason(s.job)
        if reason:
            return False, reason
        msg = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
        # submitit wraps the job's traceback and ends with log paths: the job's own
        # exception line (run_job's RuntimeError: the reason) is what to show
        raised = [ln for ln in msg if re.match(r"^[\w.]*(Error|Exception): ", ln)]
        tail = (raised or msg or [type(e).__name__])[-1]
        return False, tail[:600]
    if isinstance(res, dict) and res.get("exit_code", 0) != 0:
        return False, res.get("message", f"exit code {res.get('exit_code')}")
    return True, (res.get("message", "done") if isinstance(res, dict) else "done")


def left_queue_without_result(s: Submitted, grace_s: float = 30.0) -> bool:
    """A Slurm job that is no longer queued or running but wrote no result (killed,
    timed out, setup failed). Without accounting submitit cannot see this and
    would wait forever, so ask squeue directly."""

    result = Path(head_task(s.handle).paths.result_pickle)
    if type(s.handle).__name__ != "SlurmJob" or result.exists():
        return False
    try:
        q = subprocess.run(["squeue", "-h", "-j", s.job_id.split("_")[0]], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    if q.returncode == 0 and q.stdout.strip():
        s.gone_since = None
        return False
    first = getattr(s, "gone_since", None) or time.time()
    s.gone_since = first
    return time.time() - first > grace_s and not result.exists()


ENDED_CELL = "see below"  # an ended job's sentence (verdicts, results path, reason) is printed under the table
CURRENT_MAX = 28  # the "now" column: a short state, cut with an ellipsis, never a wrapped sentence


def short_state(current: str) -> str:
    """What a running job is doing, short: the point and its state, without the reason in
    brackets (the reason is printed whole once the job ends)."""
    text = " ".join(str(current or "").split())
    return text.split(" (", 1)[0]


def jobs_table(title: str, rows: list[tuple[str, str, str, str, str]]) -> Table:
    """The jobs as a table of short cells: (job id, server, state, points, now). No cell holds a
    sentence: "now" is cut to one line; an ended job says "see below"."""
    t = Table(title=title, expand=False)
    for col in ("job id", "server", "state", "points"):
        t.add_column(col, overflow="fold")
    t.add_column("now", overflow="ellipsis", no_wrap=True, max_width=CURRENT_MAX)
    for row in rows:
        t.add_row(*row)
    return t


def follow(subs: list[Submitted], poll_s: float = 1.0) -> bool:
    """Live progress until every job ends. True when all succeeded."""
    console = Console(stderr=True)
    start = time.time()
    outcomes: dict[str, tuple[bool, str]] = {}

    def table() -> Table:
        rows = []
        for s in subs:
            prog = job_progress(s.job)
            if s.job_id in outcomes:
                ok, _ = outcomes[s.job_id]
                state = "[green]DONE[/]" if ok else "[red]FAILED[/]"
                cur = ENDED_CELL
            else:
                try:
                    state = s.handle.state
                except Exception:  # noqa: BLE001 - state lookups can fail transiently
                    state = "?"
                cur = short_state(prog.current or "")
            done = prog.points_done or 0
            if s.job_id in outcomes:  # the final count: every point complete on disk
                done = points_complete(s.job, done)
            rows.append((s.job_id, s.job.server_id, state, f"{done}/{len(s.job.points)}", cur))
        return jobs_table(f"specdec jobs ({time.time() - start:.0f}s)", rows)

    with Live(table(), console=console, refresh_per_second=2, transient=not console.is_terminal) as live:
        while len(outcomes) < len(subs):
            for s in subs:
                if s.job_id in outcomes:
                    continue
                if head_task(s.handle).done():
                    outcomes[s.job_id] = job_outcome(s)
                elif left_queue_without_result(s):
                    cause = "the job was killed before it could record its end (it left the Slurm queue without a result)"
                    finalize_lost_job(s.job, cause)
                    outcomes[s.job_id] = (False, job_end_reason(s.job) or cause)
            live.update(table())
            if len(outcomes) < len(subs):
                time.sleep(poll_s)
    console.print(table())
    for folder in {Path(s.job.job_dir).parent / SUBMITIT_DIR for s in subs}:
        remove_staging_folder(folder)
    for line in outcome_lines([(s.job_id, s.job.server_id, *outcomes[s.job_id]) for s in subs]):
        console.print(line, soft_wrap=True, markup=False, highlight=False)
    return all(ok for ok, _ in outcomes.values())


def outcome_lines(outcomes: list[tuple[str, str, bool, str]]) -> list[str]:
    """Under the table: each job's outcome (a failure's reason, the known-answer verdict, the
    results path) whole, one unwrapped line each."""
    return [f"job {job_id} ({server}) {'DONE' if ok else 'FAILED'}: {msg}" for job_id, server, ok, msg in outcomes]
