"""Which CPU cores each server of a job runs on, on the CPU build: disjoint sets where the host
has enough cores, else the decode servers first. Pure; the node binds each server to its set
(its engine's core-binding variable)."""
from __future__ import annotations

from typing import Optional


def cpu_core_sets(cores: list[int], servers: int, tp: int = 1) -> Optional[list[list[list[int]]]]:
    """Disjoint cores for each of ``servers`` CPU servers of ``tp`` ranks: per server, one
    core list per rank (the host's cores split evenly, the remainder left out). None when
    there are fewer cores than ranks: the servers then share (vLLM's own binding)."""
    cores = sorted(cores)
    per_rank = len(cores) // max(1, servers * tp)
    if per_rank < 1:
        return None
    it = iter(cores)
    return [[[next(it) for _ in range(per_rank)] for _ in range(tp)] for _ in range(servers)]


def disagg_core_sets(cores: list[int], roles: list[str], tp: int = 1) -> Optional[list[list[list[int]]]]:
    """Cores for the disaggregated servers of ``roles`` ("prefill"/"decode", in start order):
    disjoint sets where there are enough cores (cpu_core_sets); with fewer cores than servers
    (tp 1), each decode server its own core and the prefill servers sharing the rest, one
    core each in turn (a prefill server works one step per request and then idles; a decode
    server steps all the time). None when not even that fits: vLLM's own binding."""
    disjoint = cpu_core_sets(cores, len(roles), tp)
    if disjoint is not None or tp != 1:
        return disjoint
    cores = sorted(cores)
    n_decode = sum(1 for r in roles if r == "decode")
    if len(cores) <= n_decode:
        return None
    decode_cores, prefill_cores = cores[len(cores) - n_decode:], cores[:len(cores) - n_decode]
    out, d, p = [], iter(decode_cores), 0
    for r in roles:
        if r == "decode":
            out.append([[next(d)]])
        else:
            out.append([[prefill_cores[p % len(prefill_cores)]]])
            p += 1
    return out
