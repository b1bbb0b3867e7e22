"""The job spec: everything one node-side job needs, resolved, as one JSON file.

The planner (login side) writes it as ``<job_dir>/job.json``; the node side
(launcher.node, launcher.bench) reads it and nothing else. run.sh builds the
same spec from its arguments for hand use. Standard library only: this module
is imported by the node side, which runs with any vLLM install's Python.

Every section is a frozen dataclass: the planner builds a spec whole and
nothing changes it afterwards (the node derives a new one with
``dataclasses.replace`` when it resolves the engine version). The benchmark's
settings are typed (``BenchSpec``: datasets, gates, runtime params, lossless);
the points carry their sampling (temperature) and load (concurrency) once. The
benchmark reads them from the file (``python -m launcher.bench --spec job.json
[--role baseline]``): no argv is written for it and none is parsed back.
"""
from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Optional

from launcher.contracts.cpu_cores import cpu_core_sets, disagg_core_sets  # noqa: F401 (launcher.node.disagg imports them here)
from launcher.contracts.launch import SERVER_LAUNCHES, LaunchSpec
from launcher.contracts.run_identity import RunIdentity, build as build_identity
from launcher.runtime.files import write_text_atomic
from launcher.engines import ENGINES, AcceptanceSource, Engine, num_speculative_tokens, speculation_flags

# summary.json's keys for what a job measured and with which server (JobSpec.identity, the one builder)
IDENTITY_KEYS = ("recipe", "server_id", "method", "num_speculative_tokens", "run_identity")

BENCH_MODULE = "launcher.bench"  # our benchmark (a job may name another module)
SPEC_VERSION = 1
SPEC_FILE = "job.json"
# Slurm warns a job of its time limit: SIGUSR2 this many seconds ahead (submitit's --signal=USR2@N and
# job.sbatch's); the node judges a SIGUSR2 against the job's deadline with this lead (launcher.node.point_status).
TIME_LIMIT_SIGNAL = "SIGUSR2"
TIME_LIMIT_WARNING_S = 120
# The signals the node is started with blocked (launcher.node.job_entry): one that arrives while the
# node is still importing stays pending instead of ending it by its default action (SIGUSR2's ends a
# process), and the node unblocks them once its handlers are in place (StopSignals.install).
NODE_HELD_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", TIME_LIMIT_SIGNAL)
# Which start of the server a benchmark measures (1-based; sweep.server_starts): the node sets it
# in the benchmark's environment, the benchmark joins that start's repeats to the earlier ones.
SERVER_START_ENV = "SPECDEC_SERVER_START"


def point_dir_name(dataset: str, temperature: float, concurrency: int) -> str:
    """A point's folder in its job folder: ``<dataset>/t<T>_c<C>`` (the one definition: the
    planner's points, the benchmark's outcomes and the results readers all name it here)."""
    return f"{dataset}/t{float(temperature):g}_c{int(concurrency)}"


def shell_join(argv: list[str]) -> str:
    return " ".join(shlex.quote(str(a)) for a in argv)


# ---------------------------------------------------------------- the spec


@dataclass(frozen=True)
class PointSpec:
    dataset: str
    temperature: float
    concurrency: int

    @property
    def id(self) -> str:
        return point_dir_name(self.dataset, self.temperature, self.concurrency)


@dataclass(frozen=True)
class DatasetInput:
    """One dataset of the sweep: its name (mtbench, specbench, speed_<split>) and file."""
    name: str
    path: str


@dataclass(frozen=True)
class Gates:
    """Recipe gates on each point (launcher.results.validity)."""
    max_failed_fraction: float = 0.05
    min_acceptance_length: dict = field(default_factory=dict)  # dataset -> minimum Average_AL
    min_tokens_per_step: Optional[float] = None


@dataclass(frozen=True)
class RuntimeParams:
    """specdec_bench's runtime params: sampling and chat-template arguments, dataset options."""
    sampling_kwargs: dict = field(default_factory=dict)
    chat_template_args: dict = field(default_factory=dict)
    dataset_kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class LosslessSpec:
    """The lossless check: the speculative server's greedy outputs against the same server without it."""
    num_prompts: int
    output_length: int = 64
    min_match_fraction: float = 0.6


@dataclass(frozen=True)
class BenchSpec:
    """What launcher.bench runs against the server: the job's points (JobSpec.points)
    over these datasets, with these settings."""
    model: str  # the served model name
    tokenizer: str
    save_dir: str
    datasets: tuple = ()  # DatasetInput, in the sweep's order
    num_requests: Optional[int] = None
    max_turns: Optional[int] = None
    # sweep.num_requests_per_concurrency: conversations a point at concurrency C sends (C -> n)
    requests_per_concurrency: dict = field(default_factory=dict)
    output_length: int = 4096
    num_gpus: int = 1
    aiperf: str = "aiperf"
    aiperf_mode: str = "phases"  # phases | point
    point_timeout_s: float = 3600
    request_timeout_s: int = 600
    gates: Gates = field(default_factory=Gates)
    preflight: bool = True  # the spec-stats check (off for baselines)
    force: bool = False
    golden: Optional[str] = None
    lossless: Optional[LosslessSpec] = None
    runtime_params: RuntimeParams = field(default_factory=RuntimeParams)
    acceptance_source: Optional[str] = None  # an explicit override; None: the job's
    repeats: int = 1  # sweep.repeats: each point measured this many times against the server
    server_starts: int = 1  # sweep.server_starts: the server started this many times, the repeats on each
    warmup: bool = False  # a warm-up phase before the measured ones (on with repeats)
    noisy_rel_mad: float = 0.1  # bench.gates.noisy_rel_mad: a point whose Output TPS varies more is noisy
    # sweep.slo (launcher.results.goodput.Slo.to_dict: limits, percentiles, good_share) plus
    # "search" and "max_search_probes"; None: no SLO (docs/slo.md)
    slo: Optional[dict] = None


@dataclass(frozen=True)
class KnownAnswerSpec:
    """After the sweep, the target serves as its own draft and must accept every draft."""
    allow_fail: bool = False


@dataclass(frozen=True)
class BaselineSpec:
    """sweep.baseline=true: the matched baseline's job folder (speedups are written
    against it when the job ends) and, for the one job that hosts it, its benchmark."""
    job_dir: str
    run_here: bool = False
    bench: Optional[BenchSpec] = None


@dataclass(frozen=True)
class ParitySpec:
    """bench.disagg_parity: the aggregated server of the same recipe runs the same points
    (its benchmark writes into ``job_dir``); the verdict goes into the disagg job's folder."""
    job_dir: str
    bench: Optional[BenchSpec] = None
    al_tolerance: float = 0.05


@dataclass(frozen=True)
class TopologySpec:
    """topology=disagg: ``prefill`` + ``decode`` servers of the job's model and draft, the
    KV cache moved by ``kv_connector``, and the router the benchmark talks to."""
    kind: str = "disagg"
    prefill: int = 1
    decode: int = 1
    kv_connector: str = "NixlConnector"
    kv_buffer_device: str = "cpu"
    kv_lease_duration_s: int = 600
    decode_prefix_caching: bool = False
    # The engine's router and its command, as the plan resolved them (topology.router): no default,
    # so a spec never falls back to another engine's router
    router: str = field(kw_only=True)
    router_command: str = field(kw_only=True)
    router_policy: str = "round_robin"
    router_extra_args: list[str] = field(default_factory=list)
    router_host: str = "127.0.0.1"  # where the router listens (API and metrics): beside the benchmark
    pin_cpu_cores: bool = True  # CPU build: each server its own cores (cpu_core_sets)
    # The KV-transfer library's progress thread sleeps up to this long (µs) between polls; 0: the
    # library's own (NIXL: no pause). Resolved from topology.kv_progress_poll_us by the planner
    kv_progress_poll_us: int = 0
    parity: Optional[ParitySpec] = None
    # The node index (0: the head, where the router runs) of every server in roles() order
    # (launcher.contracts.placement); empty: every server on the head
    server_nodes: list[int] = field(default_factory=list)
    placement: str = "one_node"  # one_node | split (what topology.placement resolved to)
    decode_draft_model: Optional[str] = None  # an injected fault: the decode servers' own draft

    def node_of(self, n: int) -> int:
        """The node index of the n-th server of roles()."""
        return self.server_nodes[n] if n < len(self.server_nodes) else 0

    def roles(self) -> list[tuple[str, int]]:
        """(role, index) of every server, prefill first: ("prefill", 0), ("decode", 0), ..."""
        return [("prefill", i) for i in range(self.prefill)] + [("decode", i) for i in range(self.decode)]


@dataclass(frozen=True)
class JobSpec:
    """One server configuration and its client points (see the module doc)."""
    recipe: str
    server_id: str
    job_dir: str
    model: str
    served_name: str
    server_command: str
    server_flags: list[str]  # everything but command, model, host, port and the speculative flags
    bind_host: str = "127.0.0.1"
    port: Optional[int] = None
    ready_timeout_s: float = 1800
    stop_grace_s: float = 10
    unanswered_timeout_s: float = 300  # a ready server silent this long (GET /health) has failed
    env: dict[str, str] = field(default_factory=dict)
    bench: Optional[BenchSpec] = None  # launcher.bench's settings (None: another benchmark module)
    bench_args: list[str] = field(default_factory=list)  # another benchmark module's argv, passed verbatim
    tokenizer: Optional[str] = None  # the server's tokenizer when not the model's
    points: list[PointSpec] = field(default_factory=list)
    method: str = "none"
    speculative_config: Optional[dict] = None  # the one place k lives (num_speculative_tokens)
    num_gpus: int = 1
    kv_cache_cap_bytes: Optional[int] = None
    launch: LaunchSpec = field(default_factory=LaunchSpec)
    container_image: Optional[str] = None
    compare_thresholds: dict = field(default_factory=dict)  # read by launcher.compare
    gpu_hour_price: Optional[float] = None  # cluster.gpu_hour_price (USD): launcher.speedup's dollar figures
    role: str = "speculative"  # or "baseline": the matched no-speculation configuration
    bench_module: str = BENCH_MODULE
    python: Optional[str] = None  # the benchmark's python (None: the node side's own)
    # Optional sections for other server phases and clients (None: off).
    known_answer: Optional[KnownAnswerSpec] = None
    baseline: Optional[BaselineSpec] = None
    api_key_env: Optional[str] = None  # the name of the env var holding the server's key
    report: bool = True  # the job builds JOB_DIR/report/index.html when it ends (launcher.node.job_entry)
    engine: str = field(kw_only=True)  # launcher.engines: the engine that serves, always named (no default)
    engine_version: Optional[str] = None  # None: probed on the node before the server starts
    # Where per-request acceptance comes from (launcher.engines.AcceptanceSource), resolved
    # for engine_version; acceptance_requested is the recipe's wish ("auto" may be
    # re-resolved on the node once the version is probed, an explicit source may not).
    acceptance_source: str = AcceptanceSource.PER_REQUEST_STATS.value
    acceptance_requested: str = "auto"
    # The engine's flags that make a speculative server report acceptance (for acceptance_source);
    # the server argv is server_flags + speculative_flags + these.
    acceptance_flags: list[str] = field(default_factory=list)
    # The engine's flags for speculative_config, built once by the planner (launcher.login.server_args);
    # None: not planned (run.sh's spec, a job.json of an earlier version), built from the config.
    speculative_flags: Optional[list[str]] = None
    topology: Optional[TopologySpec] = None  # None: one aggregated server
    # What the job measures and with which server (launcher.contracts.run_identity), filled once by
    # the planner (with_run_identity); None: a spec it did not plan (run.sh's, an earlier job.json)
    run_identity: Optional[RunIdentity] = None
    spec_version: int = SPEC_VERSION

    # -- derived

    def server_argv(self, host: str, port: int | str, node_rank: int = 0, head: Optional[str] = None,
                    rpc_port: Optional[int] = None, speculative_config: object = "spec",
                    disagg_role: Optional[str] = None, *, engine: Engine) -> list[str]:
        """The server argv on one node, assembled from the spec's fields: the server flags,
        the speculative flags it carries with the acceptance flags (``speculative_config``:
        default the spec's; None: the same server without speculation; another config, as the
        known-answer probe's: the engine's flags for it), the KV-transfer flags of
        ``disagg_role`` ("prefill" or "decode", topology=disagg), and the multi-node flags
        for nodes > 1. ``engine``: the caller's resolved engine (the plan's, the node context's)."""
        L, eng = self.launch, engine
        cfg = self.speculative_config if speculative_config == "spec" else speculative_config
        f = list(self.server_flags)
        if cfg:
            f += self._speculative_flags(eng, cfg) + list(self.acceptance_flags)
        if disagg_role is not None:
            t = self.topology
            if t is None:
                raise SpecError(f"disagg_role={disagg_role!r}: the spec has no topology "
                                "(fix: plan it with topology=disagg)")
            if disagg_role == "decode" and t.decode_draft_model and cfg:  # the injected fault
                f = list(self.server_flags) + self._speculative_flags(eng, {**cfg, "model": t.decode_draft_model}) \
                    + list(self.acceptance_flags)
            f += eng.disagg_flags(disagg_role, t.kv_connector, t.kv_buffer_device, t.kv_lease_duration_s,
                                  prefix_caching=disagg_role != "decode" or t.decode_prefix_caching)
        if L.nodes > 1 and disagg_role is None:  # a disaggregated server is one node's (its placement)
            f += eng.multinode_flags(node_rank, L.nodes, head or "<head>", rpc_port or 0, L.tp, L.pp, L.dp,
                                     L.gpus_per_node or 1)  # a CPU node (gpus_per_node 0) runs one rank
        return eng.server_argv(self.server_command, self.model, f, host, port)

    def _speculative_flags(self, eng: Engine, config: dict) -> list[str]:
        """The carried flags for the spec's own config; for another (or an unplanned spec), the engine's."""
        if config == self.speculative_config and self.speculative_flags is not None:
            return list(self.speculative_flags)
        return speculation_flags(eng, config).speculative

    @property
    def num_speculative_tokens(self) -> Optional[int]:
        """k, read from the speculative config (None without speculation)."""
        return num_speculative_tokens(self.speculative_config)

    def resolved_identity(self) -> RunIdentity:
        """The job's run identity: the planner's, else built from the spec's fields the same way."""
        return self.run_identity or build_identity(
            model=self.model, method=self.method, speculative_config=self.speculative_config, engine=self.engine,
            engine_version=self.engine_version, server_flags=self.server_flags, measured_env=self.measured_env())

    def measured_env(self) -> dict[str, str]:
        """The job's server.env entries that change what it measures (its engine's ``measured_env``)."""
        eng = ENGINES.get(self.engine)
        names = set(eng.measured_env) if eng is not None else set()
        return {k: str(v) for k, v in self.env.items() if k in names}

    def with_run_identity(self) -> "JobSpec":
        """The spec with its run identity filled (the planner's one call)."""
        return replace(self, run_identity=self.resolved_identity())

    def identity(self, engine_version: Optional[str] = None) -> dict:
        """What summary.json records of the job (IDENTITY_KEYS): recipe, server_id, method, k and the
        run identity, with ``engine_version`` where the node found it."""
        i = self.resolved_identity().with_engine_version(engine_version)
        return {"recipe": self.recipe or None, "server_id": self.server_id or None, "method": i.method,
                "num_speculative_tokens": i.k if i.method != "none" else None, "run_identity": i.to_dict()}

    # -- JSON

    def to_dict(self) -> dict:
        d = json.loads(json.dumps(asdict(self)))  # plain JSON types (tuples become lists)
        d["points"] = [asdict(p) | {"id": p.id} for p in self.points]
        if self.run_identity is not None:
            d["run_identity"] = self.run_identity.to_dict()
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def write(self, path: Optional[Path] = None) -> Path:
        return write_text_atomic(Path(path or Path(self.job_dir) / SPEC_FILE), self.to_json())

    def bench_for(self, role: str = "speculative") -> BenchSpec:
        """The benchmark settings of ``role``: this job's, (baseline) the baseline's it hosts,
        or (aggregated) the disagg parity check's aggregated side."""
        if role == "aggregated":
            par = self.topology.parity if self.topology else None
            if par is None or par.bench is None:
                raise SpecError("--role aggregated: this job has no disagg parity check (fix: bench.disagg_parity=true)")
            return par.bench
        if role == "baseline":
            if self.baseline is None or self.baseline.bench is None:
                raise SpecError("--role baseline: this job hosts no baseline (fix: use the host job's job.json)")
            return self.baseline.bench
        if self.bench is None:
            raise SpecError("the spec has no bench section (a job for another benchmark module)")
        return self.bench

    @classmethod
    def from_dict(cls, d: dict) -> "JobSpec":
        d = dict(d)
        d.pop("num_speculative_tokens", None)  # job.json of spec_version 1 kept k twice; it lives in the config
        d = _check_keys(cls, d, "")
        d["points"] = [PointSpec(p["dataset"], float(p["temperature"]), int(p["concurrency"]))
                       for p in d.get("points", [])]
        d["launch"] = LaunchSpec(**_check_keys(LaunchSpec, d.get("launch") or {}, "launch"))
        d["bench"] = _bench(d.get("bench"), "bench")
        if d.get("known_answer") is not None:
            d["known_answer"] = KnownAnswerSpec(**_check_keys(KnownAnswerSpec, d["known_answer"], "known_answer"))
        if d.get("baseline") is not None:
            b = _check_keys(BaselineSpec, d["baseline"], "baseline")
            b["bench"] = _bench(b.get("bench"), "baseline.bench")
            d["baseline"] = BaselineSpec(**b)
        if d.get("topology") is not None:
            t = _check_keys(TopologySpec, d["topology"], "topology")
            if t.get("parity") is not None:
                par = _check_keys(ParitySpec, t["parity"], "topology.parity")
                par["bench"] = _bench(par.get("bench"), "topology.parity.bench")
                t["parity"] = ParitySpec(**par)
            try:
                d["topology"] = TopologySpec(**t)
            except TypeError as e:
                raise SpecError(f"topology: {e} (fix: the spec misses a required key)") from None
        if d.get("run_identity") is not None:
            try:
                d["run_identity"] = RunIdentity.from_dict(d["run_identity"])
            except ValueError as e:
                raise SpecError(str(e)) from None
        if d["launch"].server not in SERVER_LAUNCHES:
            raise SpecError(f"launch.server is {d['launch'].server!r}; expected one of {SERVER_LAUNCHES}")
        try:
            return cls(**d)
        except TypeError as e:
            raise SpecError(f"{e} (fix: the spec misses a required key)") from None

    @classmethod
    def read(cls, path: Path | str) -> "JobSpec":
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except OSError as e:
            raise SpecError(f"{path}: cannot read ({e.strerror})") from None
        except ValueError as e:
            raise SpecError(f"{path}: not JSON ({e})") from None
        if not isinstance(data, dict):
            raise SpecError(f"{path}: expected a JSON object")
        try:
            return cls.from_dict(data)
        except SpecError as e:
            raise SpecError(f"{path}: {e}") from None


class SpecError(ValueError):
    """A job spec that cannot be used; the message is one line."""


# ---------------------------------------------------------------- job.json of a finished job

# Keys earlier planners wrote that moved (spec_version 1 before the typed bench section):
# k twice (it lives in speculative_config) and the runtime params (now bench.runtime_params).
_MOVED_KEYS = ("num_speculative_tokens", "runtime_params")
# What a recorded spec may lack (a hand-written or partial job.json): "" reads as "not recorded".
_NOT_RECORDED = {"recipe": "", "server_id": "", "job_dir": "", "model": "", "served_name": "",
                 "server_command": "", "server_flags": [], "method": "", "engine": ""}
_SECTIONS = ("launch", "bench", "known_answer", "baseline", "topology", "run_identity")


def job_path(job_dir) -> Path:
    return Path(job_dir) / SPEC_FILE


def recorded_job_from_dict(d: dict) -> JobSpec:
    """A job.json of any earlier version, for the tools that read results (report, compare,
    speedup, the benchmark's summary): keys that moved or that this version does not know are
    dropped, identity keys the file lacks read as "" (not recorded), and a section this version
    cannot read is left out. The node reads strictly (``JobSpec.read``)."""
    known = {f.name for f in fields(JobSpec)}
    d = {**_NOT_RECORDED, **{k: v for k, v in d.items() if k in known and k not in _MOVED_KEYS}}
    if not isinstance(d.get("points"), list) or not all(isinstance(p, dict) for p in d["points"]):
        d["points"] = []
    core = {k: v for k, v in d.items() if k not in _SECTIONS}
    for sec in _SECTIONS:  # each section on its own: one unreadable section costs only itself
        if sec in d:
            try:
                JobSpec.from_dict({**core, sec: d[sec]})
            except (SpecError, TypeError, ValueError, KeyError, AttributeError):
                d.pop(sec)
    try:
        return JobSpec.from_dict(d)
    except (TypeError, ValueError, KeyError, AttributeError):
        return JobSpec.from_dict(core | {"points": []})


def read_recorded_job(job_dir) -> Optional[JobSpec]:
    """The job.json of ``job_dir`` (a folder, or the file) as recorded_job_from_dict reads it;
    None when there is none or it is not a JSON object."""
    p = Path(job_dir)
    if p.is_dir():
        p = job_path(p)
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    try:
        return recorded_job_from_dict(data)
    except (SpecError, TypeError, ValueError, KeyError, AttributeError):
        return None


def _check_keys(cls, d: dict, where: str) -> dict:
    if not isinstance(d, dict):
        raise SpecError(f"{where or 'the spec'}: expected a JSON object")
    unknown = sorted(set(d) - {f.name for f in fields(cls)})
    if unknown:
        raise SpecError(f"{where + ': ' if where else ''}unknown key(s) {unknown} "
                        "(fix: a newer planner wrote it; update the node's checkout)")
    return dict(d)


def _bench(d: Optional[dict], where: str) -> Optional[BenchSpec]:
    if d is None:
        return None
    d = _check_keys(BenchSpec, d, where)
    d["datasets"] = tuple(DatasetInput(**_check_keys(DatasetInput, x, f"{where}.datasets"))
                          for x in d.get("datasets") or ())
    d["gates"] = Gates(**_check_keys(Gates, d.get("gates") or {}, f"{where}.gates"))
    d["runtime_params"] = RuntimeParams(**_check_keys(RuntimeParams, d.get("runtime_params") or {},
                                                      f"{where}.runtime_params"))
    # JSON keeps the concurrencies as strings
    d["requests_per_concurrency"] = {int(c): int(n) for c, n in (d.get("requests_per_concurrency") or {}).items()}
    if d.get("lossless") is not None:
        d["lossless"] = LosslessSpec(**_check_keys(LosslessSpec, d["lossless"], f"{where}.lossless"))
    try:
        return BenchSpec(**d)
    except TypeError as e:
        raise SpecError(f"{where}: {e}") from None
