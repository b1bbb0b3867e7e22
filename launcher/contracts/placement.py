"""topology=disagg's placement (docs/disagg.md, "Across nodes"): which of the job's nodes
each prefill and decode server runs on. Pure functions: the plan writes the result into
job.json (TopologySpec.server_nodes), validation says why a placement does not fit, and
the node job starts each server as a Slurm step on its node.

- ``one_node``: every server on the job's first (head) node, as processes of the job or as
  Slurm steps there.
- ``split``: the prefill servers on the first ``prefill_nodes`` nodes, the decode servers on
  the rest; a role's servers go round-robin over its nodes. The router runs on the head
  node (node 0, a prefill node).
- ``auto``: ``one_node`` with one node, ``split`` with several.
"""
from __future__ import annotations

from typing import Optional

PLACEMENTS = ("auto", "one_node", "split")


def resolve(placement: str, nodes: int) -> str:
    """The placement ``auto`` stands for on ``nodes`` nodes."""
    if placement == "auto":
        return "split" if nodes > 1 else "one_node"
    return placement


def default_prefill_nodes(prefill: int, decode: int, nodes: int) -> int:
    """split without topology.prefill_nodes: the nodes shared in proportion to the servers,
    at least one node per role and no more nodes than a role has servers."""
    share = round(nodes * prefill / max(1, prefill + decode))
    share = max(1, min(nodes - 1, share))
    return max(nodes - decode, min(prefill, share))


def server_nodes(prefill: int, decode: int, nodes: int, placement: str = "auto",
                 prefill_nodes: Optional[int] = None) -> list[int]:
    """The node index (0: the head) of every server, in TopologySpec.roles() order
    (prefill servers first). Assumes ``problems`` found none."""
    if resolve(placement, nodes) == "one_node":
        return [0] * (prefill + decode)
    pn = prefill_nodes if prefill_nodes is not None else default_prefill_nodes(prefill, decode, nodes)
    dn = nodes - pn
    return [i % pn for i in range(prefill)] + [pn + i % dn for i in range(decode)]


def problems(prefill: int, decode: int, nodes: int, placement: str, prefill_nodes: Optional[int],
             gpus_per_node: int, tp: int) -> list[tuple[str, str, str]]:
    """(field, what is wrong, the fix) for a placement that does not fit the cluster."""
    if placement not in PLACEMENTS:
        return [("topology.placement", f"is '{placement}'", f"use one of {', '.join(PLACEMENTS)}")]
    mode = resolve(placement, nodes)
    if mode == "one_node" and nodes > 1:
        return [("topology.placement", f"is one_node but cluster.nodes={nodes}",
                 "use topology.placement=split (or auto), or cluster.nodes=1")]
    if mode == "split":
        if nodes < 2:
            return [("topology.placement", f"is split on {nodes} node",
                     "use cluster.nodes=2 or more (prefill and decode each need a node), or placement=one_node")]
        if prefill_nodes is not None and not 1 <= prefill_nodes <= nodes - 1:
            return [("topology.prefill_nodes", f"is {prefill_nodes} of cluster.nodes={nodes}",
                     f"use 1 to {nodes - 1}: the decode servers need the other nodes")]
        pn = prefill_nodes if prefill_nodes is not None else default_prefill_nodes(prefill, decode, nodes)
        for role, count, role_nodes in (("prefill", prefill, pn), ("decode", decode, nodes - pn)):
            if count < role_nodes:
                return [("cluster.nodes", f"is {nodes}: {role_nodes} node(s) for {count} {role} server(s) "
                         "leaves a node without a server",
                         f"use topology.{role}={role_nodes} or more, fewer nodes, or set topology.prefill_nodes")]
    elif prefill_nodes is not None:
        return [("topology.prefill_nodes", "is set but the placement is one_node",
                 "drop it, or use topology.placement=split on several nodes")]
    if gpus_per_node:
        place = server_nodes(prefill, decode, nodes, mode, prefill_nodes)
        per_node = {n: place.count(n) for n in set(place)}
        node, count = max(per_node.items(), key=lambda kv: (kv[1], -kv[0]))
        if count * tp > gpus_per_node:
            return [("topology", f"node {node} runs {count} server(s) of tp {tp}: {count * tp} GPUs; "
                     f"a node has {gpus_per_node}", "fewer servers, a smaller tp, or more nodes")]
    return []


def describe(roles: list[tuple[str, int]], nodes: list[int], names: Optional[list[str]] = None) -> str:
    """One line for the job log: which server runs on which node."""
    out = []
    for (role, i), n in zip(roles, nodes or [0] * len(roles)):
        out.append(f"{role}{i} on " + (names[n] if names and n < len(names) else f"node {n}"))
    return ", ".join(out)
