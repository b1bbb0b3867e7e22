"""What vLLM chooses for its own scheduling, read from its start-up log or, for results recorded
without it, from its rule by method and version (launcher.engines Readiness.chosen_settings).

Asynchronous scheduling prepares the next step while the GPU runs this one. vLLM says at start
"Asynchronous scheduling is enabled." or "... is disabled." (vllm/config/vllm.py). 0.26 leaves it
off for method draft_model and turns it on otherwise, the baseline included, unless the user sets
it (--async-scheduling / --no-async-scheduling): docs/gpu.md's profiles (``step`` against
``step_with_batch_queue``) and docs/speedup.md "Why a speedup is what it is". Pure.
"""
from __future__ import annotations

import re
from typing import Optional, Sequence

from launcher.engines.flags import has_flag
from launcher.engines.versions import parse_version

ASYNC_SCHEDULING_LOG = re.compile(r"Asynchronous scheduling is (enabled|disabled)")
ASYNC_SCHEDULING_FLAGS = ("--async-scheduling", "--no-async-scheduling")
ASYNC_SCHEDULING_RULE_VERSIONS = ((0, 26, 0), (0, 27, 0))  # [from, below): where the rule was read
ASYNC_SCHEDULING_OFF_FOR = ("draft_model",)


def chosen_settings(log_text: str) -> dict[str, str]:
    """{"async_scheduling": "on" | "off"} from the last such line of a server's start-up log; {} without one."""
    found = ASYNC_SCHEDULING_LOG.findall(log_text or "")
    return {"async_scheduling": "on" if found[-1] == "enabled" else "off"} if found else {}


def inferred_chosen_settings(method: Optional[str], version: Optional[str], argv: Sequence[str]) -> dict[str, str]:
    """vLLM 0.26's rule by speculative method ("none": no speculation); {} for another version, an
    unknown one, or when the user set it in ``argv``."""
    v = parse_version(version)
    lo, below = ASYNC_SCHEDULING_RULE_VERSIONS
    if v is None or not lo <= v < below or any(has_flag(argv, f) for f in ASYNC_SCHEDULING_FLAGS):
        return {}
    return {"async_scheduling": "off" if method in ASYNC_SCHEDULING_OFF_FOR else "on"}
