"""Validation of the serving topology (docs/disagg.md): disaggregated prefill and decode servers,
their KV transfer, the router and where they are placed. Returns its problems
(launcher.login.config.validate runs it)."""
from __future__ import annotations

from typing import Optional

from launcher.contracts import placement
from launcher.engines import ENGINES, Disaggregation
from launcher.login.config.schema import (KV_BUFFER_DEVICES, LauncherConfig, METHODS_WITHOUT_DRAFT_CKPT, ROUTERS,
                                          TOPOLOGIES)
from launcher.login.errors import ConfigError, Problems
from launcher.runtime.apikey import is_loopback


def topology_problems(cfg: LauncherConfig, eng: Optional[Disaggregation]) -> list[ConfigError]:
    """Serving topology (docs/disagg.md); ``eng`` None: an unknown engine (the engine check says so)."""
    out = Problems()
    t, cl, par = cfg.topology, cfg.cluster, cfg.parallel
    if t.kind not in TOPOLOGIES:
        out.add("topology.kind", f"is '{t.kind}'", "use topology=aggregated or topology=disagg")
        return out
    if t.kind != "disagg":
        if cfg.bench.disagg_parity:
            out.add("bench.disagg_parity", "is set without a disaggregated topology",
                    "add topology=disagg, or drop bench.disagg_parity")
        return out
    if eng is not None and not eng.disaggregated_serving:
        out.add("topology", f"disagg is not built for server.engine={cfg.server.engine} yet",
                "use topology=aggregated with this engine, or engine="
                + ", engine=".join(n for n, e in ENGINES.items() if e.disaggregated_serving))
        return out
    for key in ("prefill", "decode"):
        if getattr(t, key) < 1:
            out.add(f"topology.{key}", f"is {getattr(t, key)}", "use at least 1 server")
    if t.kv_buffer_device is not None and t.kv_buffer_device not in KV_BUFFER_DEVICES:
        out.add("topology.kv_buffer_device", f"is '{t.kv_buffer_device}'",
                f"use one of {', '.join(KV_BUFFER_DEVICES)}, or null (cpu without GPUs, cuda with)")
    if t.kv_buffer_device == "cuda" and cl.gpus_per_node == 0:
        out.add("topology.kv_buffer_device", "is cuda on a cluster without GPUs", "use cpu, or null")
    if t.kv_connector != "NixlConnector":
        out.add("topology.kv_connector", f"is '{t.kv_connector}'", "use NixlConnector (the one measured here)")
    if t.kv_lease_duration_s < 60:
        out.add("topology.kv_lease_duration_s", f"is {t.kv_lease_duration_s}",
                "use at least 60 s: with vLLM's 30 s the prefill side released blocks before decode read them")
    poll = t.kv_progress_poll_us
    if poll is not None and not 0 <= poll <= 1_000_000:
        out.add("topology.kv_progress_poll_us", f"is {poll}",
                "use 0 (the library's own: no pause) up to 1000000 (1 s), or null (1000 on the CPU build)")
    elif poll and (cl.gpus_per_node > 0 or cl.container_image):
        out.add("topology.kv_progress_poll_us", f"is {poll} on {'GPUs' if cl.gpus_per_node > 0 else 'a container'}",
                "use null or 0: the hook that sets it runs in the CPU build's own processes only")
    if t.router not in ROUTERS:
        out.add("topology.router", f"is '{t.router}'", f"use one of {', '.join(ROUTERS)}")
    if not t.router_command.strip():
        out.add("topology.router_command", "is empty", f"set the {t.router} executable")
    if not is_loopback(t.router_host):
        out.add("topology.router_host", f"is '{t.router_host}', where other hosts reach the router, and "
                + ((eng.router_client_key_gap if eng is not None else None) or "the router checks no key"),
                "leave it 127.0.0.1: the benchmark runs beside the router on the head node (docs/disagg.md)")
    taken = [a.split("=", 1)[0] for a in t.router_extra_args
             if eng is not None and a.split("=", 1)[0] in eng.router_listen_flags]
    if taken:
        out.add("topology.router_extra_args", f"sets {', '.join(dict.fromkeys(taken))}: where the router listens and "
                "the key it holds are the launcher's", "drop it (the router listens on topology.router_host, its "
                "ports are picked free, the servers' key reaches it through its environment)")
    if eng is not None and t.router_policy not in eng.router_policies:
        why = eng.refused_router_policies.get(t.router_policy)
        out.add("topology.router_policy", f"is '{t.router_policy}'" + (f" ({why})" if why else ""),
                f"use one of {', '.join(eng.router_policies)} (cache_aware: a conversation's later turns go "
                "to the prefill server that has its prefix)")
    if t.decode_draft_model is not None and (cfg.draft.method in METHODS_WITHOUT_DRAFT_CKPT
                                             or not t.decode_draft_model.strip()):
        out.add("topology.decode_draft_model", f"is set but draft.method={cfg.draft.method} has no draft model"
                if t.decode_draft_model.strip() else "is empty", "use a draft-model recipe, or drop it")
    if par.dp > 1:
        out.add("parallel.dp", f"is {par.dp}: a disaggregated server is one replica",
                "use parallel.dp=1 and more servers (topology.prefill / topology.decode)")
    for field_, what, fix_ in placement.problems(t.prefill, t.decode, cl.nodes, t.placement, t.prefill_nodes,
                                                 cl.gpus_per_node, par.tp):
        out.add(field_, what, fix_)
    if not 0 < cfg.bench.disagg_al_tolerance < 1:
        out.add("bench.disagg_al_tolerance", f"is {cfg.bench.disagg_al_tolerance}", "use a fraction, e.g. 0.05")
    return out
