"""What every inference engine tells the rest of the product: the seam.

An engine owns its server argv (built from typed spec fields, never parsed
back): serving, speculative, forced-acceptance, acceptance-stats, multi-node and
disaggregation flags; its environment and router; its endpoints and how to read
its version; how its server receives the API key; its image and command
defaults; its Prometheus metric names; which features each of its versions has;
and the recipe checks only it can make. The product asks an :class:`Engine`; it
never spells an engine's flag, variable, endpoint or name itself (docs/engines.md).

:class:`Engine` is the composition of the seam's parts (launcher.engines.parts): a caller
depends on the part it uses. Standard library only: the node side imports this under a
bare engine Python.
"""
from __future__ import annotations

from launcher.engines.parts import (Acceptance, ApiKey, Disaggregation, ForcedAcceptance, HostEnvironment,
                                    Readiness, RecipeChecks, ServerCommand, Speculation)


class Engine(ServerCommand, Speculation, Acceptance, ForcedAcceptance, Readiness, Disaggregation, ApiKey,
             HostEnvironment, RecipeChecks):
    """One inference engine: every part of the seam (Python refuses to build one that misses an
    abstract method of any part)."""
    name: str = ""
    result_name: str = ""  # configuration.json's "engine", as specdec_bench writes its engine names
