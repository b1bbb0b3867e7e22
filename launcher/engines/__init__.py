"""The inference engines behind one seam (launcher.engines.base.Engine).

Adding an engine is one new module here plus recipes: register it in ENGINES.
"""
from __future__ import annotations

from launcher.engines.base import (AcceptanceSource, Capabilities, Engine, EngineError, MetricNames,
                                   ServingOptions, num_speculative_tokens, parse_version, version_from_image)
from launcher.engines.sglang import SGLang
from launcher.engines.vllm import VLLM

ENGINES: dict[str, Engine] = {"vllm": VLLM(), "sglang": SGLang()}


def get_engine(name: str) -> Engine:
    try:
        return ENGINES[name]
    except KeyError:
        raise EngineError(f"unknown engine {name!r} (known: {', '.join(sorted(ENGINES))})") from None


__all__ = ["AcceptanceSource", "Capabilities", "Engine", "EngineError", "MetricNames", "ServingOptions", "ENGINES",
           "get_engine", "num_speculative_tokens", "parse_version", "version_from_image"]
