"""What every inference engine tells the rest of the product: the seam.

An engine owns its server argv (built from typed spec fields, never parsed
back): serving, speculative, forced-acceptance, acceptance-stats, multi-node and
disaggregation flags; its environment and router; its endpoints and how to read
its version; how its server receives the API key; its image and command
defaults; its Prometheus metric names; which features each of its versions has;
and the recipe checks only it can make. The product asks an :class:`Engine`; it
never spells an engine's flag, variable, endpoint or name itself (docs/engines.md).
Standard library only: the node side imports this under a bare engine Python.
"""
from __future__ import annotations

import abc
import json
import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence


class AcceptanceSource(str, Enum):
    """Where a point's per-request acceptance comes from."""
    PER_REQUEST_STATS = "per_request_stats"  # the engine's own per-request counters
    STREAM_CHUNKS = "stream_chunks"          # one streamed chunk per decode step, as specdec_bench counts


class EngineError(ValueError):
    """A feature the engine (at that version) does not have; the message is one line."""


@dataclass(frozen=True)
class Capabilities:
    per_request_stats: bool        # acceptance per request on the response
    probabilistic_drafting: bool   # drafts sampled from the draft's distribution (known answer at T > 0)
    synthetic_acceptance: bool     # forced acceptance (benchmark the serving system at a fixed AL)
    version_known: bool = True


@dataclass(frozen=True)
class MetricNames:
    """Prometheus counter names of the speculative-decoding figures (without `_total`).

    vLLM counts accepted drafts itself. An engine without that counter (SGLang: only
    verify steps) leaves ``accepted`` None and names the counters it is derived from:
    emitted tokens and finished requests (each request's first token comes from prefill,
    each verify step emits 1 + its accepted drafts)."""
    drafts: str                        # verify steps (one per request per step)
    accepted: Optional[str]            # accepted draft tokens
    draft_tokens: Optional[str]        # drafted tokens
    accepted_per_pos: Optional[str]    # accepted at position i (label `position`)
    emitted_tokens: Optional[str] = None     # generated tokens (for accepted = emitted - requests - drafts)
    finished_requests: Optional[str] = None  # finished requests

    def accepted_from(self, value: Callable[[str], Optional[float]]) -> Optional[float]:
        """Accepted drafts from counter values (``value(name)``: a counter's value, None when
        absent): the accepted counter, else emitted - finished requests - verify steps."""
        if self.accepted:
            return value(self.accepted)
        if not (self.emitted_tokens and self.finished_requests):
            return None
        parts = [value(self.emitted_tokens), value(self.finished_requests), value(self.drafts)]
        if any(p is None for p in parts):
            return None
        return parts[0] - parts[1] - parts[2]


@dataclass(frozen=True)
class ServingOptions:
    """The recipe's engine-neutral serving fields, for engines that spell them their own way."""
    served_name: str
    tokenizer: Optional[str] = None
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    max_model_len: Optional[int] = None
    max_num_batched_tokens: Optional[int] = None
    dtype: Optional[str] = None
    kv_cache_memory_bytes: Optional[str] = None
    gpu_memory_utilization: Optional[float] = None
    enforce_eager: bool = False


def num_speculative_tokens(speculative_config: Optional[dict]) -> Optional[int]:
    """k of a job's speculative config (job.json's ``speculative_config``), None without one."""
    k = (speculative_config or {}).get("num_speculative_tokens")
    return int(k) if k is not None else None


def parse_version(text: Optional[str]) -> Optional[tuple[int, ...]]:
    """(major, minor, patch) of a version string such as "0.32.0", "v0.26.0+cu130",
    "0.27.2rc1.dev407"; None when there is none."""
    if not text:
        return None
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", str(text))
    if not m:
        return None
    return tuple(int(x or 0) for x in m.groups())


def version_from_image(image: Optional[str]) -> Optional[str]:
    """The engine version a container image's tag names (`vllm/vllm-openai:v0.32.0` -> "0.32.0"),
    None for a tag without one (`latest`, a digest)."""
    if not image or ":" not in image.rsplit("/", 1)[-1]:
        return None
    tag = image.rsplit(":", 1)[1]
    v = parse_version(tag)
    return ".".join(map(str, v)) if v and re.match(r"^v?\d+\.\d+", tag) else None


@dataclass(frozen=True)
class ServerKey:
    """How one server receives the job's API key: extra argv (never the key itself),
    extra environment, and private files to remove once the server is up."""
    argv: list = field(default_factory=list)
    env: dict = field(default_factory=dict)
    files: list = field(default_factory=list)

    def remove_files(self) -> None:
        for f in self.files:
            try:
                Path(f).unlink()
            except OSError:
                pass


@dataclass(frozen=True)
class KvTransferMetrics:
    """Prometheus names of a disaggregated decode server's KV-transfer figures (without `_total`)."""
    prompt_tokens_by_source: str
    prompt_token_sources: tuple
    xfer_time: str
    bytes: str
    failed_transfers: str
    expired_requests: str
    # every server's own prefix cache (tokens looked up / found), read per server: where the
    # router sent a conversation's later turns shows as hits on the server holding its prefix
    prefix_cache_queries: Optional[str] = None
    prefix_cache_hits: Optional[str] = None
    requests_done: Optional[str] = None  # requests a server finished (each prefill/decode server warmed)
    # per-server request-time histograms (seconds), for a disaggregated point's TTFT split
    queue_time: Optional[str] = None  # waiting in the server's queue
    prefill_time: Optional[str] = None  # the server's prefill of the request
    first_token_time: Optional[str] = None  # the server's own time to first token


@dataclass(frozen=True)
class RecipeFacts:
    """What an engine's own recipe checks read (config.validate fills it from the recipe)."""
    container_image: Optional[str]
    draft_method: str
    known_answer: bool
    known_answer_allow_fail: bool
    temperatures: tuple
    engine_version: Optional[str]


@dataclass(frozen=True)
class UserServerArgs:
    """What the node needs of a server argv a user wrote by hand (run.sh): the typed fields."""
    speculative_config: Optional[dict]
    speculative_config_invalid: bool
    tp: int
    tokenizer: Optional[str]
    served_name: str
    kv_cache_cap_bytes: Optional[int]
    flags: list       # the argv without the speculative and acceptance flags
    acceptance: list  # the acceptance flags the argv gave (or the engine's default for per-request stats)


class Engine(abc.ABC):
    """One inference engine: every method a caller uses is declared here."""
    name: str = ""
    result_name: str = ""  # configuration.json's "engine", as specdec_bench writes its engine names
    default_command: str = ""
    default_image: Optional[str] = None
    health_path: str = "/health"
    models_path: str = "/v1/models"
    version_path: str = "/version"
    metrics: MetricNames
    kv_transfer_metrics: Optional[KvTransferMetrics] = None
    key_flag: str = "--api-key"  # the server's own key flag: refused among a job's arguments
    key_env: Optional[str] = None  # an environment variable the user may export the key in, as the engine reads it
    cpu_bind_env: Optional[str] = None  # the CPU build's core-binding variable, if any
    # How long the HTTP server keeps an idle connection open: the variable that sets it, if any,
    # and its default (uvicorn's 5 s, which vLLM and SGLang keep). The benchmark's client must drop
    # an idle pooled connection before the server does (launcher.bench.aiperf_runner.keep_alive).
    http_keep_alive_env: Optional[str] = None
    http_keep_alive_default_s: float = 5.0
    disaggregated_serving: bool = False  # topology=disagg: prefill/decode argv, KV-transfer env, a router (docs/disagg.md)
    default_router_command: Optional[str] = None
    routers: tuple = ()
    # the router's policies this engine's P/D mode takes (topology.router_policy), and those
    # it refuses with the reason (policy -> one line)
    router_policies: tuple = ()
    refused_router_policies: dict = {}
    # the router's flags that say where it listens or what key it holds: the launcher's alone
    # (topology.router_host), refused in topology.router_extra_args
    router_listen_flags: tuple = ()
    # why the router may not listen off loopback (it checks no client key); None: it checks one
    router_client_key_gap: Optional[str] = None

    # -- versions and what they have

    @abc.abstractmethod
    def capabilities(self, version: Optional[str]) -> Capabilities:
        """What the engine at ``version`` has (None: unknown)."""

    def acceptance_source(self, requested: str, version: Optional[str]) -> AcceptanceSource:
        """The source a job uses: ``requested`` ("auto" or a source) resolved against the
        version. "auto" takes per-request stats where the engine has them; an explicit
        request the version cannot serve is an :class:`EngineError`."""
        caps = self.capabilities(version)
        if requested == "auto":
            return AcceptanceSource.PER_REQUEST_STATS if caps.per_request_stats else AcceptanceSource.STREAM_CHUNKS
        src = AcceptanceSource(requested)
        if src is AcceptanceSource.PER_REQUEST_STATS and not caps.per_request_stats:
            raise EngineError(f"{self.name} {version} returns no per-request acceptance stats (fix: "
                              "bench.acceptance_source=stream_chunks or auto, or a newer image)")
        return src

    @abc.abstractmethod
    def version_probe_argv(self, command: str) -> Optional[list[str]]:
        """A command printing the installed engine version, from the server command;
        None when it cannot be asked without starting the server (a container step)."""

    def version_from_response(self, body: bytes) -> Optional[str]:
        """The version in the answer of ``version_path`` (a JSON object with "version")."""
        try:
            v = json.loads(body).get("version")
        except (ValueError, AttributeError):
            return None
        return str(v) if v else None

    # -- the server's argv

    @abc.abstractmethod
    def serving_flags(self, options: ServingOptions) -> list[str]:
        """The recipe's serving fields (TP/PP/EP/DP, KV cap, context, model names) as flags."""

    def server_flags(self, options: ServingOptions, speculative: list[str]) -> list[str]:
        """The serving flags with the speculative (and acceptance) flags, in the engine's order."""
        return self.serving_flags(options) + list(speculative)

    @abc.abstractmethod
    def memory_flag_names(self) -> set[str]:
        """The flags that size the KV cache (a recipe's extra arguments may set one of them)."""

    @abc.abstractmethod
    def speculative_flags(self, config: dict) -> list[str]:
        """Server flags that make the engine speculate with ``config`` (the job spec's)."""

    @abc.abstractmethod
    def speculative_flag_names(self) -> set[str]:
        """The flags that make a server speculative (dropped for its matched baseline)."""

    @abc.abstractmethod
    def forced_acceptance_config(self, length: Optional[float], rates: Optional[Sequence[float]]) -> dict:
        """The keys that force the acceptance, merged into the speculative config ({} when nothing is forced)."""

    @abc.abstractmethod
    def forced_acceptance_check(self, version: Optional[str], cpu: bool) -> None:
        """Raise EngineError when forced acceptance cannot run (at ``version``, CPU sampling)."""

    cpu_sampling_refusal: str = "the engine refuses forced acceptance there"

    @abc.abstractmethod
    def cpu_sampling_reason(self, gpus_per_node: int, cluster_name: str, server_env: Mapping[str, str]) -> Optional[str]:
        """Why the server would sample on the CPU, or None."""

    @abc.abstractmethod
    def acceptance_flags(self, source: AcceptanceSource, level: str = "detailed") -> list[str]:
        """Server flags that make the engine return acceptance for ``source``."""

    @abc.abstractmethod
    def acceptance_flag_names(self) -> set[str]:
        """Every flag :meth:`acceptance_flags` may add (dropped with speculation)."""

    @abc.abstractmethod
    def acceptance_hint(self) -> str:
        """How to start the server so that it returns per-request stats (for an error message)."""

    @abc.abstractmethod
    def multinode_flags(self, node_rank: int, nodes: int, head: str, rpc_port: int, tp: int, pp: int, dp: int,
                        gpus_per_node: int) -> list[str]:
        """The engine's own multi-node launch flags for the server on node ``node_rank``."""

    @abc.abstractmethod
    def server_argv(self, command: str, model: str, flags: list[str], host: str, port: int | str) -> list[str]:
        """The complete server command line."""

    @abc.abstractmethod
    def read_user_args(self, server_args: Sequence[str], model: str) -> UserServerArgs:
        """The typed fields of a server argv written by hand (run.sh), read once."""

    # -- the API key

    @abc.abstractmethod
    def server_key(self, key: str, private_dir: Path) -> ServerKey:
        """How the server receives ``key``: never on its command line. A file, if the engine
        needs one, goes in ``private_dir`` (outside the run), readable by the user alone."""

    # -- the client side

    @abc.abstractmethod
    def stream_options(self, source: AcceptanceSource) -> dict:
        """Request fields the benchmark sends so the stream carries what ``source`` counts."""

    @abc.abstractmethod
    def self_draft_config(self, model: str, k: int, version: Optional[str]) -> dict:
        """The speculative config serving the target as its own draft, under the conditions
        in which every draft must be accepted at every temperature."""

    @abc.abstractmethod
    def request_stats(self, response: dict) -> Optional[dict]:
        """The per-request acceptance stats on a response body, if any."""

    # -- recipes

    def recipe_problems(self, facts: RecipeFacts) -> list[tuple[str, str, str]]:
        """(field, problem, fix) for what this engine cannot take from a recipe."""
        return []

    # -- disaggregated prefill/decode (engines with disaggregated_serving)

    def router_with_key(self, argv: list[str], key: str) -> tuple[list[str], dict[str, str]]:
        """The router's argv and extra environment that give it the servers' API key (never
        on its command line)."""
        raise EngineError(f"{self.name}: no router that takes an API key")

    def _no_disagg(self):
        return EngineError(f"{self.name} has no disaggregated serving here (fix: topology=aggregated)")

    def disagg_flags(self, role: str, connector: str, buffer_device: str, lease_s: int,
                     prefix_caching: bool = True) -> list[str]:
        """The flags that make a server the prefill or the decode side of a disaggregated pair."""
        raise self._no_disagg()

    def disagg_flag_names(self) -> set[str]:
        """Every flag :meth:`disagg_flags` may add."""
        raise self._no_disagg()

    def disagg_env(self, side_channel_port: int, cpu_cores: Optional[list] = None,
                   side_channel_host: Optional[str] = None, progress_poll_us: int = 0) -> dict[str, str]:
        """The environment of one disaggregated server (``side_channel_host``: the address
        its KV-transfer handshake listens on and tells its peers; None: the engine's default,
        this host only; ``progress_poll_us`` > 0: the KV-transfer library's progress thread
        sleeps up to that long between polls instead of polling without pause)."""
        raise self._no_disagg()

    def router_argv(self, command: str, host: str, port: int | str, prefill_urls: list[str],
                    decode_urls: list[str], policy: str = "round_robin", extra: tuple = ()) -> list[str]:
        """The router's command line in its prefill/decode mode."""
        raise self._no_disagg()

    def node_env(self, address: str, interface: Optional[str], env: Mapping[str, str]) -> dict[str, str]:
        """Environment of one rank of a multi-node server, from its node's own ``address``
        and ``interface`` (resolved on that node); a variable the user set in ``env`` wins."""
        return {}

    def cpu_server_env(self, cpu_flags: frozenset[str], env: Mapping[str, str]) -> dict[str, str]:
        """Environment a server process of this engine's CPU build needs on a CPU with
        ``cpu_flags`` (on top of ``env``, which may ask for more); empty where it needs nothing
        (with an empty ``env``: nothing that CPU itself asks for)."""
        return {}

    def cpu_attention_kernel(self, cpu_flags: set[str], dtype: Optional[str], block_size: Optional[int],
                             head_size: Optional[int]) -> Optional[str]:
        """The attention kernel the engine's CPU build picks for a dense model on a CPU with
        ``cpu_flags`` (/proc/cpuinfo), as the ISA it runs on ("amx", "avx512", "avx2"); None
        where the engine's rule is not known here."""
        return None
