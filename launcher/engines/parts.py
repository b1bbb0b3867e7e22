"""The engine seam in parts: what each caller needs of an engine, one small ABC each.

An engine (:class:`launcher.engines.base.Engine`) is all of them; a caller names the part it uses
(``eng: Readiness``, ``eng: ApiKey``), as srt-slurm's backend protocol names what a backend must
do. The parts, and who asks (docs/engines.md):

- :class:`ServerCommand`: the server's argv from typed fields (serving, multi-node), run.sh's argv
  read once, the version probe: the planner, the job spec, the node.
- :class:`Speculation`: the flags that make a server speculate, the known-answer probe's config.
- :class:`Acceptance`: what a version has, where acceptance comes from, the flags that make a server
  report it, and how a response or a stream carries it: validation, the node, the benchmark.
- :class:`ForcedAcceptance`: forced (synthetic) acceptance: validation, the planner.
- :class:`Readiness`: the endpoints that say a server is up and which version it is, its counters,
  its HTTP keep-alive: the node's readiness, the benchmark.
- :class:`Disaggregation`: prefill/decode servers, their KV transfer and the router (the base
  refuses them in one line): the node's disaggregated group, validation, the dry run.
- :class:`ApiKey`: how a server takes the API key: launcher.runtime.apikey, the node.
- :class:`HostEnvironment`: a server process's environment on its host (the CPU build, a
  multi-node rank): the node, the benchmark's record of where a point ran.
- :class:`RecipeChecks`: what only this engine refuses in a recipe: validation.

Standard library only: the node side imports this under a bare engine Python.
"""
from __future__ import annotations

import abc
import json
from pathlib import Path
from typing import Mapping, Optional, Sequence

from launcher.engines.types import (AcceptanceSource, Capabilities, EngineError, KvTransferMetrics, MetricNames,
                                    RecipeFacts, ServerKey, ServingOptions, UserServerArgs)


class ServerCommand(abc.ABC):
    """The server's command line, built from typed spec fields (never parsed back)."""
    default_command: str = ""
    default_image: Optional[str] = None

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
    def multinode_flags(self, node_rank: int, nodes: int, head: str, rpc_port: int, tp: int, pp: int, dp: int,
                        gpus_per_node: int) -> list[str]:
        """The engine's own multi-node launch flags for the server on node ``node_rank``."""

    @abc.abstractmethod
    def server_argv(self, command: str, model: str, flags: list[str], host: str, port: int | str) -> list[str]:
        """The complete server command line."""

    @abc.abstractmethod
    def read_user_args(self, server_args: Sequence[str], model: str) -> UserServerArgs:
        """The typed fields of a server argv written by hand (run.sh), read once."""

    @abc.abstractmethod
    def version_probe_argv(self, command: str) -> Optional[list[str]]:
        """A command printing the installed engine version, from the server command;
        None when it cannot be asked without starting the server (a container step)."""


class Speculation(abc.ABC):
    """The flags that make a server speculate (launcher.engines.speculation builds a job's)."""

    @abc.abstractmethod
    def speculative_flags(self, config: dict) -> list[str]:
        """Server flags that make the engine speculate with ``config`` (the job spec's)."""

    @abc.abstractmethod
    def speculative_flag_names(self) -> set[str]:
        """The flags that make a server speculative (dropped for its matched baseline)."""

    @abc.abstractmethod
    def self_draft_config(self, model: str, k: int, version: Optional[str]) -> dict:
        """The speculative config serving the target as its own draft, under the conditions
        in which every draft must be accepted at every temperature."""


class Acceptance(abc.ABC):
    """What a version has, and where and how a server reports its acceptance."""
    name: str = ""

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
    def acceptance_flags(self, source: AcceptanceSource, level: str = "detailed") -> list[str]:
        """Server flags that make the engine return acceptance for ``source``."""

    @abc.abstractmethod
    def acceptance_flag_names(self) -> set[str]:
        """Every flag :meth:`acceptance_flags` may add (dropped with speculation)."""

    @abc.abstractmethod
    def acceptance_hint(self) -> str:
        """How to start the server so that it returns per-request stats (for an error message)."""

    @abc.abstractmethod
    def stream_options(self, source: AcceptanceSource) -> dict:
        """Request fields the benchmark sends so the stream carries what ``source`` counts."""

    @abc.abstractmethod
    def request_stats(self, response: dict) -> Optional[dict]:
        """The per-request acceptance stats on a response body, if any."""


class ForcedAcceptance(abc.ABC):
    """Forced (synthetic) acceptance: the serving system benchmarked at a chosen acceptance."""
    cpu_sampling_refusal: str = "the engine refuses forced acceptance there"

    @abc.abstractmethod
    def forced_acceptance_config(self, length: Optional[float], rates: Optional[Sequence[float]]) -> dict:
        """The keys that force the acceptance, merged into the speculative config ({} when nothing is forced)."""

    @abc.abstractmethod
    def forced_acceptance_check(self, version: Optional[str], cpu: bool) -> None:
        """Raise EngineError when forced acceptance cannot run (at ``version``, CPU sampling)."""

    @abc.abstractmethod
    def cpu_sampling_reason(self, gpus_per_node: int, cluster_name: str, server_env: Mapping[str, str]) -> Optional[str]:
        """Why the server would sample on the CPU, or None."""

    # Server environment variables that change what a run measures (the engine reads them, no flag
    # says them): they are part of the run's identity and its label (launcher.contracts.run_identity).
    measured_env: tuple[str, ...] = ()
    # Whether forced acceptance draws one length per verify step of the whole batch (SGLang)
    # rather than per request (vLLM): the forced verdict's tolerance counts fewer draws.
    forced_draw_per_batch: bool = False

    def speculative_env(self, speculative_config: Optional[Mapping]) -> dict[str, str]:
        """The server environment a speculative config asks for on top of the recipe's
        server.env (an engine that forces acceptance through its environment); {} by default."""
        return {}


class Readiness(abc.ABC):
    """The endpoints that say a server is up and which version it runs, and its counters."""
    health_path: str = "/health"
    models_path: str = "/v1/models"
    version_path: str = "/version"
    metrics: MetricNames  # the speculative-decoding counters (Prometheus)
    # How long the HTTP server keeps an idle connection open: the variable that sets it, if any,
    # and its default (uvicorn's 5 s, which vLLM and SGLang keep). The benchmark's client must drop
    # an idle pooled connection before the server does (launcher.bench.aiperf_runner.keep_alive).
    http_keep_alive_env: Optional[str] = None
    http_keep_alive_default_s: float = 5.0

    def version_from_response(self, body: bytes) -> Optional[str]:
        """The version in the answer of ``version_path`` (a JSON object with "version")."""
        try:
            v = json.loads(body).get("version")
        except (ValueError, AttributeError):
            return None
        return str(v) if v else None

    def chosen_settings(self, log_text: str) -> dict[str, str]:
        """Serving settings the engine chose for itself, as its start-up log says them (setting ->
        value, e.g. {"async_scheduling": "off"}); {} when the engine says none this reader knows."""
        return {}

    def inferred_chosen_settings(self, method: Optional[str], version: Optional[str],
                                 argv: Sequence[str]) -> dict[str, str]:
        """What :meth:`chosen_settings` would have read, from the engine's own rule by speculative
        method (``"none"`` without speculation) and version, for results recorded without it; {}
        where no rule is known or the user set the setting in ``argv``."""
        return {}


class Disaggregation(abc.ABC):
    """Disaggregated prefill/decode (engines with ``disaggregated_serving``; the others refuse it)."""
    name: str = ""
    disaggregated_serving: bool = False  # topology=disagg: prefill/decode argv, KV-transfer env, a router (docs/disagg.md)
    kv_transfer_metrics: Optional[KvTransferMetrics] = None
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


class ApiKey(abc.ABC):
    """How a server takes the job's API key: never on its command line."""
    key_flag: str = "--api-key"  # the server's own key flag: refused among a job's arguments
    key_env: Optional[str] = None  # an environment variable the user may export the key in, as the engine reads it

    @abc.abstractmethod
    def server_key(self, key: str, private_dir: Path) -> ServerKey:
        """How the server receives ``key``: never on its command line. A file, if the engine
        needs one, goes in ``private_dir`` (outside the run), readable by the user alone."""


class HostEnvironment(abc.ABC):
    """A server process's environment on its host: the CPU build's needs, a multi-node rank's address."""
    cpu_bind_env: Optional[str] = None  # the CPU build's core-binding variable, if any

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


class RecipeChecks(abc.ABC):
    """What only this engine refuses in a recipe (config.validate asks)."""

    def recipe_problems(self, facts: RecipeFacts) -> list[tuple[str, str, str]]:
        """(field, problem, fix) for what this engine cannot take from a recipe."""
        return []


PARTS = (ServerCommand, Speculation, Acceptance, ForcedAcceptance, Readiness, Disaggregation, ApiKey,
         HostEnvironment, RecipeChecks)
