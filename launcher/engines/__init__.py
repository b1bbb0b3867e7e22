"""The inference engines behind one seam (launcher.engines.base.Engine: the parts of
launcher.engines.parts, composed).

Adding an engine is one new module here plus its recipe (recipes/engine/): register
it in ENGINES (docs/engines.md).
"""
from __future__ import annotations

from launcher.engines.base import Engine
from launcher.engines.parts import (Acceptance, ApiKey, Disaggregation, ForcedAcceptance, HostEnvironment,
                                    Readiness, RecipeChecks, ServerCommand, Speculation)
from launcher.engines.speculation import SpeculationFlags, num_speculative_tokens, speculation_flags
from launcher.engines.types import (AcceptanceSource, Capabilities, EngineError, KvTransferMetrics, MetricNames,
                                    RecipeFacts, ServerKey, ServingOptions, UserServerArgs)
from launcher.engines.versions import parse_version, version_from_image
from launcher.engines.sglang import SGLang
from launcher.engines.vllm import VLLM

ENGINES: dict[str, Engine] = {"vllm": VLLM(), "sglang": SGLang()}
# The engine a recipe serves when it names none (server.engine's default), and the one the tools
# run by hand serve without --engine (run.sh, the benchmark's flag form, the known-answer probe).
# Nothing else falls back to it: every other caller is handed its engine (tests/test_owners_engine_flags.py).
DEFAULT_ENGINE = "vllm"


def get_engine(name: str) -> Engine:
    """The engine a recipe or a job spec names. Called once per process, where the engine is
    resolved (the plan, validation's engine check, the node's context); the rest is handed it."""
    try:
        return ENGINES[name]
    except KeyError:
        raise EngineError(f"unknown engine {name!r} (known: {', '.join(sorted(ENGINES))})") from None


def key_envs() -> tuple[str, ...]:
    """The environment variables engines read a key from (a user may export it there)."""
    return tuple(e.key_env for e in ENGINES.values() if e.key_env)


__all__ = ["AcceptanceSource", "Capabilities", "Engine", "EngineError", "KvTransferMetrics", "MetricNames",
           "RecipeFacts", "ServerKey", "ServingOptions", "UserServerArgs", "ENGINES", "DEFAULT_ENGINE",
           "get_engine", "key_envs", "num_speculative_tokens", "parse_version",
           "version_from_image", "Acceptance", "ApiKey", "Disaggregation", "ForcedAcceptance", "HostEnvironment",
           "Readiness", "RecipeChecks", "ServerCommand", "Speculation", "SpeculationFlags", "speculation_flags"]
