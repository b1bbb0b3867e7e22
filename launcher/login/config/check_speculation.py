"""Validation of the speculation a recipe asks for: method, draft and k; forced acceptance; the
golden reference. Each check returns its problems (launcher.login.config.validate runs them)."""
from __future__ import annotations

from typing import Optional

from launcher.engines import EngineError, ForcedAcceptance, forced_acceptance as fa_mod
from launcher.golden import recipe_match
from launcher.login.config.schema import LauncherConfig, METHODS_WITHOUT_DRAFT_CKPT, SPEC_METHODS
from launcher.login.errors import ConfigError, Problems
from launcher.login.server_args import engine_version


def speculation_problems(cfg: LauncherConfig) -> list[ConfigError]:
    """Speculative method and draft."""
    out = Problems()
    d, sw = cfg.draft, cfg.sweep
    if d.method not in SPEC_METHODS:
        out.add("draft.method", f"unknown method '{d.method}'", f"use one of: {', '.join(SPEC_METHODS)}")
    elif d.method not in METHODS_WITHOUT_DRAFT_CKPT and not d.model:
        out.add("draft.model", f"method '{d.method}' needs a draft checkpoint", "set draft.model=<HF id or path>")
    if d.method != "none" and d.num_speculative_tokens < 1:
        out.add("draft.num_speculative_tokens", f"is {d.num_speculative_tokens}, must be >= 1",
                "set draft.num_speculative_tokens=3 (or draft=none for a baseline)")
    for k in ("method", "model", "num_speculative_tokens"):
        if k in d.extra:
            out.add(f"draft.extra.{k}", f"overrides draft.{k}", f"set draft.{k} instead and remove draft.extra.{k}")
    if sw.baseline and d.method == "none":
        out.add("sweep.baseline", "is true but draft.method is none: there is no speculation to compare",
                "pick a draft (e.g. draft=tiny_noisy) or set sweep.baseline=false")
    for ds, v in cfg.bench.gates.min_speedup.items():
        if not sw.baseline:
            out.add(f"bench.gates.min_speedup.{ds}", "needs a baseline to measure the speedup against",
                    "set sweep.baseline=true")
        if v <= 0:
            out.add(f"bench.gates.min_speedup.{ds}", f"is {v}, must be > 0", "e.g. 1.1 for at least 10% faster")
    for k in sw.num_speculative_tokens:
        if k < 1:
            out.add("sweep.num_speculative_tokens", f"contains {k}, every value must be >= 1", "remove it")
    return out


def forced_acceptance_problems(cfg: LauncherConfig, eng: Optional[ForcedAcceptance]) -> list[ConfigError]:
    """Forced (synthetic) acceptance: vLLM's mechanism, GPU sampling only."""
    out = Problems()
    d, cl, sw, srv = cfg.draft, cfg.cluster, cfg.sweep, cfg.server
    fa = d.forced_acceptance
    levels = list(sw.forced_acceptance_lengths)
    for f, p, fix in fa_mod.sweep_problems(levels, list(sw.num_speculative_tokens) or [d.num_speculative_tokens],
                                           d.method, fa.length, fa.rates):
        out.add(f, p, fix)
    if fa.length is not None or fa.rates is not None or levels:
        seen = set()
        for k in (list(sw.num_speculative_tokens) or [d.num_speculative_tokens]) if not levels else []:
            for f, p, fix in fa_mod.problems(fa.length, fa.rates, k, d.method):
                if (f, p) not in seen:
                    seen.add((f, p))
                    out.add(f, p, fix)
        if eng is None:  # an unknown engine: the engine check says so
            return out
        why = eng.cpu_sampling_reason(cl.gpus_per_node, cl.name, {**cl.env, **srv.env})
        if why:
            out.add(fa_mod.SWEEP_FIELD if levels else fa_mod.FIELD,
                    f"cannot run here: {why}, and {eng.cpu_sampling_refusal}", "run on a GPU cluster "
                    "(e.g. cluster=h100) or remove " + ("sweep.forced_acceptance_lengths" if levels else "draft.forced_acceptance"))
        version = engine_version(cfg)
        if version is not None:
            try:
                eng.forced_acceptance_check(version, cpu=False)
            except EngineError as e:
                out.add(fa_mod.FIELD, f"cannot run on server.engine_version={version}: {e}",
                        "use an image with synthetic acceptance or remove draft.forced_acceptance")
    return out


def golden_problems(cfg: LauncherConfig) -> list[ConfigError]:
    """bench.golden names a known reference made with this recipe's target, draft, method and k
    (launcher.golden.recipe_match)."""
    gid, d = cfg.bench.golden, cfg.draft
    if gid is None:
        return []
    unknown = recipe_match.unknown_reference(gid)
    if unknown:
        return [ConfigError("bench.golden", *unknown)]
    if cfg.model.random_weights or d.random_weights:
        return []  # skipped, not compared: the plan's note says why (launcher.login.plan.golden_skip_reason)
    ks = list(cfg.sweep.num_speculative_tokens) or [d.num_speculative_tokens]
    return [ConfigError("bench.golden", problem, fix) for problem, fix in recipe_match.recipe_mismatches(
        gid, model=cfg.model.path, method=d.method, draft=d.model, ks=ks, datasets=list(cfg.sweep.datasets))]
