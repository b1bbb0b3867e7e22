"""Are a speculative server and its baseline the same server but for speculation?

What differs, as labels ("+ --no-enable-prefix-caching", "--max-num-seqs 64→128",
"asynchronous scheduling on→off (the engine's choice)"), from each job's recorded server argv
(server_ready.json) and the settings the engine chose itself: what its start-up log said
(``engine_chosen``, recorded by the node: launcher.engines Readiness.chosen_settings), else the
engine's rule by method and version (``inferred_chosen_settings``), said to be inferred. The
speculative flags, where the server listens and paths are left out: they differ by design.
"""
from __future__ import annotations

from pathlib import PurePosixPath
from typing import Optional

from launcher.contracts.run_identity import settings_diff
from launcher.contracts.server_ready import ServerReady, read_server_ready
from launcher.engines import EngineError, get_engine
from launcher.results.identity import run_identity
from launcher.results.job_dir import Job

SETTING_WORDS = {"async_scheduling": "asynchronous scheduling", "overlap_schedule": "overlap scheduling"}


def chosen_diff(spec: dict[str, str], base: dict[str, str], inferred: bool) -> list[str]:
    """The engine-chosen settings that differ, as labels (``inferred``: from the engine's rule, not its log)."""
    how = "the engine's choice" + ("; inferred from its rule for this method and version" if inferred else "")
    return [f"{SETTING_WORDS.get(k, k)} {base[k]}→{spec[k]} ({how})"
            for k in sorted(set(spec) & set(base)) if spec[k] != base[k]]


def _engine(job: Job):
    """The engine that served the job, as its run identity names it (None: not recorded or unknown)."""
    name = run_identity(job).engine
    try:
        return get_engine(name) if name else None
    except EngineError:
        return None


def _chosen(job: Job, ready: ServerReady, engine, method: Optional[str]) -> tuple[dict[str, str], bool]:
    if ready.engine_chosen:
        return dict(ready.engine_chosen), False
    version = ready.engine_version or (job.spec.engine_version if job.spec else None)
    return engine.inferred_chosen_settings(method, version, ready.argv), True


def differing(spec_job: Job, base_job: Job, spec_method: Optional[str]) -> Optional[list[str]]:
    """What differs between the two jobs' servers besides speculation (the run identities' serving
    settings: launcher.contracts.run_identity), with the settings each engine chose itself; None
    when either job recorded no server argv (server_ready.json) or its engine is unknown."""
    s_ready, b_ready = read_server_ready(spec_job.path), read_server_ready(base_job.path)
    engine = _engine(spec_job)
    if s_ready is None or b_ready is None or not s_ready.argv or not b_ready.argv or engine is None:
        return None
    ignore = set(engine.speculative_flag_names()) | set(engine.acceptance_flag_names())
    labels = settings_diff(run_identity(base_job).serving, run_identity(spec_job).serving, ignore=ignore)
    (s_ch, s_inf), (b_ch, b_inf) = _chosen(spec_job, s_ready, engine, spec_method), _chosen(base_job, b_ready,
                                                                                           engine, "none")
    return labels + chosen_diff(s_ch, b_ch, s_inf or b_inf)


def settings_key(job: Job) -> tuple:
    """The job's serving configuration (its run identity's fingerprint): the servers of one
    configuration, forced levels apart, share it."""
    return (run_identity(job).fingerprint,)


def drafter_label(job: Job, base: Job, method: Optional[str], k: Optional[int], draft: Optional[str]) -> str:
    """A speculative configuration in words, against its baseline: its drafter, method and k, and
    the serving flags by which it differs from that baseline ("draft (draft_model k=3;
    + --async-scheduling)"); a row's ``drafter``. The servers of one configuration, whatever their
    forced level, share it. (launcher.results.identity.configuration_label is another thing: what
    sets apart the servers that share a folder.)"""
    flags = settings_diff(run_identity(base).serving, run_identity(job).serving)
    name = PurePosixPath(str(draft)).name if draft else (method or "?")
    return f"{name} ({method} k={k}" + ("; " + ", ".join(flags) if flags else "") + ")"
