"""Build the inference server's argv from a recipe. Pure functions, no processes.

This module is the one authority for server flags: its output is a list (safe
for values with spaces), and no flag appears twice. Extra arguments from the
recipe win over computed ones rather than being appended after them.
"""
from __future__ import annotations

import json
from typing import Optional

from launcher import forced_acceptance
from launcher.config.schema import LauncherConfig
from launcher.engines import AcceptanceSource, EngineError, ServingOptions, get_engine, version_from_image
from launcher.errors import ConfigError
from launcher.engines.flags import drop_flags, flag_names
from launcher.engines.vllm import SPEC_METRICS_FLAG  # noqa: F401 (re-exported)


def engine_version(cfg: LauncherConfig) -> Optional[str]:
    """The engine version the recipe states: server.engine_version, else the container
    image's tag; None when neither says (the node probes it)."""
    return cfg.server.engine_version or version_from_image(cfg.cluster.container_image)


def acceptance_source(cfg: LauncherConfig) -> AcceptanceSource:
    """bench.acceptance_source resolved for the engine at the recipe's version."""
    try:
        return get_engine(cfg.server.engine).acceptance_source(cfg.bench.acceptance_source, engine_version(cfg))
    except EngineError as e:
        raise ConfigError("bench.acceptance_source", str(e)) from None

MEMORY_FLAGS = ("--kv-cache-memory-bytes", "--gpu-memory-utilization")


def speculative_config(cfg: LauncherConfig, k: Optional[int] = None) -> Optional[dict]:
    """vLLM's --speculative-config for the recipe, or None without speculation."""
    d = cfg.draft
    if d.method == "none":
        return None
    spec: dict = {"method": d.method, "num_speculative_tokens": int(k if k is not None else d.num_speculative_tokens)}
    if d.model:
        spec["model"] = d.model
    if cfg.parallel.draft_tp is not None:
        spec["draft_tensor_parallel_size"] = cfg.parallel.draft_tp
    spec.update(d.extra)
    fa = d.forced_acceptance  # vLLM's synthetic acceptance (launcher/forced_acceptance.py)
    spec.update(forced_acceptance.speculative_keys(fa.length, fa.rates))
    return spec


def build_server_flags(cfg: LauncherConfig, k: Optional[int] = None) -> list[str]:
    """Flags for the server of one server configuration (no command, model, host or port)."""
    m, p, s = cfg.model, cfg.parallel, cfg.server
    extra = list(s.extra_args)
    extra_names = flag_names(extra)
    mem_extra = extra_names & set(MEMORY_FLAGS)
    if len(mem_extra) == 2:
        raise ConfigError("server.extra_args", "sets both --kv-cache-memory-bytes and --gpu-memory-utilization",
                          "keep one: the KV-cache cap or the utilization")
    if mem_extra and (s.kv_cache_memory_bytes or s.gpu_memory_utilization is not None):
        raise ConfigError("server.extra_args", f"sets {mem_extra.pop()} while server.kv_cache_memory_bytes or "
                          "server.gpu_memory_utilization is set", "set memory through one of them only")
    if s.kv_cache_memory_bytes and s.gpu_memory_utilization is not None:
        raise ConfigError("server.kv_cache_memory_bytes", "is set together with server.gpu_memory_utilization",
                          "set only one")

    sglang_like = _engine_flags(cfg, k, extra_names)  # an engine that spells the serving fields itself
    if sglang_like is not None:
        return sglang_like + extra
    f: list[str] = ["--served-model-name", m.served_name]
    if m.tokenizer:
        f += ["--tokenizer", m.tokenizer]
    f += ["--tensor-parallel-size", str(p.tp)]
    if p.pp > 1:
        f += ["--pipeline-parallel-size", str(p.pp)]
    if p.dp > 1:
        f += ["--data-parallel-size", str(p.dp)]
    if p.ep > 1:
        f += ["--enable-expert-parallel"]
    spec = speculative_config(cfg, k)
    if spec is not None:
        f += ["--speculative-config", json.dumps(spec, separators=(",", ":"), sort_keys=True)]
        f += get_engine(s.engine).acceptance_flags(acceptance_source(cfg), s.spec_decode_metrics)
    if m.max_model_len:
        f += ["--max-model-len", str(m.max_model_len)]
    if s.max_num_batched_tokens:
        f += ["--max-num-batched-tokens", str(s.max_num_batched_tokens)]
    if m.dtype:
        f += ["--dtype", m.dtype]
    if s.kv_cache_memory_bytes:
        f += ["--kv-cache-memory-bytes", str(s.kv_cache_memory_bytes)]
    elif s.gpu_memory_utilization is not None:
        f += ["--gpu-memory-utilization", str(s.gpu_memory_utilization)]
    if s.enforce_eager:
        f += ["--enforce-eager"]
    # The recipe's extra arguments win: drop our computed copy of any flag they set.
    return drop_flags(f, extra_names) + extra


def _engine_flags(cfg: LauncherConfig, k: Optional[int], extra_names: set[str]) -> Optional[list[str]]:
    """The flags of an engine with its own serving_flags (SGLang), else None (vLLM's below)."""
    m, p, s = cfg.model, cfg.parallel, cfg.server
    eng = get_engine(s.engine)
    opts = ServingOptions(served_name=m.served_name, tokenizer=m.tokenizer, tp=p.tp, pp=p.pp, dp=p.dp, ep=p.ep,
                          max_model_len=m.max_model_len, max_num_batched_tokens=s.max_num_batched_tokens,
                          dtype=m.dtype, kv_cache_memory_bytes=s.kv_cache_memory_bytes,
                          gpu_memory_utilization=s.gpu_memory_utilization, enforce_eager=s.enforce_eager)
    try:
        f = eng.serving_flags(opts)
    except EngineError as e:
        raise ConfigError("server.engine", str(e)) from None
    if f is None:
        return None
    spec = speculative_config(cfg, k)
    if spec is not None:
        try:
            f += eng.speculative_flags(spec)
        except EngineError as e:
            raise ConfigError("draft", str(e)) from None
        f += eng.acceptance_flags(acceptance_source(cfg), s.spec_decode_metrics)
    return drop_flags(f, extra_names)


def build_server_argv(cfg: LauncherConfig, host: str, port: int | str, k: Optional[int] = None) -> list[str]:
    """Recipe -> the complete server argv (used by dry runs and tests)."""
    return get_engine(cfg.server.engine).server_argv(cfg.server.command, cfg.model.path, build_server_flags(cfg, k),
                                                     host, port)
