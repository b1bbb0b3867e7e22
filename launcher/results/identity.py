"""What a point measured, read once: the one reader of a run's identity in configuration.json.

The report's title and provenance, the console's results table, launcher.compare's pairing and
the history page's series all read a point's identity here (they read it in four places before,
each its own way, and forced acceptance was in none: a k=3 run forced to AL 3.5 and one forced
to 1.5 were one workload to compare and one series on the history page).

Ours: configuration.json's ``specdec_launcher`` extension (``speculative_config``, ``model``,
``forced_acceptance``), else the job's job.json and summary.json; specdec_bench's: its flat
arguments (``speculative_algorithm``, ``draft_length``, ``model_dir``, ``draft_model_dir``).
Everything that changes what was measured is in ``workload``: dataset, temperature,
concurrency, k and the forced acceptance (vLLM's synthetic sampling: the AL is set, not the
draft's).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from launcher.engines import num_speculative_tokens
from launcher.engines.forced_acceptance import forced_from_speculative_config, label as forced_label
from launcher.results.layout import EXTENSION_KEY


@dataclass(frozen=True)
class Identity:
    origin: str                 # "specdec_launcher" or "specdec_bench"
    model: str
    draft: str                  # the draft checkpoint, "none" without speculation, "-" for a method without one
    method: str
    k: Optional[int]            # speculative tokens (0 without speculation; None when unknown)
    forced: str                 # "forced AL 3.5" / "forced rates [...]" / "" (launcher.engines.forced_acceptance.label)
    engine_version: str
    image: str
    tool: str                   # "specdec-launcher 0.1.0 (abcdef12)" / "specdec_bench <version or sha>"
    timestamp: Optional[str]


def _short(name) -> str:
    return str(name).rstrip("/").rsplit("/", 1)[-1] if name else ""


def _spec(cfg: dict) -> dict:
    ext = cfg.get(EXTENSION_KEY) or {}
    sc = ext.get("speculative_config") or (cfg.get("serving_config") or {}).get("speculative_config")
    return sc if isinstance(sc, dict) else {}


def point_k(job, p) -> Optional[int]:
    """The number of speculative tokens of point ``p`` of ``job`` (launcher.results.job_dir)."""
    cfg = p.configuration or {}
    sc = _spec(cfg)
    if sc:
        if sc.get("method") in (None, "none"):
            return 0
        k = sc.get("num_speculative_tokens")
        if isinstance(k, int):
            return k
    alg = cfg.get("speculative_algorithm")
    if isinstance(alg, str) and alg.upper() == "NONE":
        return 0
    if isinstance(cfg.get("draft_length"), int) and alg:
        return cfg["draft_length"]
    spec = job.spec
    if (spec and spec.method == "none") or job.summary.get("method") == "none":
        return 0
    k = num_speculative_tokens(spec.speculative_config if spec else None) or job.summary.get("num_speculative_tokens")
    return int(k) if isinstance(k, int) else None


def forced(job, p) -> str:
    """The point's forced acceptance in words ("" when the draft earned its acceptance)."""
    f = p.result.forced_acceptance if p.result else None
    if not f:
        f = p.row.forced_acceptance if p.row else None
    if not f and job.spec is not None:
        f = forced_from_speculative_config(job.spec.speculative_config)
    return forced_label(f) if f else ""


def identity(job, p) -> Identity:
    """Point ``p`` of ``job``: what it measured and with what (the one reader)."""
    cfg = p.configuration or {}
    ext = cfg.get(EXTENSION_KEY) or {}
    sc = _spec(cfg)
    origin = "specdec_launcher" if ext or (p.result and p.result.ours) else "specdec_bench"
    spec = job.spec
    model = ext.get("model") or cfg.get("model_dir") or job.summary.get("model") or "?"
    method = (sc.get("method") or str(cfg.get("speculative_algorithm") or "").lower() or job.summary.get("method")
              or (spec.method if spec else None) or "none")
    draft = sc.get("model") or cfg.get("draft_model_dir") or ((spec.speculative_config or {}).get("model") if spec else None) \
        or ("none" if method == "none" else "-")
    tool = ext.get("tool_version") and f"specdec-launcher {ext['tool_version']}" + (
        f" ({str(ext.get('git_sha'))[:8]})" if ext.get("git_sha") else "")
    if not tool:
        sdb = cfg.get("specdec_bench_version") or (cfg.get("specdec_bench_sha") or "")[:8]
        tool = f"specdec_bench {sdb}".strip()
    return Identity(origin=origin, model=str(model), draft=str(draft), method=str(method), k=point_k(job, p),
                    forced=forced(job, p), engine_version=str(cfg.get("engine_version") or job.summary.get("engine_version") or "?"),
                    image=str(cfg.get("container_image") or "none"), tool=tool, timestamp=cfg.get("timestamp"))


def workload(job, p) -> tuple:
    """What a point measured, for pairing and series: (dataset, T, C, k, forced)."""
    i = identity(job, p)
    return (p.dataset, round(float(p.temperature), 6), int(p.concurrency), i.k, i.forced)


def describe(i: Identity) -> str:
    """The speculation in words: "draft_model k=3, draft tiny-draft-noisy, forced AL 3.5"."""
    if i.method == "none":
        return "no speculation (baseline)"
    draft = _short(i.draft) if i.draft not in ("-", "none") else ""
    return ", ".join(x for x in (f"{i.method}" + (f" k={i.k}" if i.k else ""), f"draft {draft}" if draft else "",
                                 i.forced) if x)
