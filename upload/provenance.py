"""Provenance: the configuration.json fields a result is worthless without."""

from __future__ import annotations

from typing import Any

# specdec_bench's configuration.json keys (ours writes the same ones).
PROVENANCE_FIELDS = ("container_image", "model_dir", "speculative_algorithm", "engine_version", "timestamp")

_HINTS = {
    "container_image": "set CONTAINER_IMAGE in the job's environment",
    "model_dir": "the benchmark records the target model",
    "speculative_algorithm": 'use "NONE" for a baseline',
    "engine_version": "the launcher records the engine's version",
    "timestamp": "the launcher records the UTC start time",
}
ALLOW_FLAG = "--allow-incomplete-provenance"


def _is_empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (dict, list)):
        return not value
    return False


def provenance_problems(config: dict) -> list[str]:
    """One line per missing or empty provenance field of configuration.json."""
    problems = []
    for name in PROVENANCE_FIELDS:
        value = config.get(name)
        if _is_empty(value):
            state = "missing" if name not in config else "empty"
            problems.append(
                f"configuration.json: {name} is {state}; {_HINTS[name]}, "
                f"or pass {ALLOW_FLAG}"
            )
    return problems
