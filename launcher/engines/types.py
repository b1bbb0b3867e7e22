"""The values the engine seam speaks in: where acceptance comes from, what a version has, the
counters it exports, the recipe's serving fields, how a server takes its key, what a recipe and a
hand-written argv say. Frozen dataclasses, standard library only (the node imports them under a
bare engine Python)."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable, Mapping, Optional


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
    # KV bytes per token of the target and its draft (launcher.login.kv_budget), None where their
    # config.json cannot be read: what an engine capping its KV pool in tokens needs (SGLang)
    kv_bytes_per_token: Optional[int] = None



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
    server_env: Mapping[str, str] = field(default_factory=dict)  # the recipe's server.env


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
