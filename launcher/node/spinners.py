"""Threads that spin while their server is idle, put at the lowest CPU priority (an
experiment, topology.idle_spinning_threads, off by default).

On the CPU build, each disaggregated server's KV-transfer library runs a progress thread
that polls without pause and takes a whole core while the server does nothing; three
servers on 2 cores left the servers' own threads little CPU (measured, with the causes
named: docs/disagg.md, "The decode stall"). A thread like that gets nice 19: it keeps
running (the transfers need it), but a thread of normal priority on its core comes first
(weights 15 against 1024). SCHED_IDLE was tried and is worse: a progress thread under it
never ran while another server's spinner shared its core, and the transfers it served
waited minutes (measured).

Found by what the threads do, not by name (a worker's threads all carry its process
title): once every server is ready and idle, threads other than a process's main thread
that used a good part of a core over a short sample. The selection (``spinning``) is pure.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

from launcher.runtime.processes import ProcessTag, descendants, thread_seconds

SAMPLE_S = 1.0
SPIN_SHARE = 0.2  # of one core over the sample: an idle server's thread that spins (two share a core)
NICE = 19  # the lowest priority that still runs: the spinner serves the KV transfers


@dataclass(frozen=True)
class Spinner:
    pid: int
    tid: int
    share: float  # of one core over the sample


def spinning(before: Mapping[tuple[int, int], float], after: Mapping[tuple[int, int], float], interval_s: float,
             min_share: float = SPIN_SHARE) -> list[Spinner]:
    """The (pid, tid) threads whose CPU seconds grew by at least ``min_share`` of a core
    over ``interval_s`` between two samples; a process's main thread (tid == pid) is never
    one (it runs the engine's loop). Pure."""
    out = []
    for (pid, tid), t1 in after.items():
        if tid == pid or (pid, tid) not in before or interval_s <= 0:
            continue
        share = (t1 - before[(pid, tid)]) / interval_s
        if share >= min_share:
            out.append(Spinner(pid, tid, round(share, 2)))
    return sorted(out, key=lambda s: (s.pid, s.tid))


def server_processes(tag: ProcessTag) -> list[int]:
    """A server's processes on this machine: those carrying its tag, and every process below
    them (an engine's workers may start with an environment of their own)."""
    tagged = tag.running()
    return sorted(tagged.union(*(descendants(p) for p in tagged)))


def idle_spinners(pids: Iterable[int], sample_s: float = SAMPLE_S, min_share: float = SPIN_SHARE) -> list[Spinner]:
    """Sample the threads of ``pids`` over ``sample_s`` and give those that spun nice
    ``NICE``; returns them (a thread that could not be changed is left out)."""
    pids = list(pids)
    before = thread_seconds(pids)
    time.sleep(sample_s)
    done = []
    for s in spinning(before, thread_seconds(pids), sample_s, min_share):
        try:
            os.setpriority(os.PRIO_PROCESS, s.tid, NICE)  # Linux: a thread id sets that thread
            done.append(s)
        except OSError:
            continue
    return done


def describe(spinners: list[Spinner], label_of: Optional[Mapping[int, str]] = None) -> str:
    """One line for the job log. Pure."""
    if not spinners:
        return "no thread spins while the servers are idle"
    parts = [f"{(label_of or {}).get(s.pid, f'pid {s.pid}')} thread {s.tid} ({s.share:.0%} of a core)"
             for s in spinners]
    return (f"{len(spinners)} thread(s) spinning while the servers are idle set to nice {NICE} "
            f"(topology.idle_spinning_threads): " + ", ".join(parts))
