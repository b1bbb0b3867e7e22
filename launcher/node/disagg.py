"""topology=disagg on the node (docs/disagg.md): the prefill and decode servers with the
router in front of them, started into the job's server group (launcher.node.servers), the
KV path's first transfer, and what server_ready.json says of them. The node job calls them
in its sweep; the phases (launcher.node.phases) for the servers without speculation and
the parity run against the aggregated server.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Optional

from launcher.bench.metrics import parse_prometheus_text
from launcher.contracts.job import TopologySpec, disagg_core_sets
from launcher.contracts.server_steps import disagg_env, router_argv, server_step
from launcher.node.lifecycle import ServerProcess, ServerStartError
from launcher.node import slurm_steps, spinners
from launcher.node.net import client_host, subprocess_line
from launcher.node.node_facts import NodeFacts, free_ports, probe_nodes
from launcher.node.servers import ServerGroup
from launcher.runtime.processes import ProcessTag


WARM_UP_POLICY = "round_robin"


@dataclass(frozen=True)
class PlacedServer:
    """One disaggregated server where it runs: its node (None: a process of the job on this
    host), the address the head and the other servers reach it at, its API and NIXL
    side-channel ports, and its cores (CPU build, one list per rank; None: vLLM's own)."""
    role: str
    index: int
    node: Optional[str]
    address: str
    port: int
    side_channel_port: int
    cores: Optional[list] = None


def place_servers(t: TopologySpec, tp: int, pin: bool, *, nodes: Optional[list[str]] = None,
                  facts: Optional[dict[str, NodeFacts]] = None, local_host: str = "127.0.0.1",
                  local_cores: Optional[list[int]] = None, pick_port=None) -> list[PlacedServer]:
    """Every server's node, address, ports and cores (pure given its inputs). As Slurm
    steps (``nodes``: the allocation's hostnames, head first; ``facts``: what each node
    said of itself): the server on node ``t.server_nodes[n]``, at that node's address, on
    ports picked there; the servers of nodes on one machine (one boot id) share its cores
    out between them. As processes of the job: every server on this host."""
    roles = t.roles()
    if nodes is None:
        cores = disagg_core_sets(local_cores or [], [r for r, _ in roles], tp) if pin else None
        return [PlacedServer(r, i, None, local_host, pick_port(), pick_port(), cores[n] if cores else None)
                for n, (r, i) in enumerate(roles)]
    facts = facts or {}
    names = [nodes[t.node_of(n)] for n in range(len(roles))]
    ports = {h: list(facts[h].ports) for h in set(names)}
    machine = {h: facts[h].boot_id or h for h in set(names)}
    cores_of: dict[int, list] = {}
    if pin:
        for m in set(machine.values()):
            on_m = [n for n, h in enumerate(names) if machine[h] == m]
            sets = disagg_core_sets(facts[names[on_m[0]]].cpus, [roles[n][0] for n in on_m], tp)
            if sets:
                cores_of.update(zip(on_m, sets))
    out = []
    for n, ((r, i), h) in enumerate(zip(roles, names)):
        p, side = ports[h].pop(0), ports[h].pop(0)
        out.append(PlacedServer(r, i, h, facts[h].address, p, side, cores_of.get(n)))
    return out


def _placement(servers: ServerGroup) -> list[PlacedServer]:
    """Where this job's servers run: Slurm steps on their nodes (launch.server=srun, the
    nodes asked once for their addresses, ports and CPUs), or processes here."""
    ctx = servers.ctx
    sp, t, eng = ctx.spec, ctx.spec.topology, ctx.engine
    pin = t.kv_buffer_device == "cpu" and t.pin_cpu_cores and eng.cpu_bind_env not in sp.env
    taken: set[int] = set()

    def port() -> int:
        while True:
            p = free_ports(client_host(sp.bind_host) if sp.bind_host.strip() in ("", "*") else sp.bind_host, 1)[0]
            if p not in taken:
                taken.add(p)
                return p

    if sp.launch.server != "srun":
        if any(t.server_nodes):
            raise ServerStartError("topology=disagg across nodes needs Slurm steps (launch.server=srun)")
        return place_servers(t, sp.launch.tp, pin, local_host=client_host(sp.bind_host),
                             local_cores=sorted(os.sched_getaffinity(0)), pick_port=port)
    if not slurm_steps.in_allocation():
        raise ServerStartError("the spec's launch.server is srun but this is not a Slurm allocation "
                               "(SLURM_JOB_ID is unset); run it under sbatch/salloc or set launch.server=process")
    alloc = slurm_steps.allocation_nodes()
    need = max(t.node_of(n) for n in range(len(t.roles()))) + 1
    if len(alloc) < need:
        raise ServerStartError(f"the placement needs {need} nodes but the allocation has {alloc}")
    used = alloc[:need]
    per_node = max(t.server_nodes.count(i) if t.server_nodes else len(t.roles()) for i in range(need))
    try:
        facts = probe_nodes(ctx.python, used, 2 * per_node)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        raise ServerStartError(f"asking the nodes for their addresses failed: {e}") from None
    ctx.log("nodes: " + ", ".join(f"{h} {facts[h].address} (cpus {facts[h].cpus})" for h in used))
    return place_servers(t, sp.launch.tp, pin, nodes=alloc, facts=facts)


def serve(servers: ServerGroup, speculative_config: object = "spec", phase: str = "") -> ServerProcess:
    """topology=disagg: the prefill and decode servers, each its own process with its own
    port, NIXL side-channel port, log (logs/<role><i>.log) and readiness, then the router
    in front of them (logs/router.log). Returns the router: what the benchmark talks to.
    The servers start together (each one's wait covers the others' deaths).
    ``speculative_config=None``: the same servers without speculation (the matched baseline,
    sweep.baseline=true); ``phase`` prefixes their log names (``baseline-prefill0.log``)."""
    ctx = servers.ctx
    sp, t, eng = ctx.spec, ctx.spec.topology, ctx.engine
    host = sp.bind_host
    taken: set[int] = set()

    def port() -> int:  # the router's, on this node, where it listens
        while True:
            p = free_ports(client_host(t.router_host), 1)[0]
            if p not in taken:
                taken.add(p)
                return p

    servers.members = []
    placed = _placement(servers)
    if t.kv_buffer_device == "cpu" and t.pin_cpu_cores and eng.cpu_bind_env not in sp.env:
        ctx.log("CPU cores per server: " + (", ".join(f"{s.role}{s.index} {s.cores}" for s in placed)
                                            if any(s.cores for s in placed) else
                                            "shared (fewer cores than server ranks)"))
    if any(s.node for s in placed):
        ctx.log("placement (" + t.placement + "): " + ", ".join(
            f"{s.role}{s.index} on {s.node} ({s.address})" for s in placed) + "; the router on this node")
    for s in placed:
        role, i = s.role, s.index
        argv = server_step(sp, eng, host, s.port, node=s.node, disagg_role=role, speculative_config=speculative_config)
        env, key = servers.server_launch(disagg_env(sp, eng, s.side_channel_port, s.cores,
                                                    side_channel_host=s.address if s.node else None))
        tag = ProcessTag()  # finds the server's processes on this machine (idle_spinners)
        env = tag.apply(env)
        m = ServerProcess(argv + key.argv, probe_host=s.address, port=s.port, served_name=sp.served_name,
                          log_path=ctx.paths.server_log_named(f"{phase + '-' if phase else ''}{role}{i}"), log=ctx.log,
                          env=env, api_key=ctx.api_key, engine=eng, key=key)
        m.role, m.side_channel_port, m.tag = f"{role}{i}", s.side_channel_port, tag
        m.label = f"{phase + ' ' if phase else ''}{role}{i} server"
        m.cpu_cores = s.cores
        m.node, m.address = s.node, s.address
        where = f"{s.node} ({s.address}:{s.port})" if s.node else f"{host}:{s.port}"
        ctx.log(f"starting the {role} server {i} on {where} (NIXL side channel {s.side_channel_port}): "
                f"{subprocess_line(argv)}")
        m.start()
        servers.members.append(m)
    for m in servers.members:
        m.wait_ready(sp.ready_timeout_s, check=servers.check)
    servers.idle_spinners = _idle_spinners(servers) if t.kv_buffer_device == "cpu" else []
    urls = {r: [m.url for m in servers.members if m.role.startswith(r)] for r in ("prefill", "decode")}
    name = f"{phase + '-' if phase else ''}router"
    if t.router_policy != WARM_UP_POLICY and len(servers.members) > 2:
        # a prefix-aware policy keeps distinct warm-up requests on one prefill server (measured:
        # cache_aware sent 12 of 12 to prefill0): a round-robin router warms every pair first
        warm = _router(servers, (port(), port()), urls, WARM_UP_POLICY, f"{name}-warmup", "warm-up router")
        first_transfer(servers, warm)
        warm.stop()
        servers.server = None
        router = _router(servers, (port(), port()), urls, t.router_policy, name, "router")
        first_transfer(servers, router, every_server=False)
        return router
    router = _router(servers, (port(), port()), urls, t.router_policy, name, "router")
    first_transfer(servers, router)
    return router


def _idle_spinners(servers: ServerGroup) -> list[dict]:
    """On the CPU build: the servers' threads that spin while every server is ready and idle
    (launcher/node/spinners.py), logged and recorded in server_ready.json. With
    topology.kv_progress_poll_us none should (NIXL's progress thread was one per server). Only
    the servers' processes on this machine are seen (across real nodes, none of the others)."""
    label_of = {pid: m.role for m in servers.members for pid in spinners.server_processes(m.tag)}
    found = spinners.idle_spinners(label_of)
    servers.ctx.log(spinners.describe(found, label_of, servers.ctx.spec.topology.kv_progress_poll_us))
    return [{"role": label_of[s.pid], "pid": s.pid, "tid": s.tid, "core_share": s.share} for s in found]


def _router(servers: ServerGroup, rport: tuple[int, int], urls: dict, policy: str, log_name: str,
            label: str) -> ServerProcess:
    """The router in front of the servers (``urls``: role -> server URLs), started and ready."""
    ctx = servers.ctx
    sp, t, eng = ctx.spec, ctx.spec.topology, ctx.engine
    # the router and its metrics port listen beside the benchmark (loopback), never where other
    # hosts reach them: the router checks no client key (docs/disagg.md "Who can reach what")
    host = t.router_host
    probe = client_host(host)
    rport, metrics_port = rport
    argv = router_argv(sp, eng, rport, urls["prefill"], urls["decode"], metrics_port, policy)
    ctx.log(f"starting the {label} ({t.router}) on {host}:{rport}: {subprocess_line(argv)}")
    renv = servers.server_env()
    if ctx.api_key:  # the servers' key, from the router's environment (never its command line)
        argv, key_env = eng.router_with_key(argv, ctx.api_key)
        renv = {**renv, **key_env}
        ctx.log("the router sends the servers' API key (from its environment)")
    router = ServerProcess(argv, probe_host=probe, port=rport, served_name=sp.served_name,
                           log_path=ctx.paths.server_log_named(log_name), log=ctx.log, env=renv,
                           api_key=ctx.api_key, engine=eng)
    router.label = label
    router.metrics_port = metrics_port
    router.any_status_answers = True  # its /health is 503 while it holds a server unhealthy; it still routes
    servers.server = router
    router.start()
    router.wait_ready(sp.ready_timeout_s, check=servers.check)
    router.engine_version = router.engine_version or servers.members[0].engine_version
    return router


def _request(servers: ServerGroup, router: ServerProcess, text: str, timeout_s: float) -> None:
    key = servers.ctx.api_key
    body = json.dumps({"model": servers.ctx.spec.served_name, "max_tokens": 2, "temperature": 0,
                       "messages": [{"role": "user", "content": text}]}).encode()
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    req = urllib.request.Request(router.url + "/v1/chat/completions", data=body, headers=headers)
    with urllib.request.urlopen(req, timeout=max(1.0, timeout_s)) as r:
        r.read()


def _requests_done(server: ServerProcess, name: Optional[str]) -> Optional[float]:
    """How many requests a server finished (its /metrics; 0 before its first: a labelled
    counter appears with its first sample), None where it cannot say."""
    if not name:
        return None
    try:
        with urllib.request.urlopen(server.url + "/metrics", timeout=10) as r:
            return parse_prometheus_text(r.read().decode()).get(name + "_total", 0.0)
    except (urllib.error.URLError, OSError, ValueError):
        return None


def unwarmed(before: dict, after: dict) -> list[str]:
    """The servers that have not finished a request since ``before`` (role -> count; a
    server whose count is unknown on either side is taken as warmed). Pure."""
    return [r for r, b in before.items() if b is not None and after.get(r) is not None and after[r] <= b]


def first_transfer(servers: ServerGroup, router: ServerProcess, every_server: bool = True) -> None:
    """The KV path's readiness: requests through the router, prefill -> NIXL -> decode,
    until every prefill and decode server has served one. The first transfer between two
    servers pays the NIXL handshake (36 s measured on a 2-core machine, minutes under load),
    which no benchmark point should carry: with 2 prefill servers, one request warmed one
    pair only, and the first request the router sent to the other prefill server waited
    30 to 40 s inside the concurrency-2 point (docs/disagg.md). Each request's text starts
    differently, so a prefix-aware policy has no reason to keep them on one server."""
    ctx, members = servers.ctx, servers.members
    names = ctx.engine.kv_transfer_metrics
    done_name = names.requests_done if names else None
    before = {m.role: _requests_done(m, done_name) for m in members}
    t0 = time.monotonic()
    deadline = t0 + ctx.spec.ready_timeout_s
    while True:
        servers.check()
        try:
            _request(servers, router, "first transfer", deadline - time.monotonic())
            break
        except (urllib.error.URLError, OSError) as e:
            if time.monotonic() >= deadline:
                raise ServerStartError(f"no request went through the router (prefill -> KV transfer -> "
                                       f"decode) within {ctx.spec.ready_timeout_s:g} s: {e}", router.tail(),
                                       log=ctx.paths.shown(ctx.paths.server_log_named("router"))) from None
            time.sleep(1.0)
    ctx.log(f"first request through the router (prefill -> KV transfer -> decode) took "
            f"{time.monotonic() - t0:.1f} s")
    if not every_server:
        return
    sent, limit = 1, 4 * len(members)
    left = unwarmed(before, {m.role: _requests_done(m, done_name) for m in members})
    while left and sent < limit and time.monotonic() < deadline:
        servers.check()
        t1 = time.monotonic()
        try:
            _request(servers, router, f"{sent} kv path check for {', '.join(left)}", deadline - time.monotonic())
        except (urllib.error.URLError, OSError) as e:
            ctx.log(f"a warm-up request through the router failed: {e}")
        sent += 1
        now = unwarmed(before, {m.role: _requests_done(m, done_name) for m in members})
        if now != left:
            ctx.log(f"warm-up request {sent} took {time.monotonic() - t1:.1f} s; not yet served: "
                    f"{', '.join(now) or 'none'}")
        left = now
    ctx.log(f"KV path warm-up: {sent} request(s) through the router in {time.monotonic() - t0:.1f} s; "
             + (f"servers the router sent none of them: {', '.join(left)} (their first transfer falls in "
                "a point)" if left else "every prefill and decode server served one"))

def ready_info(servers: ServerGroup, router: ServerProcess) -> dict:
    """What server_ready.json adds for topology=disagg: every server and the router, the
    decode servers' /metrics (the benchmark's scrape: acceptance and KV transfer happen
    there), and the start-up from the first spawn to the router's readiness."""
    t, members = servers.ctx.spec.topology, servers.members
    each = [{"role": m.role, "side_channel_port": m.side_channel_port, "cpu_cores": m.cpu_cores,
             "node": getattr(m, "node", None) or socket.gethostname(), "address": getattr(m, "address", None),
             **m.ready_info(servers.ctx.spec.bind_host).to_dict()}
            for m in members]
    first = min(m.spawn_unix for m in members)
    return {"startup_s": round(router.ready_unix - first, 3),
            "metrics_urls": [m.url + "/metrics" for m in members if m.role.startswith("decode")],
            "topology": {"kind": t.kind, "prefill": t.prefill, "decode": t.decode, "router": t.router,
                         "kv_connector": t.kv_connector, "kv_buffer_device": t.kv_buffer_device,
                         "kv_lease_duration_s": t.kv_lease_duration_s, "kv_progress_poll_us": t.kv_progress_poll_us,
                         "decode_prefix_caching": t.decode_prefix_caching, "router_policy": t.router_policy,
                         "placement": t.placement, "router_node": socket.gethostname(),
                         "decode_draft_model": t.decode_draft_model,
                         "servers": each, "idle_spinners": servers.idle_spinners,
                         "router_host": t.router_host,
                         "router_ready": router.ready_info(t.router_host).to_dict()}}
