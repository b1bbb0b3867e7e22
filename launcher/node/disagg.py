"""topology=disagg on the node (docs/disagg.md): the prefill and decode servers with the
router in front of them, the KV path's first transfer, what server_ready.json says of
them, and the parity run against the aggregated server. Functions of the node job
(launcher.node.context.NodeContext: the node job), which calls them in its server and
after-sweep phases.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from launcher.bench.metrics import parse_prometheus_text
from launcher.contracts.job import BENCH_MODULE, TopologySpec, disagg_core_sets
from launcher.contracts.server_ready import ready_path, write_server_ready
from launcher.engines import get_engine
from launcher.node.context import NodeContext
from launcher.node.lifecycle import describe_returncode, ServerProcess, ServerStartError
from launcher.node import slurm_steps, spinners
from launcher.node.net import client_host, subprocess_line
from launcher.node.node_facts import NodeFacts, free_ports, probe_nodes
from launcher.runtime.processes import ProcessTag
from launcher.results.disagg_parity import one_line, read_parity


WARM_UP_POLICY = "round_robin"


class _NoServer:
    """A client that needs no server (the parity verdict reads files): never exits."""
    url = ""

    def poll(self) -> None:
        return None

    def tail(self) -> str:
        return ""


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


def _placement(job: NodeContext) -> list[PlacedServer]:
    """Where this job's servers run: Slurm steps on their nodes (launch.server=srun, the
    nodes asked once for their addresses, ports and CPUs), or processes here."""
    sp, t = job.spec, job.spec.topology
    eng = get_engine(sp.engine)
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
        facts = probe_nodes(job.python, used, 2 * per_node)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        raise ServerStartError(f"asking the nodes for their addresses failed: {e}") from None
    job.log("nodes: " + ", ".join(f"{h} {facts[h].address} (cpus {facts[h].cpus})" for h in used))
    return place_servers(t, sp.launch.tp, pin, nodes=alloc, facts=facts)


def serve(job: NodeContext, speculative_config: object = "spec", phase: str = "") -> ServerProcess:
    """topology=disagg: the prefill and decode servers, each its own process with its own
    port, NIXL side-channel port, log (logs/<role><i>.log) and readiness, then the router
    in front of them (logs/router.log). Returns the router: what the benchmark talks to.
    The servers start together (each one's wait covers the others' deaths).
    ``speculative_config=None``: the same servers without speculation (the matched baseline,
    sweep.baseline=true); ``phase`` prefixes their log names (``baseline-prefill0.log``)."""
    sp, t = job.spec, job.spec.topology
    eng = get_engine(sp.engine)
    host = sp.bind_host
    taken: set[int] = set()

    def port() -> int:  # the router's, on this node, where it listens
        while True:
            p = free_ports(client_host(t.router_host), 1)[0]
            if p not in taken:
                taken.add(p)
                return p

    job.members = []
    placed = _placement(job)
    if t.kv_buffer_device == "cpu" and t.pin_cpu_cores and eng.cpu_bind_env not in sp.env:
        job.log("CPU cores per server: " + (", ".join(f"{s.role}{s.index} {s.cores}" for s in placed)
                                            if any(s.cores for s in placed) else
                                            "shared (fewer cores than server ranks)"))
    if any(s.node for s in placed):
        job.log("placement (" + t.placement + "): " + ", ".join(
            f"{s.role}{s.index} on {s.node} ({s.address})" for s in placed) + "; the router on this node")
    step = sp.launch.disagg_server_step()
    for s in placed:
        role, i = s.role, s.index
        argv = (step.server_step_prefix(s.node) if s.node else []) + sp.server_argv(
            host, s.port, disagg_role=role, speculative_config=speculative_config)
        env, key = job.server_launch(eng.disagg_env(s.side_channel_port, s.cores,
                                                    side_channel_host=s.address if s.node else None,
                                                    progress_poll_us=t.kv_progress_poll_us))
        tag = ProcessTag()  # finds the server's processes on this machine (idle_spinners)
        env = tag.apply(env)
        m = ServerProcess(argv + key.argv, probe_host=s.address, port=s.port, served_name=sp.served_name,
                          log_path=job.logs / f"{phase + '-' if phase else ''}{role}{i}.log", log=job.log, env=env,
                          api_key=job.api_key, engine=eng, key=key)
        m.role, m.side_channel_port, m.tag = f"{role}{i}", s.side_channel_port, tag
        m.label = f"{phase + ' ' if phase else ''}{role}{i} server"
        m.cpu_cores = s.cores
        m.node, m.address = s.node, s.address
        where = f"{s.node} ({s.address}:{s.port})" if s.node else f"{host}:{s.port}"
        job.log(f"starting the {role} server {i} on {where} (NIXL side channel {s.side_channel_port}): "
                f"{subprocess_line(argv)}")
        m.start()
        job.members.append(m)
    for m in job.members:
        m.wait_ready(sp.ready_timeout_s, check=job.check)
    job.idle_spinners = _idle_spinners(job) if t.kv_buffer_device == "cpu" else []
    urls = {r: [m.url for m in job.members if m.role.startswith(r)] for r in ("prefill", "decode")}
    name = f"{phase + '-' if phase else ''}router"
    if t.router_policy != WARM_UP_POLICY and len(job.members) > 2:
        # a prefix-aware policy keeps distinct warm-up requests on one prefill server (measured:
        # cache_aware sent 12 of 12 to prefill0): a round-robin router warms every pair first
        warm = _router(job, (port(), port()), urls, WARM_UP_POLICY, f"{name}-warmup", "warm-up router")
        first_transfer(job, warm)
        warm.stop()
        job.server = None
        router = _router(job, (port(), port()), urls, t.router_policy, name, "router")
        first_transfer(job, router, every_server=False)
        return router
    router = _router(job, (port(), port()), urls, t.router_policy, name, "router")
    first_transfer(job, router)
    return router


def _idle_spinners(job: NodeContext) -> list[dict]:
    """On the CPU build: the servers' threads that spin while every server is ready and idle
    (launcher/node/spinners.py), logged and recorded in server_ready.json. With
    topology.kv_progress_poll_us none should (NIXL's progress thread was one per server). Only
    the servers' processes on this machine are seen (across real nodes, none of the others)."""
    label_of = {pid: m.role for m in job.members for pid in spinners.server_processes(m.tag)}
    found = spinners.idle_spinners(label_of)
    job.log(spinners.describe(found, label_of, job.spec.topology.kv_progress_poll_us))
    return [{"role": label_of[s.pid], "pid": s.pid, "tid": s.tid, "core_share": s.share} for s in found]


def _router(job: NodeContext, rport: tuple[int, int], urls: dict, policy: str, log_name: str,
            label: str) -> ServerProcess:
    """The router in front of the servers (``urls``: role -> server URLs), started and ready."""
    sp, t, eng = job.spec, job.spec.topology, get_engine(job.spec.engine)
    # the router and its metrics port listen beside the benchmark (loopback), never where other
    # hosts reach them: the router checks no client key (docs/disagg.md "Who can reach what")
    host = t.router_host
    probe = client_host(host)
    rport, metrics_port = rport
    argv = eng.router_argv(t.router_command, host, rport, urls["prefill"], urls["decode"], policy,
                           tuple(t.router_extra_args), metrics_port=metrics_port)
    job.log(f"starting the {label} ({t.router}) on {host}:{rport}: {subprocess_line(argv)}")
    renv = job.server_env()
    if job.api_key:  # the servers' key, from the router's environment (never its command line)
        argv, key_env = eng.router_with_key(argv, job.api_key)
        renv = {**renv, **key_env}
        job.log("the router sends the servers' API key (from its environment)")
    router = ServerProcess(argv, probe_host=probe, port=rport, served_name=sp.served_name,
                           log_path=job.logs / f"{log_name}.log", log=job.log, env=renv,
                           api_key=job.api_key, engine=eng)
    router.label = label
    router.metrics_port = metrics_port
    router.any_status_answers = True  # its /health is 503 while it holds a server unhealthy; it still routes
    job.server = router
    router.start()
    router.wait_ready(sp.ready_timeout_s, check=job.check)
    router.engine_version = router.engine_version or job.members[0].engine_version
    return router


def _request(job: NodeContext, router: ServerProcess, text: str, timeout_s: float) -> None:
    body = json.dumps({"model": job.spec.served_name, "max_tokens": 2, "temperature": 0,
                       "messages": [{"role": "user", "content": text}]}).encode()
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {job.api_key}"}
                                                      if job.api_key else {})}
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


def first_transfer(job: NodeContext, router: ServerProcess, every_server: bool = True) -> None:
    """The KV path's readiness: requests through the router, prefill -> NIXL -> decode,
    until every prefill and decode server has served one. The first transfer between two
    servers pays the NIXL handshake (36 s measured on a 2-core machine, minutes under load),
    which no benchmark point should carry: with 2 prefill servers, one request warmed one
    pair only, and the first request the router sent to the other prefill server waited
    30 to 40 s inside the concurrency-2 point (docs/disagg.md). Each request's text starts
    differently, so a prefix-aware policy has no reason to keep them on one server."""
    names = get_engine(job.spec.engine).kv_transfer_metrics
    done_name = names.requests_done if names else None
    before = {m.role: _requests_done(m, done_name) for m in job.members}
    t0 = time.monotonic()
    deadline = t0 + job.spec.ready_timeout_s
    while True:
        job.check()
        try:
            _request(job, router, "first transfer", deadline - time.monotonic())
            break
        except (urllib.error.URLError, OSError) as e:
            if time.monotonic() >= deadline:
                raise ServerStartError(f"no request went through the router (prefill -> KV transfer -> "
                                       f"decode) within {job.spec.ready_timeout_s:g} s: {e}",
                                       router.tail(), log="logs/router.log") from None
            time.sleep(1.0)
    job.log(f"first request through the router (prefill -> KV transfer -> decode) took "
             f"{time.monotonic() - t0:.1f} s")
    if not every_server:
        return
    sent, limit = 1, 4 * len(job.members)
    left = unwarmed(before, {m.role: _requests_done(m, done_name) for m in job.members})
    while left and sent < limit and time.monotonic() < deadline:
        job.check()
        t1 = time.monotonic()
        try:
            _request(job, router, f"{sent} kv path check for {', '.join(left)}", deadline - time.monotonic())
        except (urllib.error.URLError, OSError) as e:
            job.log(f"a warm-up request through the router failed: {e}")
        sent += 1
        now = unwarmed(before, {m.role: _requests_done(m, done_name) for m in job.members})
        if now != left:
            job.log(f"warm-up request {sent} took {time.monotonic() - t1:.1f} s; not yet served: "
                     f"{', '.join(now) or 'none'}")
        left = now
    job.log(f"KV path warm-up: {sent} request(s) through the router in {time.monotonic() - t0:.1f} s; "
             + (f"servers the router sent none of them: {', '.join(left)} (their first transfer falls in "
                "a point)" if left else "every prefill and decode server served one"))

def ready_info(job: NodeContext, router: ServerProcess) -> dict:
    """What server_ready.json adds for topology=disagg: every server and the router, the
    decode servers' /metrics (the benchmark's scrape: acceptance and KV transfer happen
    there), and the start-up from the first spawn to the router's readiness."""
    t = job.spec.topology
    servers = [{"role": m.role, "side_channel_port": m.side_channel_port, "cpu_cores": m.cpu_cores,
                "node": getattr(m, "node", None) or socket.gethostname(), "address": getattr(m, "address", None),
                **m.ready_info(job.spec.bind_host).to_dict()}
               for m in job.members]
    first = min(m.spawn_unix for m in job.members)
    return {"startup_s": round(router.ready_unix - first, 3),
            "metrics_urls": [m.url + "/metrics" for m in job.members if m.role.startswith("decode")],
            "topology": {"kind": t.kind, "prefill": t.prefill, "decode": t.decode, "router": t.router,
                         "kv_connector": t.kv_connector, "kv_buffer_device": t.kv_buffer_device,
                         "kv_lease_duration_s": t.kv_lease_duration_s, "kv_progress_poll_us": t.kv_progress_poll_us,
                         "decode_prefix_caching": t.decode_prefix_caching, "router_policy": t.router_policy,
                         "placement": t.placement, "router_node": socket.gethostname(),
                         "decode_draft_model": t.decode_draft_model,
                         "servers": servers, "idle_spinners": job.idle_spinners,
                         "router_host": t.router_host,
                         "router_ready": router.ready_info(t.router_host).to_dict()}}

def parity_reference(job: NodeContext) -> int:
    """bench.disagg_parity, first half: the disaggregated servers stop, and the aggregated server
    of the same recipe (the same flags, no KV transfer) runs the same points into its own job
    folder (its job.json written here). Returns its benchmark's exit status."""
    par = job.spec.topology.parity
    agg_dir = Path(par.job_dir)
    (agg_dir / "logs").mkdir(parents=True, exist_ok=True)
    agg = replace(job.spec, server_id=agg_dir.name, job_dir=str(agg_dir), topology=None, bench=par.bench,
                  baseline=None, known_answer=None)
    agg_spec = agg.write()
    job.log("disagg parity: stopping the disaggregated servers; the aggregated server runs the same points "
             f"into {agg_dir}")
    job.stop_server("disaggregated servers")
    L = job.spec.launch
    if L.nodes > 1:  # the aggregated reference is one server on the head node (a step there)
        head = slurm_steps.allocation_nodes()[0] if L.server == "srun" else None
        job.spec = replace(job.spec, launch=replace(L.disagg_server_step(), srun_args=[
            *L.srun_args, *([f"--nodelist={head}"] if head else [])]))
        job.log(f"disagg parity: the aggregated server on {head or 'this node'}")
    server = job.serve(phase="aggregated server")
    ready = write_server_ready(ready_path(agg_dir), replace(
        server.ready_info(job.spec.bind_host), engine=job.spec.engine, acceptance_source=job.spec.acceptance_source,
        speculative_config=job.spec.speculative_config))
    argv = [job.python, "-m", BENCH_MODULE, "--spec", str(agg_spec), "--url", server.url]
    brc = job.run_client(argv, server, ready, "aggregated benchmark")
    job.stop_server("aggregated server")
    return brc


def parity_verdict(job: NodeContext, rc: int, brc: int) -> int:
    """bench.disagg_parity, second half (after the known-answer probe, whose failed temperatures
    it does not judge acceptance at): launcher.bench.disagg_parity judges the two sides
    (disagg_parity.json). ``brc``: the aggregated benchmark's exit status. A failed verdict
    fails the job."""
    agg_dir = Path(job.spec.topology.parity.job_dir)
    ready = ready_path(agg_dir)  # the aggregated server's, written by parity_reference
    argv = [job.python, "-m", "launcher.bench.disagg_parity", "--spec", str(job.spec_path)]
    prc = job.run_client(argv, _NoServer(), ready, "disagg parity verdict")
    if rc == 0 and brc != 0:
        job.fail(f"aggregated benchmark failed (exit {describe_returncode(brc)}; see {agg_dir / 'logs'})")
        return brc
    if rc == 0 and prc != 0:

        verdict = read_parity(job.job_dir)
        job.fail((one_line(verdict) if verdict else "disagg parity: no verdict written")
                  + " (see disagg_parity.json)")
        return prc
    return rc

