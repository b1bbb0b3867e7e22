"""A local checkpoint's own description: its config.json, and the dtype names engines and
checkpoints use for the same 16- and 32-bit types. Read by the benchmark (where a point ran,
launcher.bench.recorded_on) and the login side (the KV budget, launcher.login.kv_budget)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

# the names a --dtype flag or a config.json's torch_dtype / dtype give a type, to one name each
DTYPE_NAMES = {"half": "float16", "float16": "float16", "fp16": "float16", "bfloat16": "bfloat16",
               "bf16": "bfloat16", "float": "float32", "float32": "float32", "fp32": "float32"}


def checkpoint_config(model: Optional[str]) -> dict:
    """A local checkpoint's config.json ({} for a hub id or an unreadable file)."""
    if not model:
        return {}
    try:
        v = json.loads((Path(model) / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return v if isinstance(v, dict) else {}


__all__ = ["DTYPE_NAMES", "checkpoint_config"]
