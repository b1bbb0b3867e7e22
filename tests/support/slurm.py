"""Bring up the project's real single-node Slurm cluster for tests.

``ensure_slurm_cluster()`` runs ``common/setup/slurm_up.sh`` (idempotent: a
~30 ms no-op when the cluster is already up, ~1 s cold once the packages are
installed) and returns a :class:`SlurmCluster` describing it.  The result is
cached per process, so any number of fixtures may call it.

The cluster: node ``localhost`` in the default partition ``debug``, CPUs = the
machine's cores, ``Gres=gpu:4`` backed by stand-in character devices (GPU
requests are scheduled for real; jobs see ``CUDA_VISIBLE_DEVICES``), config in
``/etc/slurm`` so plain ``sbatch``/``srun``/``sinfo`` and submitit work.
With ``SPECDEC_SLURM_ACCOUNTING=1`` in the environment it also runs slurmdbd
(+ MariaDB), so ``sacct`` works and submitit reports real job states.
"""

from __future__ import annotations

import os
import re
import subprocess
import fcntl
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support import stack

REPO_ROOT = Path(__file__).resolve().parents[2]
SLURM_UP = REPO_ROOT / "common" / "setup" / "slurm_up.sh"
SLURM_DOWN = REPO_ROOT / "common" / "setup" / "slurm_down.sh"


class SlurmUnavailable(RuntimeError):
    """slurm_up.sh failed; the message carries its output (incl. daemon log tails)."""


@dataclass(frozen=True)
class SlurmCluster:
    status_line: str  # the one line slurm_up.sh printed
    partition: str  # default partition ("debug")
    node: str  # the node's name ("localhost")
    cpus: int
    gpus_per_node: int  # stand-in GPUs (Gres=gpu:N)
    accounting: bool  # True when slurmdbd runs (sacct works)
    state_dir: Path  # logs in state_dir / "log"


_thread_lock = threading.Lock()
_cluster: SlurmCluster | None = None


@contextmanager
def _lock():
    """One bring-up or take-down at a time: across threads, and across the suite's xdist
    workers (processes: a lock file beside the clusters' state)."""
    home = Path(os.environ.get("SPECDEC_HOME", Path.home() / ".cache" / "specdec-launcher"))
    home.mkdir(parents=True, exist_ok=True)
    with _thread_lock, open(home / "slurm-setup.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _field(line: str, key: str, default: str = "") -> str:
    m = re.search(rf"(?:^|\s){re.escape(key)}=(\S+)", line)
    return m.group(1) if m else default


def parse_status_line(line: str) -> SlurmCluster:
    gres = _field(line, "gres", "gpu:0")
    return SlurmCluster(
        status_line=line,
        partition=_field(line, "partition", "debug"),
        node=_field(line, "node", "localhost"),
        cpus=int(_field(line, "cpus", "0") or 0),
        gpus_per_node=int(gres.split(":")[-1] or 0),
        accounting=_field(line, "accounting", "off") == "on",
        state_dir=Path(_field(line, "state_dir", "")),
    )


def ensure_slurm_cluster(timeout_s: float = 900) -> SlurmCluster:
    """Make sure the local Slurm cluster is up (starting it if needed) and describe it.

    Raises :class:`SlurmUnavailable` with slurm_up.sh's output if it cannot be
    brought up.  The first call on a machine without Slurm installs packages
    with apt (a minute or so), hence the generous default timeout.
    """
    global _cluster
    with _lock():
        if _cluster is not None:
            return _cluster
        try:
            proc = subprocess.run(
                ["bash", str(SLURM_UP)],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                env=stack.machine_env(),
            )
        except subprocess.TimeoutExpired as e:
            raise SlurmUnavailable(f"{SLURM_UP} timed out after {timeout_s}s:\n{e.stderr or ''}") from e
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("slurm:")]
        if proc.returncode != 0 or not lines:
            raise SlurmUnavailable(
                f"{SLURM_UP} failed (rc={proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        _cluster = parse_status_line(lines[-1])
        return _cluster


# ------------------------------------------------------- multi-node cluster
@dataclass(frozen=True)
class MultiNodeCluster:
    """The separate multi-node test cluster (SPECDEC_SLURM_NODES=N common/setup/slurm_up.sh):
    node i is network namespace and hostname specdec-n<i> at its own bridge address."""
    status_line: str
    slurm_conf: str  # select it with SLURM_CONF=<this>
    nodes: dict  # hostname -> address
    state_dir: Path

    def env(self, base: dict | None = None) -> dict:
        """An environment whose sbatch/srun/sinfo/submitit talk to this cluster."""
        return {**(os.environ if base is None else base), "SLURM_CONF": self.slurm_conf}


_multi: dict[int, MultiNodeCluster] = {}


def parse_multinode_status(line: str) -> MultiNodeCluster:
    addrs = dict(kv.split("=", 1) for kv in _field(line, "addrs").split(",") if "=" in kv)
    return MultiNodeCluster(status_line=line, slurm_conf=_field(line, "SLURM_CONF"), nodes=addrs,
                            state_dir=Path(_field(line, "state_dir")))


def ensure_multinode_cluster(nodes: int = 2, timeout_s: float = 900) -> MultiNodeCluster:
    """Bring up (or find up) the multi-node cluster with ``nodes`` nodes and describe it."""
    with _lock():
        if nodes in _multi:
            return _multi[nodes]
        env = {**stack.machine_env(), "SPECDEC_SLURM_NODES": str(nodes)}
        env.pop("SLURM_CONF", None)
        try:
            proc = subprocess.run(["bash", str(SLURM_UP)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=timeout_s, env=env)
        except subprocess.TimeoutExpired as e:
            raise SlurmUnavailable(f"{SLURM_UP} (SPECDEC_SLURM_NODES={nodes}) timed out:\n{e.stderr or ''}") from e
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("slurm:") and "multi-node" in ln]
        if proc.returncode != 0 or not lines:
            raise SlurmUnavailable(f"SPECDEC_SLURM_NODES={nodes} {SLURM_UP} failed (rc={proc.returncode}):\n"
                                   f"{proc.stdout}\n{proc.stderr}")
        _multi[nodes] = parse_multinode_status(lines[-1])
        return _multi[nodes]


def take_down_multinode_cluster(nodes: int = 2, timeout_s: float = 120) -> None:
    """Remove what ``ensure_multinode_cluster`` set up: the nodes' daemons, network
    namespaces, veths, bridge and /etc/hosts lines (slurm_down.sh; the state directory
    stays, so the next bring-up is quick). Raises :class:`SlurmUnavailable` if it fails."""
    with _lock():
        env = {**stack.machine_env(), "SPECDEC_SLURM_NODES": str(nodes)}
        env.pop("SLURM_CONF", None)
        proc = subprocess.run(["bash", str(SLURM_DOWN)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout_s, env=env)
        _multi.pop(nodes, None)
        if proc.returncode != 0:
            raise SlurmUnavailable(f"SPECDEC_SLURM_NODES={nodes} {SLURM_DOWN} failed (rc={proc.returncode}):\n"
                                   f"{proc.stdout}\n{proc.stderr}")


def processes_in_nodes(cluster: MultiNodeCluster, *needles: str) -> list[tuple[str, int, str]]:
    """(node, pid, cmdline) of live processes in the cluster's node namespaces (by
    /proc/<pid>/ns/net) other than their slurmd, whose command line holds every needle."""
    inodes = {}
    for node in cluster.nodes:
        try:
            inodes[f"net:[{os.stat(f'/run/netns/{node}').st_ino}]"] = node
        except OSError:
            continue
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ns = os.readlink(f"/proc/{pid}/ns/net")
            if ns not in inodes:
                continue
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if stat.rsplit(")", 1)[-1].split()[0] == "Z" or cmd.startswith("slurmd "):
            continue
        if all(n in cmd for n in needles):
            out.append((inodes[ns], int(pid), cmd))
    return out
