"""One group of client points (a dataset at a temperature, all its concurrencies) through
AIPerf: the one driver for both modes. It starts an AIPerf process over some points, shows
its progress, and hands each point's AIPerf folder on to its results (launcher.bench.point_files,
or launcher.bench.repeat_runs for a point measured several times). Two forms of the process:

* ``PhasesRun``: one profiling phase per point and repeat (AIPerf 0.13's multi-phase YAML),
  so AIPerf's start-up is paid once per dataset x temperature; the run's /metrics window is
  then checked against its points' counts (launcher.bench.run_counters);
* ``SingleRun``: AIPerf's command line over one point (a lone point; aiperf_mode "point",
  the baseline's, without repeats)."""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import yaml

from launcher.bench import aiperf_runner as ar
from launcher.bench.bench_run import as_repeats, measured_repeats
from launcher.bench.run_context import PointContext, PointGroup
from launcher.bench.kv_transfer import kv_transfer_window
from launcher.bench.point_files import finish_point
from launcher.bench.prefix_cache import scrape_urls
from launcher.bench.progress import PhasesWatch, RunWatch
from launcher.bench.repeat_runs import finish_repeats
from launcher.bench.run_counters import phase_steps, point_counts, sweep_prometheus_check
from launcher.results.goodput import aiperf_goodput_arg
from launcher.runtime.apikey import client_key
from launcher.runtime.datasets import DatasetSpec, Question, write_aiperf_multi_turn


def run_group(ctx: PointContext, spec: DatasetSpec, questions: list[Question], dataset: str, temperature: float,
              outcomes: list, save_dir: Path, progress) -> Optional[dict]:
    """The points of one dataset at one temperature. aiperf_mode "phases" (the default):
    one AIPerf process for them all; "point", the baseline: one AIPerf process per point.
    Returns the phases run's Prometheus cross-check, if any."""
    g = PointGroup(ctx, spec, questions, dataset, temperature, save_dir, progress)
    g.ds_dir.mkdir(parents=True, exist_ok=True)
    input_file = g.ds_dir / "aiperf_input.jsonl"
    write_aiperf_multi_turn(questions, input_file, ctx.bench.output_length)
    repeats = as_repeats(ctx.bench)
    if ctx.bench.aiperf_mode == "phases" and (len(outcomes) > 1 or repeats):
        return _drive(g, outcomes, PhasesRun(g, outcomes))
    for o in outcomes:  # point mode (its repeats as one process's phases), or a lone point
        _drive(g, [o], PhasesRun(g, [o]) if repeats else SingleRun(g, [o], input_file))
    return None


def _drive(g: PointGroup, outcomes: list, form) -> Optional[dict]:
    """One AIPerf process over ``outcomes`` in ``form``'s way; its points' results; the run's check.
    A run whose phases sent questions laid out for other phases (ar.misaligned_phases: a starved
    client, rare) runs once more with an idle phase of at least ar.RETRY_GAP_S, its log kept beside
    as ``<log>.misaligned.log``; a second such run fails those points, each saying what it sent."""
    group_dir = g.ds_dir / f".aiperf_{form.tag}"
    log = g.ds_dir / f"aiperf_{form.tag}.log"
    g.progress.running = [o.dir for o in outcomes]  # the job's record of what it is doing
    b = g.ctx.bench
    for attempt in (1, 2):
        shutil.rmtree(group_dir, ignore_errors=True)
        argv = form.prepare(group_dir, retry=attempt > 1)
        g.progress.update(form.watch.start_line)
        res = ar.run_aiperf(argv, ar.aiperf_env(b.tokenizer, keep_alive_s=g.ctx.keep_alive["client_s"]),
                            log, timeout_s=b.point_timeout_s * len(outcomes),
                            on_progress=form.watch.on_progress, on_phase=form.watch.on_phase)
        off = form.misaligned(group_dir) if attempt == 1 else {}
        if not off:
            break
        kept = log.with_name(f"{log.stem}.misaligned.log")
        log.replace(kept)
        first, sent = next(iter(off.items()))
        g.progress.update(f"{g.dataset} T={g.temperature:g}: AIPerf's phase {first} sent {', '.join(sent[:3])}, "
                          f"laid out for another phase ({len(off)} phase(s) off: the idle phase before it ended "
                          f"before it took its line, a starved client); running the group again "
                          f"with {ar.RETRY_GAP_S:g} s between points (first run's log: {kept.name})")
    check = form.collect(group_dir, res)
    shutil.rmtree(group_dir, ignore_errors=True)
    return check


def _ended(res: ar.AiperfResult) -> str:
    return "AIPerf timed out" if res.timed_out else f"AIPerf exited with code {res.returncode}"


def _server_metrics(ctx: PointContext) -> tuple:
    return tuple(scrape_urls(ctx.server_ready.metrics_urls or (), ctx.server_ready.topology))


def _request_extra(ctx: PointContext, temperature: float) -> dict:
    return ar.request_payload_extras(temperature, ctx.runtime.get("sampling_kwargs") or {},
                                     ctx.runtime.get("chat_template_args") or {}) | ctx.stream_extra


class SingleRun:
    """AIPerf's command line over the points (no phases): each point's folder is AIPerf's own."""

    def __init__(self, g: PointGroup, outcomes: list, input_file: Path):
        self.g, self.outcomes, self.input_file = g, outcomes, input_file
        self.tag = f"t{g.temperature:g}" + ("" if len(outcomes) > 1 else f"_c{outcomes[0].concurrency}")
        self.watch = RunWatch(g.progress, [o.concurrency for o in outcomes], g.questions,
                              f"{g.dataset} T={g.temperature:g}")

    def prepare(self, group_dir: Path, retry: bool = False) -> list[str]:
        g, b = self.g, self.g.ctx.bench
        n = len(g.sent(self.outcomes[0].concurrency)) if len(self.outcomes) == 1 else len(g.questions)
        run = ar.GroupRun(g.dataset, g.temperature, [o.concurrency for o in self.outcomes], self.input_file,
                          n, group_dir, _request_extra(g.ctx, g.temperature))  # sequential: the file's first n
        slo = g.ctx.slo
        return ar.aiperf_argv(b.aiperf, model=b.model, url=g.ctx.base_url, tokenizer=b.tokenizer, run=run,
                              request_timeout_s=b.request_timeout_s, api_key=client_key(),
                              server_metrics=_server_metrics(g.ctx), goodput=aiperf_goodput_arg(slo) if slo else None)

    def misaligned(self, group_dir: Path) -> dict:
        return {}  # one point, no phases: AIPerf sends the file's first N in order

    def collect(self, group_dir: Path, res: ar.AiperfResult) -> None:
        single = len(self.outcomes) == 1
        for o in self.outcomes:
            src = ar.point_artifacts(group_dir, o.concurrency, single)
            finish_point(self.g, o, src, f"{_ended(res)} before this point finished (log: {res.log_path})")


@dataclass(frozen=True)
class GroupPlan:
    """The AIPerf phases of one dataset x temperature: one per point and repeat, in rounds."""
    phases: list
    owner: dict  # phase name -> its point's index
    warm: Optional[object]  # the warm-up phase (--warmup), or None
    repeats: int
    per_c: Optional[dict]  # sweep.num_requests_per_concurrency

    @property
    def in_run_order(self) -> list:
        """Every profiling phase in the order AIPerf runs them and the input file lays them out."""
        return ([self.warm] if self.warm else []) + self.phases


def plan_group(ctx: PointContext, outcomes: list, questions: list[Question]) -> GroupPlan:
    """Repeats run in rounds (every point once, then every point again), so a slow drift of
    the machine reaches every point's repeats alike instead of one point's all at once. A
    warm-up phase first (--warmup): the dataset once at the group's highest concurrency, a
    profiling phase of its own whose records enter no figure (its verify steps do enter the
    run's /metrics cross-check). Without it the first phase after AIPerf's start-up ran
    slower than the later ones (docs/repeats.md), so the repeats were not alike."""
    repeats = measured_repeats(ctx.bench)
    per_c = ctx.bench.requests_per_concurrency
    phases = [ar.PhasePlan(ar.phase_name(i, o.concurrency) + (f"_r{r + 1}" if repeats > 1 else ""),
                           o.concurrency, ar.phase_sessions(per_c, o.concurrency, len(questions)))
              for r in range(repeats) for i, o in enumerate(outcomes)]
    top = max(o.concurrency for o in outcomes)
    warm = ar.PhasePlan(f"warmup_c{top}", top, len(questions)) if ctx.bench.warmup else None
    return GroupPlan(phases, {ph.name: i % len(outcomes) for i, ph in enumerate(phases)}, warm, repeats, per_c)


class PhasesRun:
    """One AIPerf process, one profiling phase per point and repeat (AIPerf 0.13's
    `benchmark.phases`). Each phase sends the first N questions of the dataset (N:
    sweep.num_requests_per_concurrency, the whole dataset without an entry), every repeat
    and every server the same: AIPerf's one sequential sampler hands out the input file in
    order across phases, so the file holds each phase's copy of its questions in run order
    (launcher.runtime.datasets.aiperf_phase_lines, which also says which lines the phases
    take beyond their sessions). (One process cannot hold several temperatures or datasets:
    the only place for a point's sampling is the conversation.)

    AIPerf writes each phase's aggregates and server-metrics window to `phases/<name>/`
    when the run ends and tags every record with its `phase_name`; each point's folder is
    rebuilt from those, so launcher.bench.point_files sees what a single-point run writes. A phase
    with no results (AIPerf killed or failed) fails only its own point(s). The run's
    Prometheus cross-check (launcher.bench.run_counters) comes back when every point ran."""

    def __init__(self, g: PointGroup, outcomes: list):
        self.g, self.outcomes = g, outcomes
        self.tag = f"t{g.temperature:g}_phases"
        self.plan = plan_group(g.ctx, outcomes, g.questions)
        self.watch = PhasesWatch(g.progress, outcomes, g.questions, self.plan, f"{g.dataset} T={g.temperature:g}")

    def prepare(self, group_dir: Path, retry: bool = False) -> list[str]:
        """The group's conversations and AIPerf's multi-phase YAML; returns AIPerf's argv
        (``retry``: the run again after a misaligned one, its idle phases ar.RETRY_GAP_S at least)."""
        g, b = self.g, self.g.ctx.bench
        group_dir.mkdir(parents=True)
        input_file = group_dir / "input.jsonl"
        phases = self.plan.in_run_order
        write_aiperf_multi_turn(g.questions, input_file, b.output_length, extra=_request_extra(g.ctx, g.temperature),
                                phases=[(ph.sessions, ph.concurrency) for ph in phases])  # each: the first N
        slo = g.ctx.slo
        gap = float(g.ctx.run.phase_gap_s or ar.GAP_S)
        gap = max(gap, ar.RETRY_GAP_S) if retry else gap
        cfg = ar.multiphase_config(model=b.model, url=g.ctx.base_url, tokenizer=b.tokenizer, input_file=input_file,
                                   artifact_dir=group_dir, phases=phases,
                                   request_timeout_s=b.request_timeout_s, server_metrics=_server_metrics(g.ctx),
                                   slos=slo.aiperf_slos() if slo else None, gap_s=gap)
        cfg_path = g.ds_dir / f"aiperf_{self.tag}.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        return ar.multiphase_argv(b.aiperf, cfg_path, api_key=client_key())

    def misaligned(self, group_dir: Path) -> dict:
        """The phases that sent questions laid out for others (ar.misaligned_phases)."""
        return ar.misaligned_phases(group_dir / "profile_export.jsonl", [ph.name for ph in self.plan.in_run_order])

    def collect(self, group_dir: Path, res: ar.AiperfResult) -> Optional[dict]:
        ctx = self.g.ctx
        failed_run = _ended(res) if (res.timed_out or res.returncode != 0) else None
        counts = self._points(group_dir, res.log_path, failed_run)
        check = None
        if ctx.speculative and counts is not None:
            window = ar.prometheus_window(group_dir, ctx.engine.metrics, endpoints=ctx.server_ready.metrics_urls)
            check = sweep_prometheus_check(window, *counts, stream_counted=ctx.stream_counted)
            if check is not None:
                check = {"dataset": self.g.dataset, "temperature": self.g.temperature,
                         "points": [o.dir for o in self.outcomes]} | check
                if ctx.server_ready.topology:  # the run's window is exact; a point's may take a neighbour's transfer
                    check["kv_transfer"] = kv_transfer_window(ar.server_metrics(group_dir) or {},
                                                              endpoints=ctx.server_ready.metrics_urls or None,
                                                              names=ctx.engine.kv_transfer_metrics)
        if ctx.stream_counted:  # chunk counts are exact only where the server's steps say so: a point's own
            for o in self.outcomes:  # window (cut at the points' starts: server_metrics_window), else the run's
                if o.status == "complete":
                    own = o.values.get("acceptance_exact")
                    o.values["acceptance_exact"] = bool(own) if own is not None else bool(check and check["matches"])
        return check

    def _points(self, group_dir: Path, log_path, failed_run: Optional[str]) -> Optional[tuple[int, int]]:
        """Each point's folder rebuilt from its phase(s); returns the run's verify steps and
        accepted drafts (the warm-up's included), None when some point's counts are unknown."""
        g, plan, repeats = self.g, self.plan, as_repeats(self.g.ctx.bench)
        steps = accepted = 0
        all_read = failed_run is None
        if plan.warm is not None and all_read:
            counted = phase_steps(group_dir, plan.warm.name)
            if counted is None:
                all_read = False
            else:
                steps, accepted = counted
        for i, o in enumerate(self.outcomes):
            runs = []
            for ph in plan.phases[i::len(self.outcomes)]:  # this point's repeats, in run order
                dst = group_dir / "points" / ph.name
                why = ar.collect_phase(group_dir, ph.name, dst)
                if why is not None:
                    why = f"{failed_run or why} before this point finished (log: {log_path})"
                runs.append((ph.name, dst, why))
            if not repeats:
                _, dst, why = runs[0]
                finish_point(g, o, None if why else dst, why)
            else:
                why = finish_repeats(g, o, runs)
            ext = point_counts(g.save_dir, o, why, repeats)
            if ext.get("num_spec_steps") is None:
                all_read = False
            else:
                steps += ext["num_spec_steps"]
                accepted += ext["num_accepted_draft_tokens"]
        return (steps, accepted) if all_read else None
