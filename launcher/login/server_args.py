"""Build the inference server's argv from a recipe. Pure functions, no processes.

This module is the one authority for server flags: its output is a list (safe
for values with spaces), and no flag appears twice. Extra arguments from the
recipe win over computed ones rather than being appended after them.
"""
from __future__ import annotations

from typing import Optional

from launcher.login.config.schema import LauncherConfig
from launcher.engines import AcceptanceSource, EngineError, ServingOptions, get_engine, version_from_image
from launcher.login.errors import ConfigError
from launcher.engines.flags import drop_flags, flag_names


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

def speculative_config(cfg: LauncherConfig, k: Optional[int] = None) -> Optional[dict]:
    """The job's speculative config for the recipe (the engine spells it as flags), or None without speculation."""
    d = cfg.draft
    if d.method == "none":
        return None
    spec: dict = {"method": d.method, "num_speculative_tokens": int(k if k is not None else d.num_speculative_tokens)}
    if d.model:
        spec["model"] = d.model
    if cfg.parallel.draft_tp is not None:
        spec["draft_tensor_parallel_size"] = cfg.parallel.draft_tp
    spec.update(d.extra)
    fa = d.forced_acceptance  # the engine's forced-acceptance keys (launcher/engines/forced_acceptance.py)
    try:
        spec.update(get_engine(cfg.server.engine).forced_acceptance_config(fa.length, fa.rates))
    except EngineError as e:
        raise ConfigError("draft.forced_acceptance", str(e)) from None
    return spec


def build_server_flags(cfg: LauncherConfig, k: Optional[int] = None) -> list[str]:
    """Flags for the server of one server configuration (no command, model, host or port):
    the engine's serving, speculative and acceptance flags; the recipe's extra arguments win."""
    m, p, s = cfg.model, cfg.parallel, cfg.server
    eng = get_engine(s.engine)
    extra = list(s.extra_args)
    extra_names = flag_names(extra)
    mem_extra = extra_names & eng.memory_flag_names()
    if len(mem_extra) >= 2:
        raise ConfigError("server.extra_args", f"sets both {' and '.join(sorted(mem_extra))}",
                          "keep one: the KV-cache cap or the utilization")
    if mem_extra and (s.kv_cache_memory_bytes or s.gpu_memory_utilization is not None):
        raise ConfigError("server.extra_args", f"sets {mem_extra.pop()} while server.kv_cache_memory_bytes or "
                          "server.gpu_memory_utilization is set", "set memory through one of them only")
    if s.kv_cache_memory_bytes and s.gpu_memory_utilization is not None:
        raise ConfigError("server.kv_cache_memory_bytes", "is set together with server.gpu_memory_utilization",
                          "set only one")
    opts = ServingOptions(served_name=m.served_name, tokenizer=m.tokenizer, tp=p.tp, pp=p.pp, dp=p.dp, ep=p.ep,
                          max_model_len=m.max_model_len, max_num_batched_tokens=s.max_num_batched_tokens,
                          dtype=m.dtype, kv_cache_memory_bytes=s.kv_cache_memory_bytes,
                          gpu_memory_utilization=s.gpu_memory_utilization, enforce_eager=s.enforce_eager)
    spec, spec_flags = speculative_config(cfg, k), []
    if spec is not None:
        try:
            spec_flags = eng.speculative_flags(spec)
        except EngineError as e:
            raise ConfigError("draft", str(e)) from None
        spec_flags += eng.acceptance_flags(acceptance_source(cfg), s.spec_decode_metrics)
    try:
        f = eng.server_flags(opts, spec_flags)
    except EngineError as e:
        raise ConfigError("server.engine", str(e)) from None
    # The recipe's extra arguments win: drop our computed copy of any flag they set.
    return drop_flags(f, extra_names) + extra


def build_server_argv(cfg: LauncherConfig, host: str, port: int | str, k: Optional[int] = None) -> list[str]:
    """Recipe -> the complete server argv (used by dry runs and tests)."""
    return get_engine(cfg.server.engine).server_argv(cfg.server.command, cfg.model.path, build_server_flags(cfg, k),
                                                     host, port)
