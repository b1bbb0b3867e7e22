"""Helpers for the node tests: run common/specdec_aiperf/run.sh as a job and
look for processes it may have left behind (Linux /proc; no psutil needed)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RUN_SH = REPO / "common" / "specdec_aiperf" / "run.sh"
PYTHON = sys.executable
FAKE_SERVER = HERE / "fake_server.py"
FAKE_SERVER_CMD = f"{PYTHON} {FAKE_SERVER}"
FAKE_MODEL = HERE / "data" / "fake-model"  # a stub folder: the input checks want config.json

from tests.support.stack import DRAFT_NOISY as DRAFT, SERVER_CMD as VLLM_CMD, TARGET, VLLM_PYTHON as VLLM_PY  # noqa: E402,F401

REAL_STACK = VLLM_PY.exists() and TARGET.is_dir() and DRAFT.is_dir()
REAL_FLAGS = ["--served-model-name", "tiny", "--enforce-eager", "--dtype", "bfloat16",
              "--max-model-len", "1024", "--speculative-config",
              json.dumps({"method": "draft_model", "model": str(DRAFT), "num_speculative_tokens": 3})]


def job_env(job_dir: Path, **overrides: str) -> dict:
    """A clean environment for run.sh: no SPECDEC_* from outside, the test
    client (mini_client) importable, CPU-server settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECDEC_")}
    env.update({
        "HF_MODEL_CKPT": str(FAKE_MODEL),
        "SPECDEC_SERVER_CMD": FAKE_SERVER_CMD,
        "SPECDEC_JOB_DIR": str(job_dir),
        "SPECDEC_PYTHON": PYTHON,
        "SPECDEC_BENCH_MODULE": "mini_client",
        "SPECDEC_READY_TIMEOUT": "120",
        # this checkout's launcher first: an editable install elsewhere (another worktree's) must not answer
        "PYTHONPATH": f"{REPO}{os.pathsep}{HERE}",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
    })
    env.update({k: str(v) for k, v in overrides.items()})
    return env


def start_job(job_dir: Path, server_args: list[str], bench_args: list[str], **env) -> subprocess.Popen:
    """run.sh in the background (stderr to <job_dir>/run_sh.stderr, stdout to run_sh.stdout)."""
    job_dir.mkdir(parents=True, exist_ok=True)
    out = open(job_dir / "run_sh.stdout", "wb")
    err = open(job_dir / "run_sh.stderr", "wb")
    try:
        return subprocess.Popen(["bash", str(RUN_SH), *server_args, "--", *bench_args],
                                env=job_env(job_dir, **env), stdout=out, stderr=err, cwd=str(job_dir))
    finally:
        out.close()
        err.close()


def run_job(job_dir: Path, server_args: list[str], bench_args: list[str], timeout: float = 120, **env):
    """run.sh to completion: (exit code, seconds it took)."""
    t0 = time.monotonic()
    p = start_job(job_dir, server_args, bench_args, **env)
    try:
        rc = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        p.wait(30)
        raise
    return rc, time.monotonic() - t0


def wait_for(pred, timeout: float, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def read(p: Path) -> str:
    return p.read_text(errors="replace") if p.exists() else ""


def error_line(job_dir: Path) -> str:
    t = read(job_dir / "logs" / "error.txt").strip()
    return t.splitlines()[0] if t else ""


def server_pid_from_log(job_dir: Path) -> int | None:
    m = re.search(r"server started \(pid (\d+)\)", read(job_dir / "logs" / "job.log"))
    return int(m.group(1)) if m else None


def _stat(pid: int):
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    except OSError:
        return None
    rest = raw[raw.rfind(")") + 2:].split()
    return rest[0], int(rest[1]), int(rest[2]), int(rest[3])  # state, ppid, pgid, sid


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def live_pids() -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(int(d))
            if st and st[0] not in ("Z", "X"):
                out.append(int(d))
    return out


def leftovers(server_pid: int | None = None, port: int | None = None, extra_pids=(), needles=()) -> list[str]:
    """Running processes that belong to a job's server: in its session/process
    group, an api_server (or fake server) on its port, one of ``extra_pids``
    (e.g. the EngineCore/Worker pids in vLLM's log) or a cmdline holding one of
    ``needles``."""
    found = []
    me = os.getpid()
    for pid in live_pids():
        if pid == me:
            continue
        st = _stat(pid)
        cl = cmdline(pid)
        hit = False
        if server_pid is not None and st and (st[2] == server_pid or st[3] == server_pid):
            hit = True
        if port is not None and ("api_server" in cl or "fake_server" in cl) and f"--port {port}" in cl:
            hit = True
        if pid in extra_pids and ("python" in cl or "vllm" in cl.lower()):
            hit = True
        if any(n in cl for n in needles):
            hit = True
        if hit:
            found.append(f"{pid}: {cl[:200]}")
    return found


def vllm_child_pids(job_dir: Path) -> set[int]:
    """EngineCore/Worker/APIServer pids as vLLM's log prints them: `(EngineCore pid=123)`."""
    return {int(p) for p in re.findall(r"^\(\w+ pid=(\d+)\)", read(job_dir / "logs" / "server.log"), re.M)}
