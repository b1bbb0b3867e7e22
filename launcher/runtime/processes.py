"""Processes the node side starts: a session of their own, a parent-death
signal, and an end that reaches every descendant (SIGTERM, a grace period,
then SIGKILL). Zombies (exited, not yet reaped) do not count as running.

Processes are started through a tiny exec shim that asks Linux to send the
child SIGTERM when its parent dies (PR_SET_PDEATHSIG), so even a SIGKILLed job
does not leave a server running; on other systems the shim just execs.

Used by the node driver (the server, the benchmark) and by the benchmark (AIPerf).
The process tree is read with psutil.
"""
from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

TAIL_LINES = 50
DEFAULT_STOP_GRACE_S = 10.0

# Executed by `python -c SHIM <parent pid> <argv...>`: set the parent-death
# signal, unblock signals, then exec the real command (PR_SET_PDEATHSIG survives
# execve). A command that cannot be executed exits 127 with a message in the log.
_EXEC_SHIM = r"""
import os, signal, sys
try:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != int(sys.argv[1]):
        os._exit(143)  # the parent is already gone
except Exception:
    pass
try:
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
except Exception:
    pass
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as e:
    sys.stderr.write("cannot execute %r: %s\n" % (sys.argv[2], e))
    sys.stderr.flush()
    os._exit(127)
"""


class Interrupted(Exception):
    """A stop signal (SIGTERM, SIGINT, ...) arrived; ``signum`` says which."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"interrupted by {signal_name(signum)}")


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def describe_returncode(rc: Optional[int]) -> str:
    """`3`, or `-9 (SIGKILL)` for a process ended by a signal."""
    if rc is None:
        return "none (still running)"
    if rc < 0:
        return f"{rc} ({signal_name(-rc)})"
    return str(rc)


# ---------------------------------------------------------------- helpers


def log_tail(path: str | os.PathLike[str], n: int = TAIL_LINES, start_offset: int = 0) -> str:
    """The last ``n`` lines of a log file from ``start_offset`` on ("" if none)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            begin = max(start_offset, size - 256 * 1024)  # the tail is in the last 256 KiB
            f.seek(begin)
            data = f.read()
    except OSError:
        return ""
    lines = data.decode("utf-8", "replace").splitlines()
    if begin > start_offset and lines:
        lines = lines[1:]  # probably a partial line
    return "\n".join(lines[-n:])


def _psutil():
    """psutil: every vLLM install has it, and the launcher depends on it. Imported when a
    tree is walked, so run.sh's --help works with any python3."""
    import psutil  # lazy: a bare python3 lacks it (run.sh --help, see above)

    return psutil


def _running(p) -> bool:
    """Not a zombie (exited, not yet reaped) and not gone."""
    psutil = _psutil()
    try:
        return p.status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.Error:
        return False


def live_processes(pgid: int, extra: Iterable[int] = ()) -> set[int]:
    """Running (non-zombie) members of process group ``pgid`` plus the still
    running pids among ``extra``."""
    psutil = _psutil()
    wanted = set(extra)
    out = set()
    for p in psutil.process_iter():
        try:
            if _running(p) and (p.pid in wanted or os.getpgid(p.pid) == pgid):
                out.add(p.pid)
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    return out


def descendants(root: int) -> set[int]:
    """Pids of all running (non-zombie) descendants of ``root``."""
    psutil = _psutil()
    try:
        kids = psutil.Process(root).children(recursive=True)
    except psutil.Error:
        return set()
    return {k.pid for k in kids if _running(k)}


def processes_with(name: str, env_name: str, env_value: str) -> set[int]:
    """Running processes called ``name`` whose environment has ``env_name=env_value``."""
    psutil = _psutil()
    out = set()
    for p in psutil.process_iter():
        try:
            if p.name() == name and p.environ().get(env_name) == env_value and _running(p):
                out.add(p.pid)
        except (psutil.Error, OSError):
            continue
    return out


def thread_seconds(pids: Iterable[int]) -> dict[tuple[int, int], float]:
    """(pid, thread id) -> CPU seconds (user + system) so far, for every thread of ``pids``."""
    psutil = _psutil()
    out = {}
    for pid in pids:
        try:
            for t in psutil.Process(pid).threads():
                out[(pid, t.id)] = t.user_time + t.system_time
        except psutil.Error:
            continue
    return out


PROCESS_TAG_ENV = "SPECDEC_PROCESS_TAG"


class ProcessTag:
    """A mark in the environment of a process and everything it starts. A process whose
    parent was SIGKILLed is re-parented and is no longer anyone's descendant (the
    benchmark's AIPerf, in a session of its own), but it still carries the tag, so the
    job finds and ends it: start the process with ``env=tag.apply(env)`` and pass the tag
    to ``terminate_trees``. The caller itself never carries it."""

    def __init__(self) -> None:
        self.value = f"{os.getpid()}-{uuid.uuid4().hex}"

    def apply(self, env: Optional[dict]) -> dict:
        return {**(os.environ if env is None else env), PROCESS_TAG_ENV: self.value}

    def running(self) -> set[int]:
        """Running (non-zombie) processes that carry the tag, the caller excluded."""
        psutil = _psutil()
        out = set()
        for p in psutil.process_iter():
            try:
                if p.pid != os.getpid() and p.environ().get(PROCESS_TAG_ENV) == self.value and _running(p):
                    out.add(p.pid)
            except (psutil.Error, OSError):
                continue
        return out


def _signal_tree(pgid: int, pids: Iterable[int], sig: int) -> None:
    groups = {pgid}
    for pid in pids:
        try:
            groups.add(os.getpgid(pid))  # a seen descendant may lead a group of its own
        except (ProcessLookupError, PermissionError):
            pass
    groups.discard(os.getpgrp())  # never the caller's own group
    for g in groups:
        try:
            os.killpg(g, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def terminate_trees(procs: list[subprocess.Popen], grace_s: float = DEFAULT_STOP_GRACE_S,
                    log: Callable[[str], None] = lambda m: None, what: str = "process",
                    tag: Optional[ProcessTag] = None) -> set[int]:
    """End the process trees of ``procs`` (each started as a session leader, so
    its pid is its process-group id), with the running processes that carry ``tag``
    and their groups: SIGTERM to all at once, wait up to ``grace_s``, then SIGKILL
    what is left. Returns the pids still running at the end (empty when all is gone)."""
    procs = [p for p in procs if p is not None]
    if not procs:
        return set()
    known: dict[int, set[int]] = {p.pid: descendants(p.pid) for p in procs}
    if tag is not None:
        known[procs[0].pid] |= tag.running()

    def alive() -> set[int]:
        for p in procs:
            p.poll()  # reap the direct child
            if p.returncode is None:
                known[p.pid] |= descendants(p.pid)
        if tag is not None:
            known[procs[0].pid] |= tag.running()
        left: set[int] = set()
        for pgid, extra in known.items():
            left |= live_processes(pgid, extra)
        return left

    left = alive()
    if not left:
        return set()
    for pgid, extra in known.items():
        _signal_tree(pgid, extra, signal.SIGTERM)
        _signal_tree(pgid, extra, signal.SIGCONT)  # a stopped process (SIGSTOP) acts on SIGTERM only once continued
    deadline = time.monotonic() + grace_s
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = alive()
    if left:
        log(f"{what}: {len(left)} process(es) still running {grace_s:g} s after SIGTERM; sending SIGKILL")
        for pgid, extra in known.items():
            _signal_tree(pgid, extra | left, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = alive()
    for p in procs:
        try:
            p.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
    return left


def with_parent_death_signal(argv: list[str]) -> list[str]:
    """``argv`` run through the exec shim: it gets SIGTERM when this process dies (Linux)."""
    return [sys.executable, "-c", _EXEC_SHIM, str(os.getpid()), *argv]


def spawn(argv: list[str], *, stdout=None, env: Optional[dict] = None, cwd: Optional[str] = None,
          pdeathsig: bool = True) -> subprocess.Popen:
    """Start ``argv`` in a new session (its own process group), stdin closed.
    With ``pdeathsig`` it gets SIGTERM if this process dies (Linux)."""
    full = with_parent_death_signal(argv) if pdeathsig else list(argv)
    return subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=stdout,
                            stderr=subprocess.STDOUT if stdout is not None else None,
                            env=env, cwd=cwd, start_new_session=True)


# ---------------------------------------------------------------- listening sockets


@dataclass(frozen=True)
class ListeningSocket:
    """A TCP socket in the LISTEN state held by process ``pid`` (``process``: its name)."""
    pid: int
    process: str
    address: str  # the bound address: 0.0.0.0 / :: (every address), 127.0.0.1, a node's address
    port: int


def _proc_address(hex_addr: str) -> str:
    """An address as /proc/net/tcp{,6} writes it (host-order 32-bit words in hex)."""
    raw = bytes.fromhex(hex_addr)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def parse_listening(text: str) -> dict[int, tuple[str, int]]:
    """socket inode -> (address, port) of the LISTEN sockets in a /proc/<pid>/net/tcp or tcp6
    table. Pure."""
    out = {}
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 10 or f[3] != "0A":  # 0A: TCP_LISTEN
            continue
        addr, port = f[1].rsplit(":", 1)
        out[int(f[9])] = (_proc_address(addr), int(port, 16))
    return out


def listening_sockets(pids: Iterable[int]) -> list[ListeningSocket]:
    """The listening TCP sockets the processes ``pids`` hold, each read in the process's own
    network namespace (/proc/<pid>/net/tcp{,6}: a process of another node of a test cluster
    on this machine is seen at its node's addresses). Processes gone or unreadable are skipped."""
    tables: dict[str, dict[int, tuple[str, int]]] = {}  # per network namespace
    out = set()
    for pid in sorted(set(pids)):
        try:
            ns = os.readlink(f"/proc/{pid}/ns/net")
            if ns not in tables:
                tables[ns] = {}
                for name in ("tcp", "tcp6"):
                    try:
                        with open(f"/proc/{pid}/net/{name}") as f:
                            tables[ns].update(parse_listening(f.read()))
                    except OSError:
                        pass
            inodes = set()
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:["):
                    inodes.add(int(link[8:-1]))
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        for inode in inodes & tables[ns].keys():
            addr, port = tables[ns][inode]
            out.add(ListeningSocket(pid, comm, addr, port))
    return sorted(out, key=lambda s: (s.port, s.address, s.pid))
