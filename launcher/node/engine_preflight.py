"""Before the server starts: which engine version the node will run, and whether
it has what the job asks (per-request stats, probabilistic drafting, forced
acceptance). A missing feature is one line, before the GPUs are spent."""
from __future__ import annotations

import dataclasses
import subprocess
from dataclasses import dataclass
from typing import Callable, Mapping, Optional

from launcher.engines import AcceptanceSource, Engine, EngineError, parse_version
from launcher.engines.forced_acceptance import forced_from_speculative_config
from launcher.contracts.job import JobSpec

PROBE_TIMEOUT_S = 120.0


def probe_version(argv: list[str], env: Mapping[str, str], timeout_s: float = PROBE_TIMEOUT_S) -> Optional[str]:
    """Run the engine's version command; the first line that holds a version, or None."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=dict(env))
    except (OSError, subprocess.SubprocessError):
        return None
    for line in (out.stdout or "").splitlines():
        if parse_version(line.strip()):
            return line.strip()
    return None


@dataclass(frozen=True)
class EngineResolution:
    spec: JobSpec                 # the spec the node runs (version, acceptance source and its flags filled)
    version_from: str             # "spec" | "probe" | "unknown"
    note: Optional[str] = None    # a change the job log should show


def resolve(spec: JobSpec, env: Mapping[str, str], eng: Engine,
            probe: Callable[[list[str], Mapping[str, str]], Optional[str]] = probe_version) -> EngineResolution:
    """The version of ``eng`` (the spec's engine, as the job's context holds it: the spec's
    version, else probed where the server runs as a local process) and the acceptance source
    it supports. Raises EngineError when the job explicitly asks for something the version lacks."""
    version, source = spec.engine_version, "spec"
    if version is None:
        argv = eng.version_probe_argv(spec.server_command) if not spec.launch.container_image else None
        version = probe(argv, env) if argv else None
        source = "probe" if version else "unknown"
    if not spec.speculative_config:
        return EngineResolution(dataclasses.replace(spec, engine_version=version), source)
    if version is not None and forced_from_speculative_config(spec.speculative_config):
        eng.forced_acceptance_check(version, cpu=False)  # CPU sampling was refused at login
    acc = eng.acceptance_source(spec.acceptance_requested, version)
    flags = list(spec.acceptance_flags)
    note = None
    if acc.value != spec.acceptance_source:
        flags = eng.acceptance_flags(acc)
        note = (f"{eng.name} {version} ({source}): per-request acceptance from {acc.value}, "
                f"not {spec.acceptance_source} as planned")
    return EngineResolution(dataclasses.replace(spec, engine_version=version, acceptance_source=acc.value,
                                                acceptance_flags=flags), source, note)


__all__ = ["AcceptanceSource", "EngineError", "EngineResolution", "probe_version", "resolve"]
