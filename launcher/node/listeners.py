"""Every listening socket of a job's servers and router, found on the machine (the processes'
own socket tables, not the configuration) and recorded in server_ready.json: where each is
bound and whether it checks the job's API key (docs/disagg.md "Who can reach what").

What is seen: the processes of each server (those carrying its ProcessTag and everything below
them: across the nodes of a test cluster on one machine, its Slurm step's processes too) and the
router's process tree. On separate machines the other nodes' processes are not seen here.
The classification (``classify``) is pure.
"""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass, replace
from typing import Iterable, Optional

from launcher.contracts.server_ready import Listener
from launcher.node.spinners import server_processes
from launcher.runtime.processes import ListeningSocket, descendants, listening_sockets, processes_with

SLURM_CLIENT = "srun"  # a server started as a Slurm step: its srun client's own ports
SLURM_JOB_ENV = "SLURM_JOB_ID"  # in the environment of every process of a Slurm job


@dataclass(frozen=True)
class Owner:
    """A server or the router: its processes, its API port and whether that checks the key,
    its KV side-channel port and its metrics port (where it has them)."""
    name: str
    pids: frozenset
    api_port: Optional[int]
    checks_key: bool
    node: Optional[str] = None
    side_channel_port: Optional[int] = None
    metrics_port: Optional[int] = None
    launcher_node: Optional[str] = None  # where its srun client runs (the job's own node)


def classify(found: Iterable[ListeningSocket], owner: Owner) -> list[Listener]:
    """Each socket of ``owner``'s processes as a Listener: its API port (checks the key when
    the owner does), its metrics port, its KV side channel, its srun client's ports, and the
    rest (the engine's own: its processes' ZMQ/RPC ports, the KV library's listeners) internal.
    Pure."""
    out = []
    for s in found:
        if s.pid not in owner.pids:
            continue
        if s.port == owner.api_port:
            kind, key = "api", owner.checks_key
        elif s.port == owner.metrics_port:
            kind, key = "metrics", False
        elif s.port == owner.side_channel_port:
            kind, key = "kv_side_channel", False
        elif s.process == SLURM_CLIENT:  # the step's srun client, on the job's own node
            out.append(Listener(owner=owner.name, kind="slurm_step", address=s.address, port=s.port, pid=s.pid,
                                process=s.process, node=owner.launcher_node or owner.node, checks_key=False))
            continue
        else:
            kind, key = "internal", False
        out.append(Listener(owner=owner.name, kind=kind, address=s.address, port=s.port, pid=s.pid,
                            process=s.process, node=owner.node, checks_key=key))
    return out


def _pids(server) -> frozenset:
    pids = set(server_processes(server.tag)) if server.tag is not None else set()
    if server.proc is not None:
        pids |= {server.proc.pid} | descendants(server.proc.pid)
    return frozenset(pids)


def owners(members: list, router, api_key: Optional[str]) -> list[Owner]:
    """The job's servers (``members``: topology=disagg's prefill and decode servers; empty: the
    one server is ``router``) and its router."""
    here = socket.gethostname()
    out = [Owner(m.role, _pids(m), m.port, bool(api_key), m.node or here,
                 side_channel_port=m.side_channel_port, launcher_node=here) for m in members]
    if members:
        out.append(Owner("router", _pids(router), router.port, False, here,
                         metrics_port=router.metrics_port))
    else:
        out.append(Owner("server", _pids(router), router.port, bool(api_key), here, launcher_node=here))
    return out


def _job_sruns() -> frozenset:
    """This Slurm job's srun clients (the one that runs this node job, started by the batch
    script: not this process's ancestor, its task runs under slurmstepd): ports of the job that
    no server owns. None outside an allocation."""
    job = os.environ.get(SLURM_JOB_ENV)
    return frozenset(processes_with(SLURM_CLIENT, SLURM_JOB_ENV, job)) if job else frozenset()


def job_listeners(members: list, server, api_key: Optional[str]) -> list[Listener]:
    """Every listening socket of the job's servers, its router and its own srun, now."""
    found, seen = [], set()
    for o in owners(members, server, api_key) + [Owner("job", _job_sruns(), None, False, socket.gethostname(),
                                                       launcher_node=socket.gethostname())]:
        o = replace(o, pids=o.pids - seen)
        seen |= o.pids
        found += classify(listening_sockets(o.pids), o)
    return found


def describe(found: list[Listener]) -> str:
    """One line for the job log: each listener, where, and whether it checks the key."""
    return "listening sockets: " + ("; ".join(
        f"{x.owner} {x.kind} {x.address}:{x.port} ({x.process}, {'checks the key' if x.checks_key else 'no key'})"
        for x in found) or "none found")
