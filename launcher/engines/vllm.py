"""vLLM behind the engine seam: flags, endpoints, metric names and what each
version has (facts in docs/engines.md, with where each was seen)."""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Mapping, Optional, Sequence

from launcher.engines.forced_acceptance import speculative_keys
from launcher.engines.vllm_cpu import AMX_FLAG, AMX_PERMISSION_HOOKS, CPU_DEFAULT_BLOCK_SIZE  # noqa: F401 (re-exported)
from launcher.engines.vllm_cpu import NIXL_PROGRESS_DELAY_ENV, attention_kernel, server_env
import launcher.engines.vllm_scheduling as vllm_scheduling
from launcher.engines.base import Engine
from launcher.engines.types import (AcceptanceSource, Capabilities, EngineError, KvTransferMetrics, MetricNames,
                                    ServerKey, ServingOptions, UserServerArgs)
from launcher.engines.versions import parse_version
from launcher.engines.flags import (drop_flags, flag_value, has_flag, kv_cache_cap_bytes, pick_flags, served_name,
                                    speculative_config)

SPEC_METRICS_FLAG = "--per-request-spec-decode-metrics"
SPEC_CONFIG_FLAG = "--speculative-config"
KV_TRANSFER_FLAG = "--kv-transfer-config"
NO_PREFIX_CACHING_FLAG = "--no-enable-prefix-caching"
# The NIXL connector's handshake port, one per server on a host (vLLM's envs.py; default 5600).
NIXL_SIDE_CHANNEL_PORT_ENV = "VLLM_NIXL_SIDE_CHANNEL_PORT"
# The address the handshake listens on and that a prefill server hands decode in its
# kv_transfer_params (remote_host; vLLM's default "localhost": one host only)
NIXL_SIDE_CHANNEL_HOST_ENV = "VLLM_NIXL_SIDE_CHANNEL_HOST"
# The CPU build's OpenMP core binding ("0,1|2,3": one list per rank; vllm/utils/ompmultiprocessing.py)
CPU_BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"
# KV-transfer counters on a disaggregated decode server (vLLM 0.32: v1/metrics/loggers.py and
# distributed/kv_transfer/kv_connector/v1/nixl/stats.py), without Prometheus' `_total` suffix.
PROMPT_TOKENS_BY_SOURCE = "vllm:prompt_tokens_by_source"  # label source: the three below
PROMPT_TOKEN_SOURCES = ("external_kv_transfer", "local_compute", "local_cache_hit")
NIXL_XFER_TIME = "vllm:nixl_xfer_time_seconds"  # histogram: count = transfers, sum = seconds
NIXL_BYTES = "vllm:nixl_bytes_transferred"  # histogram: sum = bytes
NIXL_FAILED_TRANSFERS = "vllm:nixl_num_failed_transfers"
NIXL_EXPIRED_REQUESTS = "vllm:nixl_num_kv_expired_reqs"
# Every server's own prefix cache, in tokens (vLLM 0.32 v1/metrics/loggers.py): looked up, found
PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries"
PREFIX_CACHE_HITS = "vllm:prefix_cache_hits"
REQUESTS_DONE = "vllm:request_success"  # label finished_reason
# Per-request time histograms, seconds (vLLM 0.32 v1/metrics/loggers.py). On a decode server the
# time to first token runs from its arrival there: the KV pull and the first step included.
REQUEST_QUEUE_TIME = "vllm:request_queue_time_seconds"
REQUEST_PREFILL_TIME = "vllm:request_prefill_time_seconds"
TIME_TO_FIRST_TOKEN = "vllm:time_to_first_token_seconds"
# Where vllm-router's P/D mode reads the key it sends to the servers (router_with_key)
ROUTER_KEY_ENV = "OPENAI_API_KEY"
# vllm-router's listening sockets and key: where it listens (its API, its Prometheus port) is the
# launcher's (topology.router_host), never router_extra_args'; its --api-key is the key it sends
# the servers (DP mode), on its command line
ROUTER_LISTEN_FLAGS = ("--host", "--port", "--prometheus-host", "--prometheus-port", "--api-key")
# Why vllm-router 0.1.17 cannot listen off loopback here (docs/disagg.md "Who can reach what"):
# its CLI has no setting or variable that makes it check a client's key (--api-key is the key it
# sends the servers, and would be on its command line; its Rust core's api_key_validation_urls
# is not reachable from its CLI and sends the client's token to an outside URL).
ROUTER_CLIENT_KEY_GAP = ("vllm-router 0.1.17 checks no client key (its --api-key is the key it sends the "
                         "servers, on its command line) and forwards every request with the servers' key")
# vllm-router 0.1.17's --policy choices in its P/D mode (vllm-router --help). cache_aware keeps
# a prefix tree of the request texts it sent to each prefill server and sends a request where
# the longest prefix went (a conversation's later turns to the server holding its earlier
# ones; measured here, docs/disagg.md). kv_aware reads the servers' KV events instead.
ROUTER_POLICIES = ("round_robin", "power_of_two", "cache_aware", "random", "consistent_hash")
REFUSED_ROUTER_POLICIES = {
    "kv_aware": "needs the prefill servers' KV events (--pd-kv-events), which vllm-router 0.1.17 reads at "
                "block size 16 and the launcher does not wire yet",
    "sticky_least_loaded": "not tried with the P/D mode here"}
# A multi-node rank's own address (vLLM's get_ip(): else a UDP "connect" to 8.8.8.8, which fails on a
# node with no default route) and the interface torch's Gloo (CPU collectives) binds (else the hostname's).
HOST_IP_ENV = "VLLM_HOST_IP"
GLOO_IFNAME_ENV = "GLOO_SOCKET_IFNAME"
API_KEY_ENV = "VLLM_API_KEY"  # where vLLM reads its key (the user may export it there too)
MEMORY_FLAGS = ("--kv-cache-memory-bytes", "--gpu-memory-utilization")
# Disaggregated prefill/decode roles and vLLM's kv_role for each (vllm-cpu 0.32 + nixl 1.5.1, measured).
DISAGG_KV_ROLES = {"prefill": "kv_producer", "decode": "kv_consumer"}

# --per-request-spec-decode-metrics: absent through 0.28.0 (vLLM PR #48915 came later; a
# user report says 0.28.0 lacks it, and 0.26.0 lacks it on the H200), present in 0.32.0
# (vllm-cpu, verified here). Versions between are unknown: "auto" counts stream chunks
# there, and bench.acceptance_source=per_request_stats may ask for the stats explicitly.
PER_REQUEST_KNOWN_ABSENT_UP_TO = (0, 28, 0)
PER_REQUEST_VERIFIED_FROM = (0, 32, 0)
# draft_sample_method ("probabilistic") and synthetic acceptance: both in 0.26.0 (H200) and 0.32.0.
PROBABILISTIC_DRAFTING_FROM = (0, 26, 0)
SYNTHETIC_ACCEPTANCE_FROM = (0, 26, 0)


def multinode_flags(node_rank: int, nodes: int, head: str, rpc_port: int, tp: int, pp: int, dp: int,
                    gpus_per_node: int) -> list[str]:
    """vLLM's own multi-node launch flags for the server on node ``node_rank``.

    Data parallel across nodes (each replica fits on a node): every node runs
    ``dp / nodes`` local replicas; the head serves the API, the others are
    ``--headless`` with their starting DP rank. Otherwise one model spans the
    nodes (TP x PP > one node): ``--nnodes/--node-rank/--master-addr/--master-port``,
    ranks > 0 ``--headless``.
    """
    if nodes <= 1:
        return []
    if dp > 1 and tp * pp <= gpus_per_node and dp % nodes == 0:
        local = dp // nodes
        f = ["--data-parallel-size-local", str(local), "--data-parallel-address", head,
             "--data-parallel-rpc-port", str(rpc_port)]
        if node_rank > 0:
            f += ["--data-parallel-start-rank", str(node_rank * local), "--headless"]
        return f
    f = ["--nnodes", str(nodes), "--node-rank", str(node_rank), "--master-addr", head,
         "--master-port", str(rpc_port)]
    return f + (["--headless"] if node_rank > 0 else [])


class VLLM(Engine):
    name = "vllm"
    result_name = "VLLM"
    default_command = "vllm serve"
    default_image = "vllm/vllm-openai:v0.32.0"
    key_env = API_KEY_ENV
    cpu_sampling_refusal = "vLLM refuses it there (\"Synthetic acceptance not supported with CPU sampling\")"
    cpu_bind_env = CPU_BIND_ENV
    chosen_settings = staticmethod(vllm_scheduling.chosen_settings)  # its log's "Asynchronous scheduling is ..."
    inferred_chosen_settings = staticmethod(vllm_scheduling.inferred_chosen_settings)  # 0.26's rule
    http_keep_alive_env = "VLLM_HTTP_TIMEOUT_KEEP_ALIVE"  # vllm/envs.py: int seconds, default 5
    disaggregated_serving = True
    default_router_command = "vllm-router"  # vllm-project/router (PyPI vllm-router), its P/D mode
    routers = ("vllm-router",)
    kv_transfer_metrics = KvTransferMetrics(
        prompt_tokens_by_source=PROMPT_TOKENS_BY_SOURCE, prompt_token_sources=PROMPT_TOKEN_SOURCES,
        xfer_time=NIXL_XFER_TIME, bytes=NIXL_BYTES, failed_transfers=NIXL_FAILED_TRANSFERS,
        expired_requests=NIXL_EXPIRED_REQUESTS, prefix_cache_queries=PREFIX_CACHE_QUERIES,
        prefix_cache_hits=PREFIX_CACHE_HITS, requests_done=REQUESTS_DONE, queue_time=REQUEST_QUEUE_TIME,
        prefill_time=REQUEST_PREFILL_TIME, first_token_time=TIME_TO_FIRST_TOKEN)
    router_policies = ROUTER_POLICIES
    refused_router_policies = REFUSED_ROUTER_POLICIES
    router_listen_flags = ROUTER_LISTEN_FLAGS
    router_client_key_gap = ROUTER_CLIENT_KEY_GAP
    metrics = MetricNames(drafts="vllm:spec_decode_num_drafts", accepted="vllm:spec_decode_num_accepted_tokens",
                          draft_tokens="vllm:spec_decode_num_draft_tokens",
                          accepted_per_pos="vllm:spec_decode_num_accepted_tokens_per_pos")

    def capabilities(self, version: Optional[str]) -> Capabilities:
        v = parse_version(version)
        if v is None:  # unknown: assume a current release; the node probes the version before serving
            return Capabilities(per_request_stats=True, probabilistic_drafting=True, synthetic_acceptance=True,
                                version_known=False)
        return Capabilities(per_request_stats=v >= PER_REQUEST_VERIFIED_FROM,
                            probabilistic_drafting=v >= PROBABILISTIC_DRAFTING_FROM,
                            synthetic_acceptance=v >= SYNTHETIC_ACCEPTANCE_FROM)

    def acceptance_source(self, requested: str, version: Optional[str]) -> AcceptanceSource:
        v = parse_version(version)
        if requested == AcceptanceSource.PER_REQUEST_STATS.value and v is not None \
                and PER_REQUEST_KNOWN_ABSENT_UP_TO < v < PER_REQUEST_VERIFIED_FROM:
            return AcceptanceSource.PER_REQUEST_STATS  # unverified middle: the user's call
        return super().acceptance_source(requested, version)

    def acceptance_flags(self, source: AcceptanceSource, level: str = "detailed") -> list[str]:
        return [SPEC_METRICS_FLAG, level] if source is AcceptanceSource.PER_REQUEST_STATS else []

    def acceptance_flag_names(self) -> set[str]:
        return {SPEC_METRICS_FLAG}

    def speculative_flags(self, config: dict) -> list[str]:
        return [SPEC_CONFIG_FLAG, json.dumps(config, separators=(",", ":"), sort_keys=True)]

    def speculative_flag_names(self) -> set[str]:
        """The flags that make a server speculative (dropped for its matched baseline)."""
        return {SPEC_CONFIG_FLAG, SPEC_METRICS_FLAG}

    def acceptance_hint(self) -> str:
        return f"start it with {SPEC_CONFIG_FLAG} and {SPEC_METRICS_FLAG} detailed (run.sh adds the latter)"

    def forced_acceptance_config(self, length, rates) -> dict:
        return speculative_keys(length, rates)

    def cpu_sampling_reason(self, gpus_per_node: int, cluster_name: str, server_env: Mapping[str, str]) -> Optional[str]:
        """The CPU is decided from the cluster (``gpus_per_node: 0`` is a CPU-only cluster, e.g.
        cluster=local) or from the server's environment (``VLLM_CPU_*``: the CPU build, vllm-cpu)."""
        if gpus_per_node <= 0:
            return f"cluster '{cluster_name}' has no GPUs (cluster.gpus_per_node=0), so vLLM samples on the CPU"
        cpu_env = sorted(k for k in server_env if k.startswith("VLLM_CPU_"))
        if cpu_env:
            return f"server.env sets {cpu_env[0]}: the CPU build of vLLM (vllm-cpu) samples on the CPU"
        return None

    def serving_flags(self, o: ServingOptions) -> list[str]:
        """The recipe's serving fields as vLLM flags."""
        return self.server_flags(o, [])

    def server_flags(self, o: ServingOptions, speculative: list[str]) -> list[str]:
        """vLLM's order: names and parallelism, the speculative flags, then sizes and memory."""
        f: list[str] = ["--served-model-name", o.served_name]
        if o.tokenizer:
            f += ["--tokenizer", o.tokenizer]
        f += ["--tensor-parallel-size", str(o.tp)]
        if o.pp > 1:
            f += ["--pipeline-parallel-size", str(o.pp)]
        if o.dp > 1:
            f += ["--data-parallel-size", str(o.dp)]
        if o.ep > 1:
            f += ["--enable-expert-parallel"]
        f += speculative
        if o.max_model_len:
            f += ["--max-model-len", str(o.max_model_len)]
        if o.max_num_batched_tokens:
            f += ["--max-num-batched-tokens", str(o.max_num_batched_tokens)]
        if o.dtype:
            f += ["--dtype", o.dtype]
        if o.kv_cache_memory_bytes:
            f += ["--kv-cache-memory-bytes", str(o.kv_cache_memory_bytes)]
        elif o.gpu_memory_utilization is not None:
            f += ["--gpu-memory-utilization", str(o.gpu_memory_utilization)]
        if o.enforce_eager:
            f += ["--enforce-eager"]
        return f

    def memory_flag_names(self) -> set[str]:
        return set(MEMORY_FLAGS)

    def multinode_flags(self, node_rank: int, nodes: int, head: str, rpc_port: int, tp: int, pp: int, dp: int,
                        gpus_per_node: int) -> list[str]:
        return multinode_flags(node_rank, nodes, head, rpc_port, tp, pp, dp, gpus_per_node)

    def read_user_args(self, server_args: Sequence[str], model: str) -> UserServerArgs:
        """run.sh's server argv (vLLM's flags): the speculative config, TP, tokenizer, served
        name and KV cap; the acceptance flags it gave, else per-request stats."""
        args = list(server_args)
        spec_cfg = speculative_config(args)
        acceptance = pick_flags(args, self.acceptance_flag_names())
        if spec_cfg and not acceptance:  # the per-request stats the benchmark counts
            acceptance = self.acceptance_flags(AcceptanceSource.PER_REQUEST_STATS)
        return UserServerArgs(
            speculative_config=spec_cfg, speculative_config_invalid=spec_cfg is None and has_flag(args, SPEC_CONFIG_FLAG),
            tp=int(flag_value(args, "--tensor-parallel-size") or 1), tokenizer=flag_value(args, "--tokenizer"),
            served_name=served_name(args, model), kv_cache_cap_bytes=kv_cache_cap_bytes(args),
            flags=drop_flags(args, self.speculative_flag_names() | self.acceptance_flag_names()),
            acceptance=acceptance if spec_cfg else [])

    def server_key(self, key: str, private_dir: Path) -> ServerKey:
        """vLLM reads its key from VLLM_API_KEY: the server's environment, no file, no argv."""
        return ServerKey(env={API_KEY_ENV: key})

    def server_argv(self, command: str, model: str, flags: list[str], host: str, port: int | str) -> list[str]:
        """`vllm serve` takes the model as a positional argument, the OpenAI api_server
        module (the CPU build's entry point) as --model. Host and port are ours."""
        cmd = shlex.split(command)
        model_args = [model] if cmd and cmd[-1] == "serve" else ["--model", model]
        return cmd + model_args + drop_flags(list(flags), {"--host", "--port"}) + ["--host", host, "--port", str(port)]

    def version_probe_argv(self, command: str) -> Optional[list[str]]:
        cmd = shlex.split(command)
        if not cmd:
            return None
        if "-m" in cmd[1:]:  # <python> -m vllm...: read the distribution's metadata, no torch import
            code = ("import importlib.metadata as m\n"
                    "for d in ('vllm', 'vllm-cpu'):\n"
                    "    try:\n        print(m.version(d)); break\n"
                    "    except m.PackageNotFoundError:\n        pass\n")
            return [cmd[0], "-c", code]
        if cmd[0].rsplit("/", 1)[-1] == "vllm":
            return [cmd[0], "--version"]
        return None

    def stream_options(self, source: AcceptanceSource) -> dict:
        if source is AcceptanceSource.STREAM_CHUNKS:  # usage on every chunk: its tokens are a difference
            return {"stream_options": {"include_usage": True, "continuous_usage_stats": True}}
        return {}

    def self_draft_config(self, model: str, k: int, version: Optional[str]) -> dict:
        """The target as its own draft. vLLM drafts greedily by default: the draft's
        probabilities are taken as one-hot, so at T > 0 a draft is accepted with the
        target's probability of it, not always. Only probabilistic drafting makes the
        known answer (every draft accepted at every temperature) hold."""
        cfg = {"method": "draft_model", "model": model, "num_speculative_tokens": int(k)}
        if self.capabilities(version).probabilistic_drafting:
            cfg["draft_sample_method"] = "probabilistic"
        return cfg

    # -- disaggregated prefill/decode (topology=disagg)

    def disagg_flags(self, role: str, connector: str, buffer_device: str, lease_s: int,
                     prefix_caching: bool = True) -> list[str]:
        """The flags that make a server the prefill or the decode side of a disaggregated
        pair: the KV connector with its role, the buffer device, and a lease long enough
        that the prefill side keeps the blocks until decode has read them (vLLM's default
        30 s released them first on a loaded CPU: measured). ``prefix_caching=False`` turns
        the server's own prefix cache off (on decode: a transferred block kept there would
        serve a repeated prompt without a transfer)."""
        if role not in DISAGG_KV_ROLES:
            raise EngineError(f"unknown disaggregated role {role!r} (known: {', '.join(DISAGG_KV_ROLES)})")
        cfg = {"kv_connector": connector, "kv_role": DISAGG_KV_ROLES[role], "kv_buffer_device": buffer_device,
               "kv_connector_extra_config": {"kv_lease_duration": int(lease_s)}}
        f = [KV_TRANSFER_FLAG, json.dumps(cfg, separators=(",", ":"), sort_keys=True)]
        return f + ([] if prefix_caching else [NO_PREFIX_CACHING_FLAG])

    def disagg_flag_names(self) -> set[str]:
        return {KV_TRANSFER_FLAG, NO_PREFIX_CACHING_FLAG, "--enable-prefix-caching"}

    def disagg_env(self, side_channel_port: int, cpu_cores: Optional[list] = None,
                   side_channel_host: Optional[str] = None, progress_poll_us: int = 0) -> dict[str, str]:
        """One disaggregated server's environment: its NIXL side-channel port and host (across nodes
        its node's address, which prefill hands decode), on the CPU build its cores, one list per
        rank (two servers on vLLM's own binding spun on the same cores: docs/disagg.md), and a poll
        timeout for NIXL's progress thread where ``progress_poll_us`` > 0 (the CPU build's hook
        sets it: NIXL's Python API gives none, and the thread takes a core while idle)."""
        env = {NIXL_SIDE_CHANNEL_PORT_ENV: str(int(side_channel_port)),
               **({NIXL_SIDE_CHANNEL_HOST_ENV: side_channel_host} if side_channel_host else {}),
               **({NIXL_PROGRESS_DELAY_ENV: str(int(progress_poll_us))} if progress_poll_us > 0 else {})}
        if cpu_cores:
            env[CPU_BIND_ENV] = "|".join(",".join(str(c) for c in rank) for rank in cpu_cores)
        return env

    def router_argv(self, command: str, host: str, port: int | str, prefill_urls: list[str],
                    decode_urls: list[str], policy: str = "round_robin", extra: tuple = (),
                    metrics_port: Optional[int] = None) -> list[str]:
        """vLLM's router (PyPI vllm-router, vllm-project/router) in its prefill/decode mode
        with the NIXL connector: a request goes to a prefill server with max_tokens 1 and
        do_remote_decode, then to a decode server with the returned kv_transfer_params.
        Its API and its Prometheus port both listen on ``host``."""
        a = shlex.split(command) + ["--vllm-pd-disaggregation", "--kv-connector", "nixl"]
        for u in prefill_urls:
            a += ["--prefill", u]
        for u in decode_urls:
            a += ["--decode", u]
        a += ["--policy", policy, "--host", host, "--port", str(port)]
        # its own Prometheus port (default 29000: a second router on the host failed to start)
        return a + (["--prometheus-host", host, "--prometheus-port", str(metrics_port)] if metrics_port else []) \
            + list(extra)

    def router_with_key(self, argv: list[str], key: str) -> tuple[list[str], dict[str, str]]:
        """vllm-router 0.1.17's P/D mode sends ``Bearer $OPENAI_API_KEY`` from its environment
        to the servers; it neither passes on nor checks the client's key (measured:
        docs/disagg.md). Its --api-key (DP mode) would be on its command line."""
        return list(argv), {ROUTER_KEY_ENV: key}

    def request_stats(self, response: dict) -> Optional[dict]:
        return (response.get("metrics") or {}).get("speculative_decoding") or None

    def cpu_attention_kernel(self, cpu_flags: set[str], dtype: Optional[str], block_size: Optional[int],
                             head_size: Optional[int]) -> Optional[str]:
        return attention_kernel(cpu_flags, dtype, block_size, head_size)

    def forced_acceptance_check(self, version: Optional[str], cpu: bool) -> None:
        """Forced (synthetic) acceptance needs GPU sampling and a version that has it."""
        if cpu:
            raise EngineError("vLLM's synthetic acceptance needs GPU sampling: the CPU build's engine dies on the "
                              "first request ('Synthetic acceptance not supported with CPU sampling')")
        if not self.capabilities(version).synthetic_acceptance:
            raise EngineError(f"vLLM {version} has no synthetic acceptance (fix: an image of vLLM >= "
                              f"{'.'.join(map(str, SYNTHETIC_ACCEPTANCE_FROM))})")


    def cpu_server_env(self, cpu_flags: frozenset[str], env: Mapping[str, str]) -> dict[str, str]:
        return server_env(cpu_flags, env)

    def node_env(self, address: str, interface: Optional[str], env: Mapping[str, str]) -> dict[str, str]:
        """VLLM_HOST_IP (the address this rank announces) and GLOO_SOCKET_IFNAME (where its
        CPU collectives bind), each unless the user set it."""
        out = {} if env.get(HOST_IP_ENV) else {HOST_IP_ENV: address}
        if interface and interface != "lo" and not env.get(GLOO_IFNAME_ENV):
            out[GLOO_IFNAME_ENV] = interface
        return out


__all__ = ["VLLM", "SPEC_METRICS_FLAG", "SPEC_CONFIG_FLAG", "KV_TRANSFER_FLAG", "NIXL_SIDE_CHANNEL_PORT_ENV",
           "DISAGG_KV_ROLES", "API_KEY_ENV", "EngineError"]
