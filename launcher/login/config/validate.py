"""Checks a composed recipe before anything is planned or submitted.

`validate` returns every problem found (not just the first), each a ConfigError
whose line names the field and the fix.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from launcher import golden
from launcher.contracts import placement
from launcher.engines import (AcceptanceSource, default_engine, EngineError, ENGINES, forced_acceptance as fa_mod,
                              get_engine, parse_version, RecipeFacts)
from launcher.login.config.schema import (KV_BUFFER_DEVICES, LauncherConfig, METHODS_WITHOUT_DRAFT_CKPT, ROUTERS,
                                          SPEC_METHODS, TOPOLOGIES)
from launcher.login.errors import ConfigError
from launcher.login.server_args import acceptance_source, build_server_flags, engine_version
from launcher.runtime.apikey import api_key_in_args, fix, is_loopback
from launcher.runtime.inputs import check_dataset, check_model, check_tokenizer, HF_ID

KNOWN_DATASETS = ("mtbench", "specbench")
SPEED_SPLITS = ("qualitative", "throughput_1k", "throughput_2k", "throughput_8k",
                "throughput_16k", "throughput_32k")


def known_dataset(name: str) -> bool:
    return name in KNOWN_DATASETS or (name.startswith("speed_") and name[len("speed_"):] in SPEED_SPLITS)


def _writable(path: Path) -> bool:
    """Try it: create (and remove) a file in the folder, or in its nearest existing
    parent. os.access alone says yes to root even where nothing can be created."""

    p = path.resolve()
    while not p.exists():
        if p.parent == p:
            return False
        p = p.parent
    if not p.is_dir():
        return False
    try:
        with tempfile.NamedTemporaryFile(dir=p, prefix=".specdec-write-check-"):
            return True
    except OSError:
        return False


def requests_per_concurrency(cfg: LauncherConfig) -> dict[int, int]:
    """sweep.num_requests_per_concurrency's entries for the concurrencies the sweep runs. Map keys
    merge (a recipe's {16: 64} stays when the command line narrows sweep.concurrencies), so an
    entry for a concurrency not run is ignored, not an error: `ignored_requests_per_concurrency`."""
    swept = {int(c) for c in cfg.sweep.concurrencies}
    return {int(c): int(n) for c, n in sorted(cfg.sweep.num_requests_per_concurrency.items()) if int(c) in swept}


def ignored_requests_per_concurrency(cfg: LauncherConfig) -> list[int]:
    """The concurrencies sweep.num_requests_per_concurrency names that the sweep does not run."""
    return sorted(int(c) for c in cfg.sweep.num_requests_per_concurrency if int(c) not in requests_per_concurrency(cfg))


def validate(cfg: LauncherConfig) -> list[ConfigError]:
    """Every problem with the recipe, one ConfigError each (empty: valid): one check per section."""
    errs: list[ConfigError] = []
    add = lambda f, p, fix: errs.append(ConfigError(f, p, fix))  # noqa: E731
    for check in (_check_speculation, _check_forced_acceptance, _check_golden, _check_parallelism, _check_cluster,
                  _check_sweep, _check_slo, _check_server, _check_topology, _check_gates, _check_api_key, _check_visible_inputs, _check_output):
        check(cfg, add, errs)
    return errs


def _check_speculation(cfg: LauncherConfig, add, errs: list) -> None:
    """Speculative method and draft."""
    d, par, cl, sw, srv = cfg.draft, cfg.parallel, cfg.cluster, cfg.sweep, cfg.server  # noqa: F841
    if d.method not in SPEC_METHODS:
        add("draft.method", f"unknown method '{d.method}'", f"use one of: {', '.join(SPEC_METHODS)}")
    elif d.method not in METHODS_WITHOUT_DRAFT_CKPT and not d.model:
        add("draft.model", f"method '{d.method}' needs a draft checkpoint", "set draft.model=<HF id or path>")
    if d.method != "none" and d.num_speculative_tokens < 1:
        add("draft.num_speculative_tokens", f"is {d.num_speculative_tokens}, must be >= 1",
            "set draft.num_speculative_tokens=3 (or draft=none for a baseline)")
    for k in ("method", "model", "num_speculative_tokens"):
        if k in d.extra:
            add(f"draft.extra.{k}", f"overrides draft.{k}", f"set draft.{k} instead and remove draft.extra.{k}")
    if sw.baseline and d.method == "none":
        add("sweep.baseline", "is true but draft.method is none: there is no speculation to compare",
            "pick a draft (e.g. draft=tiny_noisy) or set sweep.baseline=false")
    for ds, v in cfg.bench.gates.min_speedup.items():
        if not sw.baseline:
            add(f"bench.gates.min_speedup.{ds}", "needs a baseline to measure the speedup against",
                "set sweep.baseline=true")
        if v <= 0:
            add(f"bench.gates.min_speedup.{ds}", f"is {v}, must be > 0", "e.g. 1.1 for at least 10% faster")
    for k in sw.num_speculative_tokens:
        if k < 1:
            add("sweep.num_speculative_tokens", f"contains {k}, every value must be >= 1", "remove it")


def _check_forced_acceptance(cfg: LauncherConfig, add, errs: list) -> None:
    """Forced (synthetic) acceptance: vLLM's mechanism, GPU sampling only."""
    d, par, cl, sw, srv = cfg.draft, cfg.parallel, cfg.cluster, cfg.sweep, cfg.server  # noqa: F841
    fa = d.forced_acceptance
    levels = list(sw.forced_acceptance_lengths)
    for f, p, fix in fa_mod.sweep_problems(levels, list(sw.num_speculative_tokens) or [d.num_speculative_tokens],
                                           d.method, fa.length, fa.rates):
        add(f, p, fix)
    if fa.length is not None or fa.rates is not None or levels:
        seen = set()
        for k in (list(sw.num_speculative_tokens) or [d.num_speculative_tokens]) if not levels else []:
            for f, p, fix in fa_mod.problems(fa.length, fa.rates, k, d.method):
                if (f, p) not in seen:
                    seen.add((f, p))
                    add(f, p, fix)
        why = get_engine(srv.engine).cpu_sampling_reason(cl.gpus_per_node, cl.name, {**cl.env, **srv.env})
        if why:
            add(fa_mod.SWEEP_FIELD if levels else fa_mod.FIELD,
                f"cannot run here: {why}, and {get_engine(srv.engine).cpu_sampling_refusal}", "run on a GPU cluster "
                "(e.g. cluster=h100) or remove " + ("sweep.forced_acceptance_lengths" if levels else "draft.forced_acceptance"))
        version = engine_version(cfg)
        if version is not None:
            try:
                get_engine(srv.engine).forced_acceptance_check(version, cpu=False)
            except EngineError as e:
                add(fa_mod.FIELD, f"cannot run on server.engine_version={version}: {e}",
                    "use an image with synthetic acceptance or remove draft.forced_acceptance")


def _check_golden(cfg: LauncherConfig, add, errs: list) -> None:
    """Golden reference."""
    d, par, cl, sw, srv = cfg.draft, cfg.parallel, cfg.cluster, cfg.sweep, cfg.server  # noqa: F841
    if cfg.bench.golden is not None:
        errs.extend(check_golden(cfg))


def _check_parallelism(cfg: LauncherConfig, add, errs: list) -> None:
    """Parallelism against the allocation: tp x pp x dp GPUs on nodes x gpus_per_node."""
    d, par, cl, sw, srv = cfg.draft, cfg.parallel, cfg.cluster, cfg.sweep, cfg.server  # noqa: F841
    for name, v in (("parallel.tp", par.tp), ("parallel.pp", par.pp), ("parallel.dp", par.dp),
                    ("parallel.ep", par.ep), ("cluster.nodes", cl.nodes)):
        if v < 1:
            add(name, f"is {v}, must be >= 1", f"set {name}=1")
    gpus = par.tp * par.pp * par.dp
    ep_group = par.tp * par.dp
    if par.ep not in (1, ep_group) and par.ep >= 1:
        add("parallel.ep", f"is {par.ep}; vLLM's expert-parallel group is tp x dp = {ep_group}",
            f"set parallel.ep={ep_group} (expert parallel on) or parallel.ep=1 (off)")
    total = cl.nodes * cl.gpus_per_node
    if cfg.topology.kind == "disagg" and gpus <= max(1, cl.gpus_per_node):
        pass  # one-node servers placed on the nodes: launcher/contracts/placement.py judges the fit
    elif cl.gpus_per_node > 0 and cl.nodes >= 1:
        if cl.nodes == 1 and gpus > total:
            add("parallel.tp", f"tp x pp x dp = {gpus} GPUs exceeds cluster '{cl.name}' gpus_per_node="
                f"{cl.gpus_per_node}", f"use tp x pp x dp <= {cl.gpus_per_node}, or cluster.nodes="
                f"{-(-gpus // cl.gpus_per_node)}")
        elif cl.nodes > 1 and gpus != total:
            add("cluster.nodes", f"is {cl.nodes}: {cl.nodes} x {cl.gpus_per_node} GPUs = {total}, but one server "
                f"uses tp x pp x dp = {par.tp} x {par.pp} x {par.dp} = {gpus}",
                f"make tp x pp x dp equal nodes x gpus_per_node (e.g. cluster.nodes={max(1, gpus // cl.gpus_per_node)})")
        elif cl.nodes > 1 and par.dp > 1 and par.tp * par.pp <= cl.gpus_per_node and par.dp % cl.nodes:
            add("parallel.dp", f"is {par.dp}: data parallel across {cl.nodes} nodes needs dp divisible by nodes",
                f"set parallel.dp to a multiple of {cl.nodes}")
    elif gpus > 1 and cl.nodes > 1 and gpus != cl.nodes:  # a CPU cluster: one rank per node
        add("cluster.nodes", f"is {cl.nodes} on a CPU cluster (gpus_per_node=0), where each node runs one rank, but "
            f"tp x pp x dp = {gpus}", f"set cluster.nodes={gpus}, or tp x pp x dp = {cl.nodes}")
    elif gpus > 1 and cl.nodes == 1:
        # parallel=tp1 (a group) would not undo a typed parallel.tp=2: name the fields themselves
        ones = " ".join(f"parallel.{n}=1" for n, v in (("tp", par.tp), ("pp", par.pp), ("dp", par.dp)) if v > 1)
        add("parallel.tp", f"tp x pp x dp = {gpus} but cluster '{cl.name}' has no GPUs (gpus_per_node=0)",
            f"set {ones} on a CPU cluster"
            + (f", cluster.nodes={gpus} (one CPU rank per node)" if cl.executor == "slurm" else "")
            + ", or use a GPU cluster (cluster=<name>, e.g. h100)")
    if cl.nodes > 1 and cl.executor != "slurm":
        add("cluster.nodes", f"is {cl.nodes} on the {cl.executor} executor", "multi-node servers need a Slurm cluster")
    if cl.container_scope not in ("server", "job"):
        add("cluster.container_scope", f"is '{cl.container_scope}'",
            "use server (only vLLM in the container) or job (the whole job in the container)")
    if cl.nodes > 1 and cl.container_scope == "job":
        add("cluster.container_scope", "is job with cluster.nodes > 1",
            "use cluster.container_scope=server: each node's server is its own container step")
    if par.draft_tp is not None and par.draft_tp not in (1, par.tp):
        add("parallel.draft_tp", f"is {par.draft_tp}; vLLM accepts 1 or the target's tp ({par.tp})",
            f"set parallel.draft_tp=1 or parallel.draft_tp={par.tp}")


def _check_cluster(cfg: LauncherConfig, add, errs: list) -> None:
    """Cluster."""
    d, par, cl, sw, srv = cfg.draft, cfg.parallel, cfg.cluster, cfg.sweep, cfg.server  # noqa: F841
    if cl.executor not in ("local", "slurm"):
        add("cluster.executor", f"unknown executor '{cl.executor}'", "use local or slurm")
    if cl.requires_container and not cl.container_image:
        add("cluster.container_image", f"cluster '{cl.name}' runs jobs in a container but none is set",
            "set cluster.container_image=<image> or export CONTAINER_IMAGE")
    if cl.time_min < 1:
        add("cluster.time_min", f"is {cl.time_min}", "set a time limit in minutes, e.g. cluster.time_min=120")


def _check_sweep(cfg: LauncherConfig, add, errs: list) -> None:
    """Sweep."""
    d, par, cl, sw, srv = cfg.draft, cfg.parallel, cfg.cluster, cfg.sweep, cfg.server  # noqa: F841
    for name, values in (("sweep.temperatures", sw.temperatures), ("sweep.concurrencies", sw.concurrencies),
                         ("sweep.datasets", sw.datasets), ("sweep.num_speculative_tokens", sw.num_speculative_tokens)):
        dup = sorted({v for v in values if list(values).count(v) > 1}, key=str)
        if dup:
            add(name, f"lists {', '.join(map(str, dup))} more than once", "list each value once")
    if not sw.temperatures:
        add("sweep.temperatures", "is empty", "give at least one, e.g. sweep.temperatures=[0]")
    for t in sw.temperatures:
        if not 0.0 <= t <= 2.0:
            add("sweep.temperatures", f"contains {t}, outside [0, 2]", "use temperatures between 0 and 2")
    if not sw.concurrencies:
        add("sweep.concurrencies", "is empty", "give at least one, e.g. sweep.concurrencies=[1,8]")
    for c in sw.concurrencies:
        if c < 1:
            add("sweep.concurrencies", f"contains {c}, must be >= 1", "use concurrencies of 1 or more")
    if not sw.datasets:
        add("sweep.datasets", "is empty", "give at least one, e.g. sweep.datasets=[mtbench]")
    for ds in sw.datasets:
        if not known_dataset(ds):
            add("sweep.datasets", f"unknown dataset '{ds}'",
                f"use mtbench, specbench or speed_<split> (splits: {', '.join(SPEED_SPLITS)})")
        elif ds not in sw.dataset_paths:
            add(f"sweep.dataset_paths.{ds}", "no file given for this dataset", f"set sweep.dataset_paths.{ds}=<path>")
        elif ds.startswith("speed_") and Path(sw.dataset_paths[ds]).stem != ds[len("speed_"):]:
            add(f"sweep.dataset_paths.{ds}", f"file '{Path(sw.dataset_paths[ds]).name}' does not match the split",
                f"point it at the {ds[len('speed_'):]}.parquet split")
    for c, n in requests_per_concurrency(cfg).items():  # entries of concurrencies not swept are ignored (the plan says so)
        f = "sweep.num_requests_per_concurrency"
        if n < 1:
            add(f, f"gives C={c} {n} conversations", "use 1 or more")
        elif sw.num_requests is not None and n > sw.num_requests:
            add(f, f"gives C={c} {n} conversations, more than sweep.num_requests={sw.num_requests}",
                f"use at most {sw.num_requests} (a point sends a slice of the dataset, never a question twice)")
    if requests_per_concurrency(cfg) and cfg.bench.aiperf_mode != "phases":
        add("sweep.num_requests_per_concurrency", f"needs bench.aiperf_mode=phases (it is {cfg.bench.aiperf_mode})",
            "set bench.aiperf_mode=phases or remove sweep.num_requests_per_concurrency")
    if sw.repeats < 1:
        add("sweep.repeats", f"is {sw.repeats}", "use 1 (one measurement) or more, e.g. sweep.repeats=3")
    if sw.server_starts < 1:
        add("sweep.server_starts", f"is {sw.server_starts}", "use 1 (one server start) or more, e.g. sweep.server_starts=2")
    elif sw.server_starts > 1 and cfg.topology.kind == "disagg":
        add("sweep.server_starts", f"is {sw.server_starts} with topology=disagg",
            "use sweep.server_starts=1 there (restarting the prefill/decode servers and router is not supported yet)")
    if not 0 < cfg.bench.gates.noisy_rel_mad < 10:
        add("bench.gates.noisy_rel_mad", f"is {cfg.bench.gates.noisy_rel_mad}",
            "use a relative spread such as 0.1 (10%)")
    if sw.num_requests is not None and sw.num_requests < 1:
        add("sweep.num_requests", f"is {sw.num_requests}", "use a positive count, or null for the whole dataset")
    if sw.max_turns is not None and sw.max_turns < 1:
        add("sweep.max_turns", f"is {sw.max_turns}", "use 1 for the first turn only, or null for every turn")
    if sw.output_length < 1:
        add("sweep.output_length", f"is {sw.output_length}", "use a positive number of tokens")
    for k in sw.runtime_params.sampling_kwargs:
        if k == "temperature":
            add("sweep.runtime_params.sampling_kwargs.temperature", "temperature is swept, not a runtime param",
                "set sweep.temperatures instead")


def _check_slo(cfg: LauncherConfig, add, errs: list) -> None:
    """sweep.slo (docs/slo.md)."""
    slo = cfg.sweep.slo
    keys = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
    for k in keys:
        v = getattr(slo, k)
        if v is not None and not v > 0:
            add(f"sweep.slo.{k}", f"is {v}", "give a limit in milliseconds > 0, or null to leave it out")
    if slo.itl_ms is not None and slo.tpot_ms is not None:
        add("sweep.slo.itl_ms", "is set together with sweep.slo.tpot_ms (both are AIPerf's inter_token_latency)",
            "set only one of them")
    if not 0 < slo.percentile <= 100:
        add("sweep.slo.percentile", f"is {slo.percentile}", "use a percentile in (0, 100], e.g. 90")
    for k, p in slo.percentiles.items():
        if k not in keys:
            add(f"sweep.slo.percentiles.{k}", "is not a limit", f"use one of: {', '.join(keys)}")
        elif getattr(slo, k) is None:
            add(f"sweep.slo.percentiles.{k}", f"is set but sweep.slo.{k} is not", f"set sweep.slo.{k}=<ms> or drop it")
        elif not 0 < p <= 100:
            add(f"sweep.slo.percentiles.{k}", f"is {p}", "use a percentile in (0, 100], e.g. 99")
    if slo.good_share is not None and not 0 < slo.good_share <= 1:
        add("sweep.slo.good_share", f"is {slo.good_share}", "use a fraction in (0, 1], e.g. 0.9, or null")
    if slo.max_search_probes < 0:
        add("sweep.slo.max_search_probes", f"is {slo.max_search_probes}", "use 0 (no search) or more, e.g. 3")
    ks = cfg.sweep.k_schedule
    if ks is not None:
        fix = "give [[batch_start, batch_end, k], ...], sorted, not overlapping, the first from 1, e.g. [[1,1,3],[2,8,1]]"
        try:
            entries = [tuple(int(x) for x in e) for e in ks]
        except (TypeError, ValueError):
            entries = None
        if not entries or any(len(e) != 3 for e in entries):
            add("sweep.k_schedule", f"is {list(ks)}", fix)
        elif entries[0][0] != 1 or any(e[0] > e[1] or e[2] < 1 for e in entries) or \
                any(b[0] <= a[1] for a, b in zip(entries, entries[1:])):
            add("sweep.k_schedule", f"is {[list(e) for e in entries]}", fix)
        if cfg.draft.method == "none":
            add("sweep.k_schedule", "is set but draft.method is none", "pick a draft, or drop sweep.k_schedule")
    has_limit = any(getattr(slo, k) is not None for k in keys)
    if not has_limit and slo.good_share is not None:
        add("sweep.slo.good_share", "is set but no limit is", "set a limit, e.g. sweep.slo.ttft_ms=500")
    if has_limit and cfg.topology.kind == "disagg":
        add("sweep.slo", "is not supported with topology=disagg yet", "use topology=aggregated with an SLO")


def _check_server(cfg: LauncherConfig, add, errs: list) -> None:
    """Server."""
    d, par, cl, sw, srv = cfg.draft, cfg.parallel, cfg.cluster, cfg.sweep, cfg.server  # noqa: F841
    if srv.kv_cache_memory_bytes and srv.gpu_memory_utilization is not None:
        add("server.kv_cache_memory_bytes", "is set together with server.gpu_memory_utilization",
            "set only one: the KV-cache cap overrides the utilization")
    if srv.gpu_memory_utilization is not None and not 0 < srv.gpu_memory_utilization <= 1:
        add("server.gpu_memory_utilization", f"is {srv.gpu_memory_utilization}", "use a fraction in (0, 1]")
    if srv.port is not None and not 1024 <= srv.port <= 65535:
        add("server.port", f"is {srv.port}", "use a port in 1024-65535, or null for a free one")
    if srv.ready_timeout_s < 1:
        add("server.ready_timeout_s", f"is {srv.ready_timeout_s}", "use a positive number of seconds")
    if srv.unanswered_timeout_s < 1:
        add("server.unanswered_timeout_s", f"is {srv.unanswered_timeout_s}", "use a positive number of seconds")
    if srv.spec_decode_metrics not in ("none", "summary", "detailed"):
        add("server.spec_decode_metrics", f"is '{srv.spec_decode_metrics}'", "use summary or detailed")
    if not srv.command.strip():
        add("server.command", "is empty", f"set it, e.g. server.command='{ENGINES.get(srv.engine, default_engine()).default_command}'")
    seen = {e.field for e in errs}  # the engine's flags repeat a serving check already reported
    errs.extend(e for e in check_engine(cfg) if e.field not in seen)


def _check_topology(cfg: LauncherConfig, add, errs: list) -> None:
    """Serving topology (docs/disagg.md)."""
    t, cl, par = cfg.topology, cfg.cluster, cfg.parallel
    if t.kind not in TOPOLOGIES:
        add("topology.kind", f"is '{t.kind}'", f"use topology=aggregated or topology=disagg")
        return
    if t.kind != "disagg":
        if cfg.bench.disagg_parity:
            add("bench.disagg_parity", "is set without a disaggregated topology",
                "add topology=disagg, or drop bench.disagg_parity")
        return

    engine = ENGINES.get(cfg.server.engine)
    if engine is not None and not engine.disaggregated_serving:
        add("topology", f"disagg is not built for server.engine={cfg.server.engine} yet",
            "use topology=aggregated with this engine, or engine="
            + ", engine=".join(n for n, e in ENGINES.items() if e.disaggregated_serving))
        return
    for key in ("prefill", "decode"):
        if getattr(t, key) < 1:
            add(f"topology.{key}", f"is {getattr(t, key)}", "use at least 1 server")
    if t.kv_buffer_device is not None and t.kv_buffer_device not in KV_BUFFER_DEVICES:
        add("topology.kv_buffer_device", f"is '{t.kv_buffer_device}'",
            f"use one of {', '.join(KV_BUFFER_DEVICES)}, or null (cpu without GPUs, cuda with)")
    if t.kv_buffer_device == "cuda" and cl.gpus_per_node == 0:
        add("topology.kv_buffer_device", "is cuda on a cluster without GPUs", "use cpu, or null")
    if t.kv_connector != "NixlConnector":
        add("topology.kv_connector", f"is '{t.kv_connector}'", "use NixlConnector (the one measured here)")
    if t.kv_lease_duration_s < 60:
        add("topology.kv_lease_duration_s", f"is {t.kv_lease_duration_s}",
            "use at least 60 s: with vLLM's 30 s the prefill side released blocks before decode read them")
    poll = t.kv_progress_poll_us
    if poll is not None and not 0 <= poll <= 1_000_000:
        add("topology.kv_progress_poll_us", f"is {poll}",
            "use 0 (the library's own: no pause) up to 1000000 (1 s), or null (1000 on the CPU build)")
    elif poll and (cl.gpus_per_node > 0 or cl.container_image):
        add("topology.kv_progress_poll_us", f"is {poll} on {'GPUs' if cl.gpus_per_node > 0 else 'a container'}",
            "use null or 0: the hook that sets it runs in the CPU build's own processes only")
    if t.router not in ROUTERS:
        add("topology.router", f"is '{t.router}'", f"use one of {', '.join(ROUTERS)}")
    if not t.router_command.strip():
        add("topology.router_command", "is empty", f"set the {t.router} executable")
    if not is_loopback(t.router_host):
        add("topology.router_host", f"is '{t.router_host}', where other hosts reach the router, and "
            + ((engine.router_client_key_gap if engine is not None else None) or "the router checks no key"),
            "leave it 127.0.0.1: the benchmark runs beside the router on the head node (docs/disagg.md)")
    taken = [a.split("=", 1)[0] for a in t.router_extra_args
             if engine is not None and a.split("=", 1)[0] in engine.router_listen_flags]
    if taken:
        add("topology.router_extra_args", f"sets {', '.join(dict.fromkeys(taken))}: where the router listens and "
            "the key it holds are the launcher's", "drop it (the router listens on topology.router_host, its "
            "ports are picked free, the servers' key reaches it through its environment)")
    if engine is not None and t.router_policy not in engine.router_policies:
        why = engine.refused_router_policies.get(t.router_policy)
        add("topology.router_policy", f"is '{t.router_policy}'" + (f" ({why})" if why else ""),
            f"use one of {', '.join(engine.router_policies)} (cache_aware: a conversation's later turns go "
            "to the prefill server that has its prefix)")
    if t.decode_draft_model is not None and (cfg.draft.method in METHODS_WITHOUT_DRAFT_CKPT
                                             or not t.decode_draft_model.strip()):
        add("topology.decode_draft_model", f"is set but draft.method={cfg.draft.method} has no draft model"
            if t.decode_draft_model.strip() else "is empty", "use a draft-model recipe, or drop it")
    if par.dp > 1:
        add("parallel.dp", f"is {par.dp}: a disaggregated server is one replica",
            "use parallel.dp=1 and more servers (topology.prefill / topology.decode)")
    for field_, what, fix_ in placement.problems(t.prefill, t.decode, cl.nodes, t.placement, t.prefill_nodes,
                                                 cl.gpus_per_node, par.tp):
        add(field_, what, fix_)
    if not 0 < cfg.bench.disagg_al_tolerance < 1:
        add("bench.disagg_al_tolerance", f"is {cfg.bench.disagg_al_tolerance}", "use a fraction, e.g. 0.05")


def _check_gates(cfg: LauncherConfig, add, errs: list) -> None:
    """Gates."""
    d, par, cl, sw, srv = cfg.draft, cfg.parallel, cfg.cluster, cfg.sweep, cfg.server  # noqa: F841
    if cfg.bench.aiperf_mode not in ("phases", "point"):
        add("bench.aiperf_mode", f"is '{cfg.bench.aiperf_mode}'",
            "use bench.aiperf_mode=phases (one AIPerf process per dataset x temperature) or point")
    g = cfg.bench.gates
    if not 0 <= g.max_failed_fraction <= 1:
        add("bench.gates.max_failed_fraction", f"is {g.max_failed_fraction}", "use a fraction in [0, 1]")
    for key, ds in [("min_acceptance_length", d_) for d_ in g.min_acceptance_length] + \
            [("min_speedup", d_) for d_ in g.min_speedup]:
        if ds not in sw.datasets:
            add(f"bench.gates.{key}.{ds}", "names a dataset that is not in the sweep",
                f"use one of: {', '.join(sw.datasets)}")


def _check_api_key(cfg: LauncherConfig, add, errs: list) -> None:
    """The server's API key: through the environment only."""
    d, par, cl, sw, srv = cfg.draft, cfg.parallel, cfg.cluster, cfg.sweep, cfg.server  # noqa: F841
    eng = get_engine(srv.engine)
    if api_key_in_args(srv.extra_args, eng):
        add("server.extra_args", f"passes {eng.key_flag} on the command line, where it would be written to "
            "job.json, the logs and the process list", fix(eng))


def _check_visible_inputs(cfg: LauncherConfig, add, errs: list) -> None:
    """Inputs visible from here (the node checks them all again before its server starts)."""
    d, par, cl, sw, srv = cfg.draft, cfg.parallel, cfg.cluster, cfg.sweep, cfg.server  # noqa: F841
    errs.extend(check_input_paths(cfg))


def _check_output(cfg: LauncherConfig, add, errs: list) -> None:
    """Output."""
    d, par, cl, sw, srv = cfg.draft, cfg.parallel, cfg.cluster, cfg.sweep, cfg.server  # noqa: F841
    if not _writable(Path(cfg.output_dir)):
        add("output_dir", f"'{cfg.output_dir}' cannot be written", "choose a folder you can write, e.g. output_dir=./results")


def check_engine(cfg: LauncherConfig) -> list[ConfigError]:
    """The engine exists and, at the recipe's version, has what the recipe asks of it."""

    srv = cfg.server
    if srv.engine not in ENGINES:
        return [ConfigError("server.engine", f"is '{srv.engine}'", f"use one of: {', '.join(sorted(ENGINES))}")]
    if srv.engine_version is not None and parse_version(srv.engine_version) is None:
        return [ConfigError("server.engine_version", f"is '{srv.engine_version}'", "give a version such as 0.32.0")]
    choices = ("auto",) + tuple(s.value for s in AcceptanceSource)
    if cfg.bench.acceptance_source not in choices:
        return [ConfigError("bench.acceptance_source", f"is '{cfg.bench.acceptance_source}'",
                            f"use one of: {', '.join(choices)}")]
    try:
        acceptance_source(cfg)
    except ConfigError as e:
        return [e]
    return _check_engine_fit(cfg)


def _check_engine_fit(cfg: LauncherConfig) -> list[ConfigError]:
    """What the engine cannot take from the recipe (its own checks, then its flags for it)."""

    srv, b = cfg.server, cfg.bench
    facts = RecipeFacts(container_image=cfg.cluster.container_image, draft_method=cfg.draft.method,
                        known_answer=bool(b.known_answer), known_answer_allow_fail=bool(b.known_answer_allow_fail),
                        temperatures=tuple(cfg.sweep.temperatures), engine_version=srv.engine_version)
    problems = get_engine(srv.engine).recipe_problems(facts)
    if problems:
        return [ConfigError(*problems[0])]
    try:
        build_server_flags(cfg)
    except ConfigError as e:
        return [e]
    except EngineError as e:
        return [ConfigError("server.engine", str(e))]
    return []


def visible_here(path: str, executor: str) -> bool:
    """Whether this (login) machine can judge ``path``: always for the local
    executor; on Slurm only for a relative path or one whose top-level folder
    exists here (a shared filesystem such as /lustre), never for an HF id."""
    if executor == "local":
        return True
    p = Path(os.path.expanduser(path))
    if not p.is_absolute():
        return True
    parts = p.parts
    return len(parts) > 1 and Path(parts[0], parts[1]).exists()


def _strip(line: str, prefix: str) -> str:
    return line[len(prefix):] if line.startswith(prefix) else line


def check_input_paths(cfg: LauncherConfig) -> list[ConfigError]:
    """Model, draft, tokenizer and dataset files, where this machine can see them:
    the same checks the node runs (launcher.runtime.inputs), one line each."""

    out: list[ConfigError] = []
    ex = cfg.cluster.executor

    def is_hf_id(name: str) -> bool:
        return bool(HF_ID.match(name)) and not Path(os.path.expanduser(name)).exists()

    def path_problem(field: str, line: str | None) -> None:
        if line:
            out.append(ConfigError(field, _strip(line, f"{field}: ")))

    m = cfg.model
    if m.path and not is_hf_id(m.path) and visible_here(m.path, ex):
        path_problem("model.path", check_model(m.path, "model", "model.path", {}))
    if cfg.draft.model and cfg.draft.method not in METHODS_WITHOUT_DRAFT_CKPT and not is_hf_id(cfg.draft.model) \
            and visible_here(cfg.draft.model, ex):
        path_problem("draft.model", check_model(cfg.draft.model, "draft", "draft.model", {}))
    if m.tokenizer and not is_hf_id(m.tokenizer) and visible_here(m.tokenizer, ex):
        path_problem("model.tokenizer", check_tokenizer(m.tokenizer))
    sw = cfg.sweep
    for ds in sw.datasets:
        path = sw.dataset_paths.get(ds)
        if not path or not known_dataset(ds) or not visible_here(path, ex):
            continue
        field = f"sweep.dataset_paths.{ds}"
        path_problem(field, check_dataset(ds, path, sw.num_requests, field))
    return out


def _name(ref: str) -> str:
    """The comparable part of an HF id or a local path: its last component, lowercased."""
    return Path(str(ref).rstrip("/")).name.lower()


def check_golden(cfg: LauncherConfig) -> list[ConfigError]:
    """bench.golden names a known reference made with this recipe's target, draft, method and k."""

    gid = cfg.bench.golden
    entry = golden.lookup(gid)
    if entry is None:
        return [ConfigError("bench.golden", f"unknown reference '{gid}'",
                            f"use one of: {', '.join(golden.known_ids())}")]
    if cfg.model.random_weights or cfg.draft.random_weights:
        return []  # skipped, not compared: the plan's note says why (launcher.login.plan.golden_skip_reason)
    out = []
    d = cfg.draft
    if _name(cfg.model.path) != _name(entry["model"]):
        out.append(ConfigError("bench.golden", f"reference '{gid}' is for target {entry['model']}, "
                               f"model.path is {cfg.model.path}", f"use model.path={entry['model']} (or a copy "
                               "of it) or another reference"))
    if d.method != entry["method"]:
        out.append(ConfigError("bench.golden", f"reference '{gid}' is for method {entry['method']}, "
                               f"draft.method is {d.method}", f"set draft.method={entry['method']}"))
    elif entry.get("draft") and _name(d.model or "") != _name(entry["draft"]):
        out.append(ConfigError("bench.golden", f"reference '{gid}' is for draft {entry['draft']}, "
                               f"draft.model is {d.model}", f"set draft.model={entry['draft']}"))
    ks = list(cfg.sweep.num_speculative_tokens) or [d.num_speculative_tokens]
    if entry["k"] not in ks:
        out.append(ConfigError("bench.golden", f"reference '{gid}' is for k={entry['k']}, the run uses "
                               f"k={ks}", f"set draft.num_speculative_tokens={entry['k']}"))
    if entry["dataset"] not in cfg.sweep.datasets:
        out.append(ConfigError("bench.golden", f"reference '{gid}' is on {entry['dataset']}, not in "
                               f"sweep.datasets", f"add {entry['dataset']} (sweep=vllm_ci_mtbench reproduces it)"))
    return out
