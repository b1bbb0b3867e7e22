"""Threads that spin while their server is idle, put at the lowest CPU priority.

On the CPU build, every disaggregated vLLM server's worker carries NIXL's progress
thread: NIXL 1.5.1's Python API creates its agent with a progress thread that polls
UCX with no delay (``pthrDelay = 0``), and vLLM 0.32 offers no setting for it. It takes
a whole core while the server does nothing (measured: 45,000 epoll_wait calls in 3 s).
Three servers on 2 cores left the API servers so little CPU that a decode server
accepted a request and handed it to its engine 76 s later (docs/disagg.md, "The
decode stall"). A thread like that gets nice 19: it keeps running (NIXL's transfers need
it), but a thread of normal priority on its core comes first (weights 15 against 1024).
SCHED_IDLE was tried and is worse: a progress thread under it never ran while another
server's spinner shared its core, and the transfers it served waited minutes (measured).

Found by what the threads do, not by name (the worker's threads all carry its process
title): once every server is ready and idle, threads other than a process's main thread
that used most of a core over a short sample. Pure selection (``spinning``), plus the
/proc reading and the policy change, which need Linux.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

SERVER_MARK_ENV = "SPECDEC_SERVER_MARK"  # set in each server's environment: <job logs>:<role>
SAMPLE_S = 1.0
SPIN_SHARE = 0.2  # of one core over the sample: an idle server's thread that spins (two share a core)
NICE = 19  # the lowest priority that still runs: a spinner is NIXL's progress thread, needed for transfers


@dataclass(frozen=True)
class Spinner:
    pid: int
    tid: int
    share: float  # of one core over the sample


def spinning(before: Mapping[tuple[int, int], int], after: Mapping[tuple[int, int], int], interval_s: float,
             ticks_per_s: float, min_share: float = SPIN_SHARE) -> list[Spinner]:
    """The (pid, tid) threads whose CPU time grew by at least ``min_share`` of a core over
    ``interval_s`` between two samples of cumulative ticks; a process's main thread
    (tid == pid) is never one (it runs the engine's loop). Pure."""
    out = []
    for (pid, tid), t1 in after.items():
        if tid == pid or (pid, tid) not in before or interval_s <= 0:
            continue
        share = (t1 - before[(pid, tid)]) / ticks_per_s / interval_s
        if share >= min_share:
            out.append(Spinner(pid, tid, round(share, 2)))
    return sorted(out, key=lambda s: (s.pid, s.tid))


def thread_ticks(pids: Iterable[int]) -> dict[tuple[int, int], int]:
    """Cumulative user + system ticks of every thread of ``pids`` (/proc/<pid>/task/<tid>/stat)."""
    out = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", encoding="utf-8", errors="replace") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                out[(pid, int(tid))] = int(fields[11]) + int(fields[12])  # utime, stime
            except (OSError, IndexError, ValueError):
                continue
    return out


def with_descendants(roots: Iterable[int], parent_of: Mapping[int, int]) -> list[int]:
    """``roots`` and every process below them, from a pid -> parent pid map. Pure."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parent_of.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.add(pid)
            todo.extend(children.get(pid, ()))
    return sorted(out)


def _parents() -> dict[int, int]:
    out = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                out[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return out


def processes_with_env(key: str, value: str) -> list[int]:
    """PIDs whose environment holds ``key=value`` (the ones this user may read), with every
    process below them (vLLM's workers start with an environment of their own)."""
    want = f"{key}={value}".encode()
    marked = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if want in f.read().split(b"\0"):
                    marked.append(int(entry))
        except OSError:
            continue
    return with_descendants(marked, _parents()) if marked else []


def idle_spinners(pids: Iterable[int], sample_s: float = SAMPLE_S, min_share: float = SPIN_SHARE) -> list[Spinner]:
    """Sample the threads of ``pids`` over ``sample_s`` and give those that spun nice
    ``NICE``; returns them (a thread that could not be changed is left out)."""
    pids = list(pids)
    before = thread_ticks(pids)
    time.sleep(sample_s)
    found = spinning(before, thread_ticks(pids), sample_s, os.sysconf("SC_CLK_TCK"), min_share)
    done = []
    for s in found:
        try:
            os.setpriority(os.PRIO_PROCESS, s.tid, NICE)  # Linux: a thread id sets that thread
            done.append(s)
        except (OSError, AttributeError):
            continue
    return done


def describe(spinners: list[Spinner], label_of: Optional[Mapping[int, str]] = None) -> str:
    """One line for the job log. Pure."""
    if not spinners:
        return "no thread spins while the servers are idle"
    parts = [f"{(label_of or {}).get(s.pid, f'pid {s.pid}')} thread {s.tid} ({s.share:.0%} of a core)"
             for s in spinners]
    return (f"{len(spinners)} thread(s) spinning while the servers are idle set to nice 19 "
            f"(NIXL's progress thread polls without pause): " + ", ".join(parts))
