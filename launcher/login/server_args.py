"""Build the inference server's argv from a recipe. Pure functions, no processes.

This module is the one authority for server flags: its output is a list (safe
for values with spaces), and no flag appears twice. Extra arguments from the
recipe win over computed ones rather than being appended after them. The engine
is resolved once, by the caller (the plan, validation), and handed in.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from launcher.engines import (Acceptance, AcceptanceSource, Engine, EngineError, ForcedAcceptance, ServingOptions,
                              speculation_flags, version_from_image)
from launcher.engines.flags import drop_flags, flag_names, kv_cache_cap_bytes, pick_flags
from launcher.login.config.schema import LauncherConfig, ServerConfig
from launcher.login.errors import ConfigError
from launcher.login.kv_budget import model_bytes_per_token


def engine_version(cfg: LauncherConfig) -> Optional[str]:
    """The engine version the recipe states: server.engine_version, else the container
    image's tag; None when neither says (the node probes it)."""
    return cfg.server.engine_version or version_from_image(cfg.cluster.container_image)


def acceptance_source(cfg: LauncherConfig, eng: Acceptance) -> AcceptanceSource:
    """bench.acceptance_source resolved for the engine at the recipe's version."""
    try:
        return eng.acceptance_source(cfg.bench.acceptance_source, engine_version(cfg))
    except EngineError as e:
        raise ConfigError("bench.acceptance_source", str(e)) from None


def speculative_config(cfg: LauncherConfig, eng: ForcedAcceptance, k: Optional[int] = None) -> Optional[dict]:
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
        spec.update(eng.forced_acceptance_config(fa.length, fa.rates))
    except EngineError as e:
        raise ConfigError("draft.forced_acceptance", str(e)) from None
    return spec


def memory_conflicts(s: ServerConfig, memory_flags: set[str]) -> list[ConfigError]:
    """The recipe's KV-cache settings that contradict each other: two of the engine's memory flags
    (``memory_flags``) in server.extra_args, one there while a memory field is set, or both memory
    fields. The one check: validation reports every one; server_flags (the plan) refuses the first."""
    out = []
    mem_extra = flag_names(list(s.extra_args)) & memory_flags
    if len(mem_extra) >= 2:
        out.append(ConfigError("server.extra_args", f"sets both {' and '.join(sorted(mem_extra))}",
                               "keep one: the KV-cache cap or the utilization"))
    elif mem_extra and (s.kv_cache_memory_bytes or s.gpu_memory_utilization is not None):
        out.append(ConfigError("server.extra_args", f"sets {mem_extra.pop()} while server.kv_cache_memory_bytes or "
                               "server.gpu_memory_utilization is set", "set memory through one of them only"))
    if s.kv_cache_memory_bytes and s.gpu_memory_utilization is not None:
        out.append(ConfigError("server.kv_cache_memory_bytes", "is set together with server.gpu_memory_utilization",
                               "set only one: the KV-cache cap overrides the utilization"))
    return out


@dataclass(frozen=True)
class ServerFlags:
    """One server configuration's speculative config and flags, built once, and the engine they
    were built for; the plan puts them into its job spec, which carries them to the node."""
    speculative_config: Optional[dict]
    all: list[str]  # every flag in the engine's order, the recipe's extra arguments winning (the job's identity)
    serving: list[str]  # all but the speculative and acceptance flags (JobSpec.server_flags; the baseline's)
    speculative: list[str]  # the engine's flags for speculative_config (JobSpec.speculative_flags)
    acceptance: list[str]  # the flags that make it report acceptance (JobSpec.acceptance_flags)
    kv_cache_cap_bytes: Optional[int]  # the KV-cache cap the flags set, in bytes
    engine: str  # the engine's name
    engine_version: Optional[str]  # the version the recipe states (None: the node probes it)
    acceptance_source: AcceptanceSource  # bench.acceptance_source at that version


def server_flags(cfg: LauncherConfig, eng: Engine, k: Optional[int] = None) -> ServerFlags:
    """The flags of the server of one server configuration (no command, model, host or port):
    the engine's serving, speculative and acceptance flags; the recipe's extra arguments win."""
    m, p, s = cfg.model, cfg.parallel, cfg.server
    conflicts = memory_conflicts(s, eng.memory_flag_names())
    if conflicts:
        raise conflicts[0]
    opts = ServingOptions(served_name=m.served_name, tokenizer=m.tokenizer, tp=p.tp, pp=p.pp, dp=p.dp, ep=p.ep,
                          max_model_len=m.max_model_len, max_num_batched_tokens=s.max_num_batched_tokens,
                          dtype=m.dtype, kv_cache_memory_bytes=s.kv_cache_memory_bytes,
                          gpu_memory_utilization=s.gpu_memory_utilization, enforce_eager=s.enforce_eager,
                          kv_bytes_per_token=model_bytes_per_token(
                              m.path, cfg.draft.model if cfg.draft.method != "none" else None, m.dtype)
                          if s.kv_cache_memory_bytes else None)
    spec = speculative_config(cfg, eng, k)
    source = acceptance_source(cfg, eng)
    try:
        speculation = speculation_flags(eng, spec, source, s.spec_decode_metrics)
    except EngineError as e:
        raise ConfigError("draft", str(e)) from None
    try:
        f = eng.server_flags(opts, speculation.speculative + speculation.acceptance)
    except EngineError as e:
        raise ConfigError("server.engine", str(e)) from None
    # The recipe's extra arguments win: drop our computed copy of any flag they set.
    extra = list(s.extra_args)
    every = drop_flags(f, flag_names(extra)) + extra
    return ServerFlags(speculative_config=spec, all=every,
                       serving=drop_flags(every, eng.speculative_flag_names() | eng.acceptance_flag_names()),
                       speculative=speculation.speculative,
                       acceptance=pick_flags(every, eng.acceptance_flag_names()) if spec else [],
                       kv_cache_cap_bytes=kv_cache_cap_bytes(every), engine=eng.name,
                       engine_version=engine_version(cfg), acceptance_source=source)


def build_server_flags(cfg: LauncherConfig, eng: Engine, k: Optional[int] = None) -> list[str]:
    """Every flag of one server configuration, in the engine's order (server_flags(...).all)."""
    return server_flags(cfg, eng, k).all


def build_server_argv(cfg: LauncherConfig, eng: Engine, host: str, port: int | str,
                      k: Optional[int] = None) -> list[str]:
    """Recipe -> the complete server argv: the engine's command and model around server_flags
    (the tests' view of a recipe's server; the plan and the dry run render JobSpec.server_argv)."""
    return eng.server_argv(cfg.server.command, cfg.model.path, build_server_flags(cfg, eng, k), host, port)
