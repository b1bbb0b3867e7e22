"""Validation of the sweep: temperatures, concurrencies, datasets, requests, repeats, the SLO and
the k schedule, and the gates on its points. Each check returns its problems
(launcher.login.config.validate runs them)."""
from __future__ import annotations

from pathlib import Path

from launcher.login.config.schema import LauncherConfig
from launcher.login.errors import ConfigError, Problems
from launcher.runtime.datasets import dataset_choices, known_dataset, speed_split


def requests_per_concurrency(cfg: LauncherConfig) -> dict[int, int]:
    """sweep.num_requests_per_concurrency's entries for the concurrencies the sweep runs. Map keys
    merge (a recipe's {16: 64} stays when the command line narrows sweep.concurrencies), so an
    entry for a concurrency not run is ignored, not an error: `ignored_requests_per_concurrency`."""
    swept = {int(c) for c in cfg.sweep.concurrencies}
    return {int(c): int(n) for c, n in sorted(cfg.sweep.num_requests_per_concurrency.items()) if int(c) in swept}


def ignored_requests_per_concurrency(cfg: LauncherConfig) -> list[int]:
    """The concurrencies sweep.num_requests_per_concurrency names that the sweep does not run."""
    return sorted(int(c) for c in cfg.sweep.num_requests_per_concurrency if int(c) not in requests_per_concurrency(cfg))


def sweep_problems(cfg: LauncherConfig) -> list[ConfigError]:
    """Sweep."""
    out = Problems()
    sw = cfg.sweep
    for name, values in (("sweep.temperatures", sw.temperatures), ("sweep.concurrencies", sw.concurrencies),
                         ("sweep.datasets", sw.datasets), ("sweep.num_speculative_tokens", sw.num_speculative_tokens)):
        dup = sorted({v for v in values if list(values).count(v) > 1}, key=str)
        if dup:
            out.add(name, f"lists {', '.join(map(str, dup))} more than once", "list each value once")
    if not sw.temperatures:
        out.add("sweep.temperatures", "is empty", "give at least one, e.g. sweep.temperatures=[0]")
    for t in sw.temperatures:
        if not 0.0 <= t <= 2.0:
            out.add("sweep.temperatures", f"contains {t}, outside [0, 2]", "use temperatures between 0 and 2")
    if not sw.concurrencies:
        out.add("sweep.concurrencies", "is empty", "give at least one, e.g. sweep.concurrencies=[1,8]")
    for c in sw.concurrencies:
        if c < 1:
            out.add("sweep.concurrencies", f"contains {c}, must be >= 1", "use concurrencies of 1 or more")
    if not sw.datasets:
        out.add("sweep.datasets", "is empty", "give at least one, e.g. sweep.datasets=[mtbench]")
    for ds in sw.datasets:
        if not known_dataset(ds):
            out.add("sweep.datasets", f"unknown dataset '{ds}'", dataset_choices())
        elif ds not in sw.dataset_paths:
            out.add(f"sweep.dataset_paths.{ds}", "no file given for this dataset", f"set sweep.dataset_paths.{ds}=<path>")
        elif speed_split(ds) and Path(sw.dataset_paths[ds]).stem != speed_split(ds):
            out.add(f"sweep.dataset_paths.{ds}", f"file '{Path(sw.dataset_paths[ds]).name}' does not match the split",
                    f"point it at the {speed_split(ds)}.parquet split")
    for c, n in requests_per_concurrency(cfg).items():  # entries of concurrencies not swept are ignored (the plan says so)
        f = "sweep.num_requests_per_concurrency"
        if n < 1:
            out.add(f, f"gives C={c} {n} conversations", "use 1 or more")
        elif sw.num_requests is not None and n > sw.num_requests:
            out.add(f, f"gives C={c} {n} conversations, more than sweep.num_requests={sw.num_requests}",
                    f"use at most {sw.num_requests} (a point sends a slice of the dataset, never a question twice)")
    if requests_per_concurrency(cfg) and cfg.bench.aiperf_mode != "phases":
        out.add("sweep.num_requests_per_concurrency", f"needs bench.aiperf_mode=phases (it is {cfg.bench.aiperf_mode})",
                "set bench.aiperf_mode=phases or remove sweep.num_requests_per_concurrency")
    if sw.repeats < 1:
        out.add("sweep.repeats", f"is {sw.repeats}", "use 1 (one measurement) or more, e.g. sweep.repeats=3")
    if sw.server_starts < 1:
        out.add("sweep.server_starts", f"is {sw.server_starts}", "use 1 (one server start) or more, e.g. sweep.server_starts=2")
    elif sw.server_starts > 1 and cfg.topology.kind == "disagg":
        out.add("sweep.server_starts", f"is {sw.server_starts} with topology=disagg",
                "use sweep.server_starts=1 there (restarting the prefill/decode servers and router is not supported yet)")
    if not 0 < cfg.bench.gates.noisy_rel_mad < 10:
        out.add("bench.gates.noisy_rel_mad", f"is {cfg.bench.gates.noisy_rel_mad}",
                "use a relative spread such as 0.1 (10%)")
    if sw.num_requests is not None and sw.num_requests < 1:
        out.add("sweep.num_requests", f"is {sw.num_requests}", "use a positive count, or null for the whole dataset")
    if sw.max_turns is not None and sw.max_turns < 1:
        out.add("sweep.max_turns", f"is {sw.max_turns}", "use 1 for the first turn only, or null for every turn")
    if sw.output_length < 1:
        out.add("sweep.output_length", f"is {sw.output_length}", "use a positive number of tokens")
    for k in sw.runtime_params.sampling_kwargs:
        if k == "temperature":
            out.add("sweep.runtime_params.sampling_kwargs.temperature", "temperature is swept, not a runtime param",
                    "set sweep.temperatures instead")
    return out


def slo_problems(cfg: LauncherConfig) -> list[ConfigError]:
    """sweep.slo (docs/slo.md)."""
    out = Problems()
    slo = cfg.sweep.slo
    keys = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
    for k in keys:
        v = getattr(slo, k)
        if v is not None and not v > 0:
            out.add(f"sweep.slo.{k}", f"is {v}", "give a limit in milliseconds > 0, or null to leave it out")
    if slo.itl_ms is not None and slo.tpot_ms is not None:
        out.add("sweep.slo.itl_ms", "is set together with sweep.slo.tpot_ms (both are AIPerf's inter_token_latency)",
                "set only one of them")
    if not 0 < slo.percentile <= 100:
        out.add("sweep.slo.percentile", f"is {slo.percentile}", "use a percentile in (0, 100], e.g. 90")
    for k, p in slo.percentiles.items():
        if k not in keys:
            out.add(f"sweep.slo.percentiles.{k}", "is not a limit", f"use one of: {', '.join(keys)}")
        elif getattr(slo, k) is None:
            out.add(f"sweep.slo.percentiles.{k}", f"is set but sweep.slo.{k} is not", f"set sweep.slo.{k}=<ms> or drop it")
        elif not 0 < p <= 100:
            out.add(f"sweep.slo.percentiles.{k}", f"is {p}", "use a percentile in (0, 100], e.g. 99")
    if slo.good_share is not None and not 0 < slo.good_share <= 1:
        out.add("sweep.slo.good_share", f"is {slo.good_share}", "use a fraction in (0, 1], e.g. 0.9, or null")
    if slo.max_search_probes < 0:
        out.add("sweep.slo.max_search_probes", f"is {slo.max_search_probes}", "use 0 (no search) or more, e.g. 3")
    ks = cfg.sweep.k_schedule
    if ks is not None:
        fix = "give [[batch_start, batch_end, k], ...], sorted, not overlapping, the first from 1, e.g. [[1,1,3],[2,8,1]]"
        try:
            entries = [tuple(int(x) for x in e) for e in ks]
        except (TypeError, ValueError):
            entries = None
        if not entries or any(len(e) != 3 for e in entries):
            out.add("sweep.k_schedule", f"is {list(ks)}", fix)
        elif entries[0][0] != 1 or any(e[0] > e[1] or e[2] < 1 for e in entries) or \
                any(b[0] <= a[1] for a, b in zip(entries, entries[1:])):
            out.add("sweep.k_schedule", f"is {[list(e) for e in entries]}", fix)
        if cfg.draft.method == "none":
            out.add("sweep.k_schedule", "is set but draft.method is none", "pick a draft, or drop sweep.k_schedule")
    has_limit = any(getattr(slo, k) is not None for k in keys)
    if not has_limit and slo.good_share is not None:
        out.add("sweep.slo.good_share", "is set but no limit is", "set a limit, e.g. sweep.slo.ttft_ms=500")
    if has_limit and cfg.topology.kind == "disagg":
        out.add("sweep.slo", "is not supported with topology=disagg yet", "use topology=aggregated with an SLO")
    return out


def gates_problems(cfg: LauncherConfig) -> list[ConfigError]:
    """Gates."""
    out = Problems()
    sw = cfg.sweep
    if cfg.bench.aiperf_mode not in ("phases", "point"):
        out.add("bench.aiperf_mode", f"is '{cfg.bench.aiperf_mode}'",
                "use bench.aiperf_mode=phases (one AIPerf process per dataset x temperature) or point")
    g = cfg.bench.gates
    if not 0 <= g.max_failed_fraction <= 1:
        out.add("bench.gates.max_failed_fraction", f"is {g.max_failed_fraction}", "use a fraction in [0, 1]")
    for key, ds in [("min_acceptance_length", d_) for d_ in g.min_acceptance_length] + \
            [("min_speedup", d_) for d_ in g.min_speedup]:
        if ds not in sw.datasets:
            out.add(f"bench.gates.{key}.{ds}", "names a dataset that is not in the sweep",
                    f"use one of: {', '.join(sw.datasets)}")
    return out
