"""The flags that make a server speculate and report its acceptance: built here, and only here.

The planner builds a job's once (launcher.login.server_args) and the job spec carries them
(``JobSpec.speculative_flags``, ``JobSpec.acceptance_flags``); the server argv is assembled from
what the spec carries. A config the planner did not know (the node's known-answer probe, a
hand-written spec) and an acceptance source the node resolves after probing the version get
theirs from the same function. Pure, standard library only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Protocol

from launcher.engines.types import AcceptanceSource


class _SpeculatingEngine(Protocol):  # launcher.engines.parts: Speculation and Acceptance
    def speculative_flags(self, config: dict) -> list[str]: ...

    def acceptance_flags(self, source: AcceptanceSource, level: str = "detailed") -> list[str]: ...


@dataclass(frozen=True)
class SpeculationFlags:
    """A speculative server's own flags: the engine's for its config, and those that make it
    report acceptance (none without a source)."""
    speculative: list[str] = field(default_factory=list)
    acceptance: list[str] = field(default_factory=list)


def speculation_flags(engine: _SpeculatingEngine, config: Optional[dict],
                      source: Optional[AcceptanceSource] = None, level: str = "detailed") -> SpeculationFlags:
    """The flags of a server speculating with ``config`` (None or {}: none) and reporting its
    acceptance from ``source`` at ``level`` (None: no acceptance flags). An engine that cannot
    take the config raises its EngineError."""
    if not config:
        return SpeculationFlags()
    return SpeculationFlags(list(engine.speculative_flags(config)),
                            list(engine.acceptance_flags(source, level)) if source is not None else [])


def num_speculative_tokens(speculative_config: Optional[dict]) -> Optional[int]:
    """k of a job's speculative config (job.json's ``speculative_config``), None without one."""
    k = (speculative_config or {}).get("num_speculative_tokens")
    return int(k) if k is not None else None
