"""`python -m launcher [recipe=NAME] [key=value ...]`: compose, validate, plan, submit."""
from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from omegaconf import OmegaConf

from launcher.contracts.job_paths import JobPaths
from launcher.login.config.compose import compose_recipe
from launcher.login.config.check_sweep import ignored_requests_per_concurrency
from launcher.login.errors import UserError
from launcher.login.prepare import Invalid, prepare
from launcher.login.sbatch import describe_commands, render_sbatch, render_standalone
from launcher.login import submit as submitting
from launcher.login.submit import submitit_folder, write_job_files

USAGE = """usage: python -m launcher [recipe=NAME] [GROUP=OPTION ...] [KEY=VALUE ...] [--cfg]

Compose a recipe from recipes/ (Hydra), validate it, plan it and submit it.
  recipe=qwen3_dflash          pick a recipe (default: smoke, the tiny CPU model)
  cluster=gb300                any group: model, draft, parallel, cluster, sweep
  sweep.concurrencies=[1,8,32] any field
  dry_run=true                 print the plan and the sbatch scripts; write and submit nothing
  render_only=true             write each job's folder (job.json; on Slurm job.sbatch); submit nothing
  wait=true                    follow the jobs until they end (default on the local executor)
  output_dir=PATH              results go to PATH/<recipe>/<server_id>/
  report=false                 build no HTML report (default: each job builds its own, and a waited-for
                               run ends with the results table and RESULTS/report/index.html)
  --cfg                        print the composed recipe and exit
"""


def _err(line: str) -> None:
    print(f"error: {line}", file=sys.stderr)


def print_plan(cfg, plan) -> None:

    out = sys.stdout
    out.write(f"recipe {plan.recipe}: {len(plan.jobs)} job(s), {plan.num_points} client point(s); "
              f"cluster {cfg.cluster.name} ({cfg.cluster.executor})\n")
    out.write(f"results: {plan.results_dir}\n")
    ignored = ignored_requests_per_concurrency(cfg)
    if ignored:
        out.write(f"sweep.num_requests_per_concurrency: ignored for C={', '.join(map(str, ignored))} "
                  f"(not in sweep.concurrencies {list(cfg.sweep.concurrencies)})\n")
    for job in plan.jobs:
        out.write(f"\njob {job.server_id}  ->  {job.job_dir}\n")
        for p in job.points:
            out.write(f"  point {p.id:<28} T={p.temperature:g} C={p.concurrency} dataset={p.dataset}\n")
    if plan.baseline:
        out.write(f"\nbaseline {plan.baseline.server_id}  ->  {plan.baseline.job_dir}\n"
                  f"  the same {len(plan.baseline.points)} point(s) without speculation, run by job "
                  f"{plan.jobs[0].server_id} after its own (one restart, shared with the lossless check)\n")
    if cfg.cluster.executor == "slurm":
        out.write("\n# ---- sbatch script (submitit) ----\n")
        out.write(render_sbatch(cfg.cluster, plan.jobs, submitit_folder(plan), f"specdec-{cfg.name}", plan.engine))
        out.write("\n")
        for job in plan.jobs:  # written beside each job's spec on submission, or by render_only=true
            out.write(f"\n# ---- standalone script {JobPaths(job.job_dir).standalone_script} (plain `sbatch` "
                      "runs it once render_only=true has written the job folder) ----\n")
            out.write(render_standalone(cfg.cluster, job, f"specdec-{cfg.name}", plan.engine))
    else:
        out.write("\n# ---- local executor commands ----\n")
        for job in plan.jobs:
            out.write("\n".join(describe_commands(job, plan.engine)) + "\n")


class _UnknownOption(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # an option we do not know: one line of ours, exit 2
        unknown = message.partition(": ")[2].split() or [message]
        raise _UnknownOption(unknown[0])


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m launcher", add_help=False)
    p.add_argument("-h", "--help", action="store_true")
    p.add_argument("--cfg", action="store_true")
    p.add_argument("overrides", nargs="*")
    return p


def render_only(cfg, plan) -> int:
    """Write every job's folder (the spec and, on Slurm, the standalone script) for
    users who submit by hand; nothing is submitted."""

    for job in plan.jobs + ([plan.baseline] if plan.baseline else []):
        write_job_files(cfg, job, plan.engine)
    print(f"wrote {len(plan.jobs)} job folder(s) under {plan.results_dir}; nothing submitted")
    for job in plan.jobs:
        if cfg.cluster.executor == "slurm":
            print(f"  sbatch {JobPaths(job.job_dir).standalone_script}")
        else:
            print("  " + describe_commands(job, plan.engine)[1].partition("node:")[2].strip())
    if plan.baseline:
        print(f"  (baseline {plan.baseline.job_dir}: run by job {plan.jobs[0].server_id})")
    return 0


def one_at_a_time(cfg, plan, wait: bool) -> bool:
    """The local executor starts every job at once; on GPUs (cluster.gpus_per_node > 0) the
    jobs of a sweep (one server per k / forced length) would share the same GPU(s) and
    measure each other, so they run one after the other (when the launcher waits)."""
    return cfg.cluster.executor == "local" and cfg.cluster.gpus_per_node > 0 and len(plan.jobs) > 1 and wait


def run_one_at_a_time(cfg, plan) -> int:
    """Each job of the plan submitted and followed alone, in plan order (the first hosts
    the matched baseline), then the speedups over all of them."""


    print(f"{len(plan.jobs)} jobs on the local executor with GPUs: one at a time, so that no two servers "
          f"share the GPU(s); results: {plan.results_dir}")
    ok = True
    for i, job in enumerate(plan.jobs):
        one = replace(plan, jobs=[job], baseline=plan.baseline if i == 0 else None)
        try:
            subs = submitting.submit(cfg, one)
        except Exception as e:  # noqa: BLE001 - executor errors: one line, not a traceback
            _err(f"submission failed: {str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__}")
            return 1
        for s in subs:
            print(f"  job {i + 1}/{len(plan.jobs)} {s.job_id}  {s.job.server_id}\n    log: {s.log_path()}\n"
                  f"    results: {s.job.job_dir}")
        ok = submitting.follow(subs) and ok
    if plan.baseline:
        subprocess.run([sys.executable, "-m", "launcher.speedup", plan.results_dir], check=False)
    end_of_run(plan.results_dir, cfg.report)
    print(f"{'all jobs succeeded' if ok else 'some jobs FAILED'}; results: {plan.results_dir}")
    return 0 if ok else 1


def end_of_run(results_dir: str, report: bool) -> None:
    """The results tables, the verdicts and (report=true) the HTML report's path, printed by
    launcher.report.end_of_run in its own process: the login side imports no reader of results."""
    sys.stdout.flush()
    subprocess.run([sys.executable, "-m", "launcher.report.end_of_run", results_dir,
                    *(() if report else ("--no-report",))], check=False)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _parser().parse_intermixed_args(argv)
    except _UnknownOption as e:
        _err(f"{e}: unknown option (fix: use key=value overrides; see --help)")
        return 2
    if args.help:
        print(USAGE)
        return 0
    show_cfg, overrides = args.cfg, args.overrides
    try:

        cfg = compose_recipe(overrides)
        if show_cfg:
            try:
                print(OmegaConf.to_yaml(OmegaConf.structured(cfg)))
            except BrokenPipeError:  # `--cfg | head`
                sys.stderr.close()
            return 0
        try:
            plan = prepare(cfg)
        except Invalid as invalid:
            for e in invalid.errors:
                _err(e.line())
            return 2
        for note in plan.notes:
            print(f"note: {note}")
    except UserError as e:
        _err(e.line())
        return e.exit_code

    if cfg.dry_run:
        print_plan(cfg, plan)
        return 0
    if cfg.render_only:
        return render_only(cfg, plan)


    wait = cfg.wait if cfg.wait is not None else cfg.cluster.executor == "local"
    if one_at_a_time(cfg, plan, wait):
        return run_one_at_a_time(cfg, plan)
    try:
        subs = submitting.submit(cfg, plan)
    except Exception as e:  # noqa: BLE001 - sbatch/executor errors: one line, not a traceback
        _err(f"submission failed: {str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__}")
        return 1
    print(f"submitted {len(subs)} job(s) to {cfg.cluster.name} ({cfg.cluster.executor}); results: {plan.results_dir}")
    for s in subs:
        print(f"  job {s.job_id}  {s.job.server_id}\n    log: {s.log_path()}\n    results: {s.job.job_dir}")
    if not wait:
        print("follow with: squeue --me; results appear as each point completes" if cfg.cluster.executor == "slurm"
              else "jobs run in the background")
        return 0
    ok = submitting.follow(subs)
    if plan.baseline or any(j.bench is not None and j.bench.slo for j in plan.jobs):
        # every job has ended: the speedups with every k, in every summary.json; the SLO answer
        # its own process: the login side imports no reader of results
        subprocess.run([sys.executable, "-m", "launcher.speedup", plan.results_dir], check=False)
    end_of_run(plan.results_dir, cfg.report)
    print(f"{'all jobs succeeded' if ok else 'some jobs FAILED'}; results: {plan.results_dir}")
    return 0 if ok else 1
