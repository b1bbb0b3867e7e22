"""The recipe schema: structured configs, so an unknown key or a wrong type is an error.

Every YAML file under recipes/ is merged onto these dataclasses by Hydra.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import MISSING

from launcher.contracts.compare_thresholds import COMPARE_DEFAULTS
from launcher.engines import DEFAULT_ENGINE, ENGINES

SPEC_METHODS = ("eagle", "eagle3", "dflash", "mtp", "ngram", "draft_model", "suffix", "none")
# Methods whose drafter lives inside the target checkpoint or is computed on the fly.
METHODS_WITHOUT_DRAFT_CKPT = ("ngram", "mtp", "suffix", "none")


@dataclass
class ModelConfig:
    path: str = MISSING  # HF id or a directory: what `vllm serve` loads
    served_name: str = MISSING  # the name clients ask for
    tokenizer: Optional[str] = None  # defaults to path
    max_model_len: Optional[int] = None
    dtype: Optional[str] = None
    # Random weights in a real model's shape (common/setup/make_shaped_models.py): a step costs
    # what the real model's costs, but no acceptance measured with it is a real pair's, so
    # golden references (bench.golden) are skipped.
    random_weights: bool = False


@dataclass
class ForcedAcceptanceConfig:
    """vLLM's synthetic rejection sampling: acceptance forced to a set value, to
    benchmark the serving system at a given AL (not a draft's quality). Set one."""
    length: Optional[float] = None  # mean acceptance length in [1, k+1]
    rates: Optional[list[float]] = None  # per-position unconditional rates, k of them, non-increasing


@dataclass
class DraftConfig:
    method: str = "none"  # eagle, eagle3, dflash, mtp, ngram, draft_model, suffix, none
    model: Optional[str] = None  # draft checkpoint (HF id or directory)
    num_speculative_tokens: int = 3
    # Extra keys for vLLM's --speculative-config (e.g. prompt_lookup_max for ngram).
    extra: dict[str, Any] = field(default_factory=dict)
    # Forced (synthetic) acceptance; GPU sampling only (launcher/engines/forced_acceptance.py).
    forced_acceptance: ForcedAcceptanceConfig = field(default_factory=ForcedAcceptanceConfig)
    # A random-weight draft in a real draft's shape (common/setup/make_shaped_models.py): its
    # proposals mean nothing, so golden references (bench.golden) are skipped; run it with
    # forced acceptance.
    random_weights: bool = False


@dataclass
class ParallelConfig:
    tp: int = 1  # tensor parallel size
    pp: int = 1  # pipeline parallel size
    dp: int = 1  # data parallel size
    ep: int = 1  # expert parallel: 1 (off) or tp * dp (vLLM's EP group spans TP x DP)
    draft_tp: Optional[int] = None  # 1 or tp; default: vLLM's own choice


@dataclass
class ClusterConfig:
    name: str = "local"
    executor: str = "local"  # local | slurm
    partition: Optional[str] = None
    account: Optional[str] = None
    qos: Optional[str] = None
    gpus_per_node: int = 0  # 0: CPU-only
    nodes: int = 1
    time_min: int = 60
    cpus_per_task: Optional[int] = None
    mem_gb: Optional[int] = None
    container_image: Optional[str] = None  # pyxis --container-image
    container_mounts: list[str] = field(default_factory=list)
    requires_container: bool = False
    srun_args: list[str] = field(default_factory=list)
    segment: Optional[int] = None  # Slurm --segment (NVL72 racks)
    bind_host: str = "127.0.0.1"  # 0.0.0.0 on clusters
    env: dict[str, str] = field(default_factory=dict)
    array_parallelism: int = 16
    # Where the container runs (pyxis): "server" = only the inference server, as its
    # own srun step (the job's orchestration runs from this checkout's environment on
    # the shared filesystem); "job" = the whole job inside the container (the image
    # then needs this repository mounted and the launcher's node dependencies).
    container_scope: str = "server"
    # The python that runs the node side of the job. Default: this interpreter (the
    # login node's environment, on the shared filesystem).
    node_python: Optional[str] = None
    # What one GPU of this cluster costs an hour, in US dollars: python -m launcher.speedup and the
    # report add dollars per million output tokens (docs/fleet.md). None: no dollar figures.
    gpu_hour_price: Optional[float] = None


@dataclass
class RuntimeParams:
    sampling_kwargs: dict[str, Any] = field(default_factory=dict)  # top_p, top_k, ...
    chat_template_args: dict[str, Any] = field(default_factory=dict)  # e.g. enable_thinking
    dataset_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class SloConfig:
    """A latency SLO (docs/slo.md): goodput per point, the max load under it per server
    configuration, the recommendation. Unset limits are not part of it; none set: no SLO."""
    ttft_ms: Optional[float] = None  # time to first token
    itl_ms: Optional[float] = None  # inter-token latency per request (AIPerf's ITL = TPOT); or tpot_ms
    tpot_ms: Optional[float] = None  # (E2E - TTFT) / (tokens - 1) per request; or itl_ms
    e2e_ms: Optional[float] = None  # end-to-end request latency
    percentile: float = 90.0  # each limit holds at this percentile of a point's requests
    percentiles: dict[str, float] = field(default_factory=dict)  # per limit, e.g. {ttft_ms: 99}
    # the share of requests that must meet every limit at once (AIPerf's good_request_fraction); None: not required
    good_share: Optional[float] = None
    # search the max concurrency under the SLO on each server: bisect between the last
    # concurrency that met it and the first that did not, with at most this many extra probes
    search: bool = True
    max_search_probes: int = 3


@dataclass
class SweepConfig:
    temperatures: list[float] = field(default_factory=lambda: [0.0])
    concurrencies: list[int] = field(default_factory=lambda: [1])
    datasets: list[str] = field(default_factory=lambda: ["mtbench"])
    dataset_paths: dict[str, str] = field(default_factory=dict)  # dataset -> file
    num_requests: Optional[int] = None  # None: the whole dataset
    max_turns: Optional[int] = None  # None: every turn; 1: the first turn only (vLLM CI's single-turn MT-Bench)
    # Conversations a point at concurrency C sends, e.g. {1: 16, 64: 80}: a slice of the
    # dataset's (at most num_requests), so low concurrencies stay cheap and high ones fill
    # their slots. A concurrency not listed sends every conversation. Phases mode only.
    num_requests_per_concurrency: dict[int, int] = field(default_factory=dict)
    output_length: int = 256
    runtime_params: RuntimeParams = field(default_factory=RuntimeParams)
    # Server-side sweep: one server per value (empty: draft.num_speculative_tokens).
    num_speculative_tokens: list[int] = field(default_factory=list)
    # Server-side sweep of forced (synthetic) acceptance, GPU sampling only: one server per
    # (k, length), each with draft.forced_acceptance.length set to it; "k+1" is every draft
    # accepted at each k (launcher/engines/forced_acceptance.py). Empty: draft.forced_acceptance.
    forced_acceptance_lengths: list[Any] = field(default_factory=list)
    # A matched baseline: the same server without speculation runs the same client
    # points (after the first k's sweep, in the restart the lossless check also uses).
    baseline: bool = False
    # Each client point measured N times against the same server (extra AIPerf profiling
    # phases); repeats.json holds each repeat and mean, sd, 95% interval, relative MAD
    # (docs/repeats.md). compare judges throughput against that noise only with N >= 2.
    repeats: int = 1
    # Each server configuration started this many times (the baseline too), its points'
    # repeats measured on every start and pooled in repeats.json: a server's start (memory
    # layout, compiled graphs, the engine's threads) can decide a figure that its repeats
    # alone share (docs/repeats.md, "Across server starts").
    server_starts: int = 1
    # A warm-up phase opens each AIPerf run (its requests enter no figure). None: on when
    # repeats > 1, so that the repeats are alike (the first phase after AIPerf's start-up
    # measured slower than the rest).
    warmup: Optional[bool] = None
    # A latency SLO: goodput per point and the max load under it (docs/slo.md)
    slo: SloConfig = field(default_factory=SloConfig)
    # A dynamic k schedule served as one more server configuration: vLLM's
    # num_speculative_tokens_per_batch_size, [[batch_start, batch_end, k], ...] (e.g. the one
    # python -m launcher.speedup prints); each point checks the engine applied it (docs/slo.md)
    k_schedule: Optional[list[list[int]]] = None


# The recipe's default engine (server.engine's default): its command and router are the defaults of
# server.command and topology.router (recipes/engine/vllm.yaml keeps them; another engine's recipe sets its own).
RECIPE_DEFAULT_ENGINE = ENGINES[DEFAULT_ENGINE]


@dataclass
class ServerConfig:
    engine: str = DEFAULT_ENGINE  # launcher/engines: the engine's flags, endpoints, metrics, versions
    # The engine's version (e.g. "0.26.0"): what the server may be asked for. Unset: taken from
    # the cluster's container image tag (vllm/vllm-openai:v0.32.0), else probed on the node.
    engine_version: Optional[str] = None
    command: str = RECIPE_DEFAULT_ENGINE.default_command  # CPU build: "<python> -m vllm.entrypoints.openai.api_server"
    port: Optional[int] = None  # None: a free port on the node
    ready_timeout_s: int = 1800
    # a ready server that leaves its readiness probe (GET /health, every 2 s) unanswered this
    # long has failed: the job stops and names it (stopped, hung) with the time of its last answer
    unanswered_timeout_s: int = 300
    max_num_batched_tokens: Optional[int] = None
    kv_cache_memory_bytes: Optional[str] = None  # KV-cache cap per GPU, e.g. "20G"
    gpu_memory_utilization: Optional[float] = None
    enforce_eager: bool = False
    spec_decode_metrics: str = "detailed"  # --per-request-spec-decode-metrics (detailed: per-step order, exact chunks)
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


TOPOLOGIES = ("aggregated", "disagg")
KV_BUFFER_DEVICES = ("cpu", "cuda")
ROUTERS = tuple(r for e in ENGINES.values() for r in e.routers)


@dataclass
class TopologyConfig:
    """How the model is served (docs/disagg.md): one aggregated server, or disaggregated
    prefill and decode servers moving the KV cache (NIXL) behind a router."""
    kind: str = "aggregated"  # aggregated | disagg
    prefill: int = 1  # prefill servers (disagg)
    decode: int = 1  # decode servers (disagg)
    kv_connector: str = "NixlConnector"
    kv_buffer_device: Optional[str] = None  # cpu | cuda; None: cpu without GPUs, cuda with
    # Seconds the prefill side keeps a request's blocks for decode to read (vLLM's default
    # 30 s released them before decode read them on a loaded CPU: measured)
    kv_lease_duration_s: int = 600
    # Prefix caching on the decode servers: off, so every request's prompt is transferred
    # (a block kept on decode would serve a repeated prompt without a transfer)
    decode_prefix_caching: bool = False
    router: str = RECIPE_DEFAULT_ENGINE.default_router_command  # the engine's router, its P/D mode
    router_command: str = RECIPE_DEFAULT_ENGINE.default_router_command
    router_policy: str = "round_robin"
    router_extra_args: list[str] = field(default_factory=list)
    # Where the router listens (its API and its metrics port): the benchmark runs beside it on the
    # head node, so loopback; the router checks no client key, so another address is refused
    # (docs/disagg.md "Who can reach what")
    router_host: str = "127.0.0.1"
    # CPU build (kv_buffer_device cpu): give each server its own cores (VLLM_CPU_OMP_THREADS_BIND);
    # two servers spinning on the same cores made transfers take minutes on 2 cores (measured)
    pin_cpu_cores: bool = True
    # The KV-transfer library's progress thread: how long (µs) it may sleep between polls. NIXL's
    # Python API gives it none, so it takes a core while its server is idle; on the CPU build that
    # starved the servers (transfers of 31 KB took 47 s, requests waited minutes: docs/disagg.md,
    # "The decode stall"). null: 1000 on the CPU build, the library's own (0) with GPUs; 0: the
    # library's own everywhere
    kv_progress_poll_us: Optional[int] = None
    # Which node each server runs on (launcher/contracts/placement.py, docs/disagg.md "Across
    # nodes"): auto (one_node on one node, split on several), one_node (every server on the
    # head node), split (prefill servers on the first prefill_nodes nodes, decode servers on
    # the rest, round-robin within a role); the router runs on the head node
    placement: str = "auto"
    prefill_nodes: Optional[int] = None  # split: nodes for the prefill servers (None: in proportion)
    # A fault to inject, for checking the parity verdict: the decode servers speculate with this
    # draft instead of the recipe's (prefill and the aggregated reference keep the recipe's)
    decode_draft_model: Optional[str] = None


@dataclass
class GatesConfig:
    min_acceptance_length: dict[str, float] = field(default_factory=dict)  # dataset -> AL
    min_tokens_per_step: Optional[float] = None  # e.g. 1.2
    max_failed_fraction: float = 0.05
    # python -m launcher.compare flags a change only beyond these relative thresholds
    compare_al_threshold: float = COMPARE_DEFAULTS.al
    compare_tps_threshold: float = COMPARE_DEFAULTS.tps
    # python -m launcher.compare fails when a point's throughput speedup over the
    # baseline (sweep.baseline=true) is below this, per dataset
    min_speedup: dict[str, float] = field(default_factory=dict)
    # A point whose Output TPS relative MAD over its repeats exceeds this is noisy
    # (excluded from the best k; marked in tables and plots)
    noisy_rel_mad: float = COMPARE_DEFAULTS.noisy_rel_mad
    # compare with one repeat on a side: throughput cannot be judged against the noise,
    # so a change is flagged only beyond this wide threshold
    compare_single_run_tps_threshold: float = COMPARE_DEFAULTS.single_run_tps
    # compare: the between-run relative sd of a point's mean Output TPS added to the interval
    # of a change (a run-level random effect the repeats inside one run cannot see);
    # None: compare's measured default (COMPARE_DEFAULTS.run_floor, docs/repeats.md)
    compare_run_floor: Optional[float] = None


@dataclass
class LosslessConfig:
    enabled: bool = False
    num_prompts: int = 8
    output_length: int = 64
    min_match_fraction: float = 0.6  # required matches = floor(fraction * prompts) + 1


@dataclass
class BenchConfig:
    aiperf: str = "aiperf"  # the aiperf executable
    point_timeout_s: int = 3600
    # phases (default): one AIPerf process per dataset x temperature, one profiling phase
    # per point (AIPerf's start-up paid once a group); point: one AIPerf process per point
    aiperf_mode: str = "phases"
    request_timeout_s: int = 600
    force: bool = False  # rerun complete points
    preflight: bool = True
    # Where per-request acceptance comes from: auto (the engine's per-request stats where its
    # version has them, else stream chunks), per_request_stats, or stream_chunks (one streamed
    # chunk per decode step, as specdec_bench counts; cross-checked against /metrics).
    acceptance_source: str = "auto"
    gates: GatesConfig = field(default_factory=GatesConfig)
    lossless: LosslessConfig = field(default_factory=LosslessConfig)
    # After the sweep, serve the target as its own draft and check that every draft is
    # accepted at each sweep temperature (an engine defect otherwise); the job fails on a
    # failed probe unless known_answer_allow_fail (launcher/bench/known_answer.py).
    known_answer: bool = False
    known_answer_allow_fail: bool = False
    # A golden reference (launcher/golden/references.json): the run's AL and per-position
    # rates are checked against it; the verdict goes into summary.json and the report.
    golden: Optional[str] = None
    # topology=disagg: run the same points against the aggregated server of the same recipe
    # and judge: T=0 outputs equal, Average_AL within disagg_al_tolerance, every request's
    # prompt transferred (disagg_parity.json)
    disagg_parity: bool = False
    disagg_al_tolerance: float = 0.05


@dataclass
class LauncherConfig:
    name: str = "smoke"  # recipe name; the results folder is output_dir/name
    model: ModelConfig = field(default_factory=ModelConfig)
    draft: DraftConfig = field(default_factory=DraftConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    server: ServerConfig = field(default_factory=ServerConfig)
    bench: BenchConfig = field(default_factory=BenchConfig)
    topology: TopologyConfig = field(default_factory=TopologyConfig)
    output_dir: str = "results"
    dry_run: bool = False
    render_only: bool = False  # write the job folders (job.json, job.sbatch) and submit nothing
    wait: Optional[bool] = None  # None: wait on the local executor, not on Slurm
    # Build the HTML report when the run ends: each job's node writes JOB_DIR/report/, and a run the
    # launcher waits for ends with the results table and RESULTS_DIR/report/index.html. false: neither.
    report: bool = True
