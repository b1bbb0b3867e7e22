"""What a point measured, read once: the one reader of a run's identity.

The run identity (launcher.contracts.run_identity.RunIdentity: model, draft, method, k, forced
acceptance, engine and version, the server's settings and their fingerprint) is read here for
speedup, break-even, best k, the SLO answer, compare, history, the report and the console.

Where it is recorded (results of this version): configuration.json's ``specdec_launcher``
extension, else the job's summary.json, else its job.json. Results written before it are read
through the fallback, which builds the same identity from what they recorded: ours, the
extension's ``speculative_config``, ``model`` and ``forced_acceptance``, the server flags of the
point's ``serving_config`` or of job.json, else server_ready.json's argv; specdec_bench's, its
flat arguments (``speculative_algorithm``, ``draft_length``, ``model_dir``, ``draft_model_dir``).
Everything that changes what was measured is in ``workload``: dataset, temperature,
concurrency, k and the forced acceptance (vLLM's synthetic sampling: the AL is set, not the
draft's); the server configuration (``configuration``) keeps two servers apart, and
``configuration_label`` names what differs between those that share a folder.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from launcher.contracts.run_identity import RunIdentity, build, configuration_labels
from launcher.contracts.server_ready import read_server_ready, ready_path
from launcher.engines.forced_acceptance import label as forced_label
from launcher.results.layout import EXTENSION_KEY


@dataclass(frozen=True)
class Identity:
    """A point's run identity and where its files came from."""
    run: RunIdentity
    origin: str                 # "specdec_launcher" or "specdec_bench"
    image: str
    tool: str                   # "specdec-launcher 0.1.0 (abcdef12)" / "specdec_bench <version or sha>"
    timestamp: Optional[str]

    model = property(lambda self: self.run.model, doc="the target model")
    method = property(lambda self: self.run.method, doc='the speculative method ("none" without speculation)')
    k = property(lambda self: self.run.k, doc="speculative tokens (0 without speculation; None when unknown)")

    @property
    def draft(self) -> str:
        """The draft checkpoint, "none" without speculation, "-" for a method without one."""
        return self.run.draft or ("none" if self.run.method == "none" else "-")

    @property
    def forced(self) -> str:
        """"forced AL 3.5" / "forced rates [...]" / "" (launcher.engines.forced_acceptance.label)."""
        return forced_label(self.run.forced) if self.run.forced else ""

    @property
    def engine_version(self) -> str:
        return self.run.engine_version or "?"


def _short(name) -> str:
    return str(name).rstrip("/").rsplit("/", 1)[-1] if name else ""


def _ext(p) -> dict:
    cfg = (p.configuration or {}) if p is not None else {}
    ext = cfg.get(EXTENSION_KEY)
    return ext if isinstance(ext, dict) else {}


def _recorded(job, p) -> Optional[RunIdentity]:
    """The identity this version records: the point's, the job's summary.json, its job.json."""
    for d in (_ext(p).get("run_identity"), job.summary.get("run_identity")):
        if isinstance(d, dict):
            try:
                return RunIdentity.from_dict(d)
            except (ValueError, TypeError):
                continue
    return job.spec.run_identity if job.spec is not None else None


def _speculative_config(job, cfg: dict) -> dict:
    """The speculative config the point records (ours), else specdec_bench's flat arguments, else job.json's."""
    ext = cfg.get(EXTENSION_KEY) or {}
    sc = ext.get("speculative_config") or (cfg.get("serving_config") or {}).get("speculative_config")
    if isinstance(sc, dict) and sc:
        return sc
    alg = cfg.get("speculative_algorithm")
    if isinstance(alg, str) and alg:
        if alg.upper() == "NONE":
            return {"method": "none"}
        return {"method": alg.lower(), **({"model": cfg["draft_model_dir"]} if cfg.get("draft_model_dir") else {}),
                **({"num_speculative_tokens": cfg["draft_length"]} if isinstance(cfg.get("draft_length"), int)
                   else {})}
    spec = job.spec.speculative_config if job.spec is not None else None
    if spec:
        return dict(spec)
    method = (job.spec.method if job.spec is not None else None) or job.summary.get("method")
    k = job.summary.get("num_speculative_tokens")
    return {"method": method, **({"num_speculative_tokens": k} if isinstance(k, int) else {})} if method else {}


def _server_flags(job, cfg: dict) -> list:
    """The server's flags as recorded: the point's serving config, job.json, else server_ready.json's argv."""
    flags = (cfg.get("serving_config") or {}).get("server_flags")
    if flags:
        return list(flags)
    if job.spec is not None and job.spec.server_flags:
        return list(job.spec.server_flags)
    ready = read_server_ready(ready_path(job.path))
    return list(ready.argv) if ready is not None else []


def _fallback(job, p) -> RunIdentity:
    """The identity of results written before it was recorded, built from what they hold."""
    cfg = (p.configuration or {}) if p is not None else {}
    ext, spec = _ext(p), job.spec
    sc = _speculative_config(job, cfg)
    forced = (p.result.forced_acceptance if p is not None and p.result else None) or \
        (p.row.forced_acceptance if p is not None and p.row else None)
    return build(model=str(ext.get("model") or cfg.get("model_dir") or (spec.model if spec else "")
                           or job.summary.get("model") or "?"),
                 method=str(sc.get("method") or (spec.method if spec else "") or "none"),
                 speculative_config=sc, forced=forced,
                 engine=str(ext.get("engine") or (spec.engine if spec else "") or str(cfg.get("engine") or "").lower()),
                 engine_version=str(cfg.get("engine_version") or job.summary.get("engine_version") or ""),
                 server_flags=_server_flags(job, cfg))


def run_identity(job, p=None) -> RunIdentity:
    """Point ``p`` of ``job`` (launcher.results.job_dir), or the job itself (its first point that
    records a configuration): what it measured and with which server (the one reader)."""
    if p is None:
        p = next((q for q in job.points if q.configuration), None)
    return _recorded(job, p) or _fallback(job, p)


def identity(job, p) -> Identity:
    """Point ``p`` of ``job``: its run identity and where its files came from."""
    cfg = p.configuration or {}
    ext = _ext(p)
    origin = "specdec_launcher" if ext or (p.result and p.result.ours) else "specdec_bench"
    tool = ext.get("tool_version") and f"specdec-launcher {ext['tool_version']}" + (
        f" ({str(ext.get('git_sha'))[:8]})" if ext.get("git_sha") else "")
    if not tool:
        sdb = cfg.get("specdec_bench_version") or (cfg.get("specdec_bench_sha") or "")[:8]
        tool = f"specdec_bench {sdb}".strip()
    return Identity(run=run_identity(job, p), origin=origin, image=str(cfg.get("container_image") or "none"),
                    tool=tool, timestamp=cfg.get("timestamp"))


def point_k(job, p) -> Optional[int]:
    """The number of speculative tokens of point ``p`` of ``job`` (0 without speculation)."""
    return run_identity(job, p).k


def forced(job, p) -> str:
    """The point's forced acceptance in words ("" when the draft earned its acceptance)."""
    f = run_identity(job, p).forced
    return forced_label(f) if f else ""


def is_baseline(job) -> bool:
    """A job without speculation (the matched baseline)."""
    return run_identity(job).method == "none"


def workload(job, p) -> tuple:
    """What a point measured, for pairing and series: (dataset, T, C, k, forced)."""
    i = run_identity(job, p)
    return (p.dataset, round(float(p.temperature), 6), int(p.concurrency), i.k, forced_label(i.forced) if i.forced else "")


def configuration_label(ident: RunIdentity, labels: dict) -> str:
    """The label of ``ident``'s configuration among ``labels`` (folder_labels), "" when alone."""
    return labels.get(ident.configuration, "")


def tag(label: Optional[str]) -> str:
    """A configuration's label as printed after a row's name: " [+ --async-scheduling]", "" without one."""
    return f" [{label}]" if label else ""


def folder_labels(jobs: Iterable) -> dict:
    """The jobs' configurations labelled by what differs (launcher.contracts.run_identity.configuration_labels)."""
    return configuration_labels(run_identity(j) for j in jobs)


def describe(i: Identity) -> str:
    """The speculation in words: "draft_model k=3, draft tiny-draft-noisy, forced AL 3.5"."""
    if i.method == "none":
        return "no speculation (baseline)"
    draft = _short(i.draft) if i.draft not in ("-", "none") else ""
    return ", ".join(x for x in (f"{i.method}" + (f" k={i.k}" if i.k else ""), f"draft {draft}" if draft else "",
                                 i.forced) if x)
