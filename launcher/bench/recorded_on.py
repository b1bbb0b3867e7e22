"""Where a point ran, in the terms a golden reference records (launcher.golden.verdict.Platform):
engine, version, build (cpu / cuda), the CPU attention kernel the engine picks (by the ISA
it runs on: amx / avx512 / avx2) or the GPU's name, and the served dtype. Written into each
point's configuration.json (``specdec_launcher.recorded_on``) so a golden verdict can say
what differs from where its reference was recorded. docs/golden.md.

The kernel is the engine's own rule (launcher.engines: ``cpu_attention_kernel``) applied to
this node's CPU flags, the server's dtype and block size and the checkpoint's head size:
the engine does not report it.
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from launcher.runtime.checkpoint import DTYPE_NAMES, checkpoint_config  # noqa: F401 (re-exported)
from launcher.runtime.cpuinfo import cpu_flags as read_cpu_flags
from launcher.runtime.cpuinfo import parse_cpu_flags as cpu_flags  # noqa: F401 (the text form, re-exported)
from launcher.engines import Engine
from launcher.engines.flags import flag_values
from launcher.golden import Platform

NO_GPU = "cpu"  # configuration.json's gpu field without a visible NVIDIA GPU (launcher.runtime.telemetry)
def served_dtype(server_argv: Sequence[str], config: Mapping) -> Optional[str]:
    """The dtype the server computes in: its --dtype, else (auto) the checkpoint's 16-bit dtype;
    "auto" where the engine decides (a float32 or unknown checkpoint)."""
    given = (flag_values(list(server_argv or []), "--dtype") or [None])[0]
    if given and given.lower() != "auto":
        return DTYPE_NAMES.get(given.lower(), given.lower())
    ckpt = DTYPE_NAMES.get(str(config.get("dtype") or config.get("torch_dtype") or "").lower())
    return ckpt if ckpt in ("bfloat16", "float16") else "auto"


def head_size(config: Mapping) -> Optional[int]:
    if isinstance(config.get("head_dim"), int):
        return config["head_dim"]
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    return hidden // heads if isinstance(hidden, int) and isinstance(heads, int) and heads else None


def recorded_on(*, engine: Engine, version: Optional[str], gpu: Optional[str], server_argv: Sequence[str],
                config: Mapping, flags: set[str]) -> dict:
    """The point's platform: ``gpu`` is configuration.json's gpu field ("cpu" without a GPU)."""
    eng = engine
    dtype = served_dtype(server_argv, config)
    cpu = not gpu or gpu == NO_GPU
    block = (flag_values(list(server_argv or []), "--block-size") or [None])[0]
    kernel = None
    if cpu:
        kernel = eng.cpu_attention_kernel(flags, dtype, int(block) if block and block.isdigit() else None,
                                          head_size(config))
    return Platform(engine=eng.name, version=version or None, build="cpu" if cpu else "cuda",
                    cpu_kernel=kernel, gpu=None if cpu else gpu, dtype=dtype).as_dict()


def this_point(*, engine: Engine, version: Optional[str], gpu: Optional[str], server_argv: Sequence[str],
               model: Optional[str]) -> dict:
    """recorded_on for a point served on this node (its /proc/cpuinfo, the checkpoint on disk)."""
    return recorded_on(engine=engine, version=version, gpu=gpu, server_argv=server_argv,
                       config=checkpoint_config(model), flags=read_cpu_flags())
