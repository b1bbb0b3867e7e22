"""The inference engines behind one seam (launcher.engines.base.Engine, an ABC).

Adding an engine is one new module here plus its recipe (recipes/engine/): register
it in ENGINES (docs/engines.md).
"""
from __future__ import annotations

from launcher.engines.base import (AcceptanceSource, Capabilities, Engine, EngineError, KvTransferMetrics,
                                   MetricNames, RecipeFacts, ServerKey, ServingOptions, UserServerArgs,
                                   num_speculative_tokens, parse_version, version_from_image)
from launcher.engines.sglang import SGLang
from launcher.engines.vllm import VLLM

ENGINES: dict[str, Engine] = {"vllm": VLLM(), "sglang": SGLang()}
DEFAULT_ENGINE = "vllm"  # the schema's and the job spec's default (run.sh serves it)


def get_engine(name: str) -> Engine:
    try:
        return ENGINES[name]
    except KeyError:
        raise EngineError(f"unknown engine {name!r} (known: {', '.join(sorted(ENGINES))})") from None


def default_engine() -> Engine:
    return ENGINES[DEFAULT_ENGINE]


def key_envs() -> tuple[str, ...]:
    """The environment variables engines read a key from (a user may export it there)."""
    return tuple(e.key_env for e in ENGINES.values() if e.key_env)


__all__ = ["AcceptanceSource", "Capabilities", "Engine", "EngineError", "KvTransferMetrics", "MetricNames",
           "RecipeFacts", "ServerKey", "ServingOptions", "UserServerArgs", "ENGINES", "DEFAULT_ENGINE",
           "default_engine", "get_engine", "key_envs", "num_speculative_tokens", "parse_version",
           "version_from_image"]
