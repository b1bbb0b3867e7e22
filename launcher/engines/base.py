"""What every inference engine tells the rest of the product: the seam.

An engine owns its server argv (built from typed spec fields, never parsed
back), its readiness endpoints, its Prometheus metric names, how it returns
per-request acceptance, and which features each of its versions has. The
product asks an :class:`Engine`; it never spells an engine's flag itself.
Standard library only: the node side imports this under a bare engine Python.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
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


class Engine:
    """One inference engine. Subclasses fill the class attributes and the methods."""
    name: str = ""
    health_path: str = "/health"
    models_path: str = "/v1/models"
    version_path: str = "/version"
    metrics: MetricNames
    api_key_env: Optional[str] = "VLLM_API_KEY"  # where the server reads its key; None: no variable
    disaggregated_serving: bool = False  # topology=disagg: prefill/decode argv, NIXL env, a router (docs/disagg.md)

    def capabilities(self, version: Optional[str]) -> Capabilities:
        raise NotImplementedError

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

    def acceptance_flags(self, source: AcceptanceSource, level: str) -> list[str]:
        """Server flags that make the engine return acceptance for ``source``."""
        raise NotImplementedError

    def acceptance_flag_names(self) -> set[str]:
        """Every flag :meth:`acceptance_flags` may add (dropped with speculation)."""
        raise NotImplementedError

    def speculative_flags(self, config: dict) -> list[str]:
        """Server flags that make the engine speculate with ``config`` (the job spec's)."""
        raise NotImplementedError

    def serving_flags(self, options: ServingOptions) -> Optional[list[str]]:
        """The serving fields as this engine's flags; None: launcher.server_args spells
        them (vLLM's flags, the first engine's)."""
        return None

    def server_argv(self, command: str, model: str, flags: list[str], host: str, port: int | str) -> list[str]:
        raise NotImplementedError

    def version_probe_argv(self, command: str) -> Optional[list[str]]:
        """A command printing the installed engine version, from the server command;
        None when it cannot be asked without starting the server (a container step)."""
        raise NotImplementedError

    def stream_options(self, source: AcceptanceSource) -> dict:
        """Request fields the benchmark sends so the stream carries what ``source`` counts."""
        raise NotImplementedError

    def self_draft_config(self, model: str, k: int, version: Optional[str]) -> dict:
        """The speculative config serving the target as its own draft, under the conditions
        in which every draft must be accepted at every temperature."""
        raise NotImplementedError

    def request_stats(self, response: dict) -> Optional[dict]:
        """The per-request acceptance stats on a response body, if any."""
        raise NotImplementedError

    def cpu_server_env(self, cpu_flags: frozenset[str], env: Mapping[str, str]) -> dict[str, str]:
        """Environment a server process of this engine's CPU build needs on a CPU with
        ``cpu_flags`` (on top of ``env``); empty where it needs nothing."""
        return {}

    def cpu_attention_kernel(self, cpu_flags: set[str], dtype: Optional[str], block_size: Optional[int],
                             head_size: Optional[int]) -> Optional[str]:
        """The attention kernel the engine's CPU build picks for a dense model on a CPU with
        ``cpu_flags`` (/proc/cpuinfo), as the ISA it runs on ("amx", "avx512", "avx2"); None
        where the engine's rule is not known here."""
        return None
