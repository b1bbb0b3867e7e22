"""Where the real parts live (common/setup/install.sh puts them there), and
helpers to start real vLLM CPU servers for tests."""
from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

from launcher.engines import get_engine

REPO_ROOT = Path(__file__).resolve().parents[2]
SPECDEC_HOME = Path(os.environ.get("SPECDEC_HOME") or Path.home() / ".cache" / "specdec-launcher")
VLLM_PYTHON = SPECDEC_HOME / "venvs" / "vllm" / "bin" / "python"
AIPERF = SPECDEC_HOME / "venvs" / "aiperf" / "bin" / "aiperf"
ROUTER = SPECDEC_HOME / "venvs" / "router" / "bin" / "vllm-router"  # topology=disagg
NIXL_STAMP = SPECDEC_HOME / "venvs" / "vllm" / ".spec-kv-transfer"  # NIXL in the vllm venv (install.sh)
MODELS = SPECDEC_HOME / "models"
TARGET = MODELS / "tiny-target"
DRAFT_NOISY = MODELS / "tiny-draft-noisy"
DRAFT_IDENTICAL = MODELS / "tiny-draft-identical"
SERVER_CMD = f"{VLLM_PYTHON} -m vllm.entrypoints.openai.api_server"
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
BASE_FLAGS = ["--served-model-name", "tiny", "--enforce-eager", "--dtype", "bfloat16", "--max-model-len", "1024"]
# The suite runs many servers at once on two cores. vLLM's CPU build binds each engine's thread
# to core 0 by default (its cpu_bind_env, auto, keeps the last core for the frontend),
# so concurrent servers queued on one core while the other idled. Unbound, one thread each (as
# auto gives on two cores, so the same kernels and numbers), the OS spreads them; a variable
# already set wins. Disagg jobs still pin their own servers (topology.pin_cpu_cores).
# docs/testing.md, "Servers side by side".
SUITE_ENV = {get_engine("vllm").cpu_bind_env: "nobind", "OMP_NUM_THREADS": "1"}


def machine_env(base: dict | None = None) -> dict:
    """The environment without SUITE_ENV, for scripts that size things by the machine:
    coreutils' `nproc` reads OMP_NUM_THREADS (slurm_up.sh gives the node CPUs=$(nproc))."""
    return {k: v for k, v in (os.environ if base is None else base).items() if k not in SUITE_ENV}


def missing_parts() -> list[str]:
    return [str(p) for p in (VLLM_PYTHON, AIPERF, TARGET, DRAFT_NOISY, ROUTER, NIXL_STAMP) if not p.exists()]


def require_stack() -> None:
    """The real stack is a hard requirement: fail (never skip) with the fix."""
    miss = missing_parts()
    if miss:
        raise RuntimeError(f"the real stack is not installed ({', '.join(miss)} missing): "
                           f"run bash common/setup/install.sh")


def spec_flags(draft: Path = DRAFT_NOISY, k: int = 3, metrics: bool = True) -> list[str]:
    f = BASE_FLAGS + ["--speculative-config", json.dumps({"method": "draft_model", "model": str(draft),
                                                          "num_speculative_tokens": k})]
    if metrics:
        f += ["--per-request-spec-decode-metrics", "detailed"]
    return f


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(flags: list[str], log_path: Path):
    """A real vllm-cpu server through our own lifecycle code; returns a ready ServerProcess."""
    from launcher.node.lifecycle import ServerProcess

    port = free_port()
    argv = [*SERVER_CMD.split(), "--model", str(TARGET), *flags, "--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, **CPU_ENV}
    srv = ServerProcess(argv, probe_host="127.0.0.1", port=port, served_name="tiny", log_path=log_path, env=env,
                        engine=get_engine("vllm"))
    srv.start()
    srv.wait_ready(timeout_s=300)
    return srv


def launcher_cmd(*overrides: str) -> list[str]:
    return [sys.executable, "-m", "launcher", *overrides]
