"""Threads that spin while their server is idle: found and reported once the servers are
ready (topology=disagg on the CPU build; recorded in server_ready.json).

NIXL's Python API builds its agent with a progress thread that polls without pause: one per
server, each taking a core while the server does nothing. Three servers on 2 cores left the
servers' own threads little CPU, and transfers and requests waited seconds to minutes
(docs/disagg.md, "The decode stall"). topology.kv_progress_poll_us gives that thread a poll
timeout; this check shows whether any thread still spins, so a job log says it, and a test
fails if the correction stops working.

Found by what the threads do, not by name (a worker's threads all carry its process
title): threads other than a process's main thread that used a good part of a core over a
short sample while every server was idle. The selection (``spinning``) is pure.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

from launcher.runtime.processes import ProcessTag, descendants, thread_seconds

SAMPLE_S = 1.0
SPIN_SHARE = 0.2  # of one core over the sample: an idle server's thread that spins (two share a core)


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
    """The threads of ``pids`` that spun over a sample of ``sample_s``."""
    pids = list(pids)
    before = thread_seconds(pids)
    time.sleep(sample_s)
    return spinning(before, thread_seconds(pids), sample_s, min_share)


def describe(spinners: list[Spinner], label_of: Optional[Mapping[int, str]] = None,
             progress_poll_us: Optional[int] = None) -> str:
    """One line for the job log. Pure."""
    poll = (f" (the KV-transfer progress thread's poll timeout: {progress_poll_us} us, topology.kv_progress_poll_us)"
            if progress_poll_us else " (the KV-transfer progress thread polls without pause: topology.kv_progress_poll_us=0)"
            if progress_poll_us == 0 else "")
    if not spinners:
        return "no thread spins while the servers are idle" + poll
    parts = [f"{(label_of or {}).get(s.pid, f'pid {s.pid}')} thread {s.tid} ({s.share:.0%} of a core)"
             for s in spinners]
    return f"{len(spinners)} thread(s) spin while the servers are idle{poll}: " + ", ".join(parts)
