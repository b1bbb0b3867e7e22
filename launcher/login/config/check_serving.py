"""Validation of what serves the recipe: parallelism against the allocation, the cluster, the
server's settings, its API key. Each check returns its problems (launcher.login.config.validate
runs them)."""
from __future__ import annotations

from typing import Optional

from launcher.engines import ApiKey, Engine
from launcher.login.config.schema import LauncherConfig
from launcher.login.errors import ConfigError, Problems
from launcher.login.server_args import memory_conflicts
from launcher.runtime.apikey import api_key_in_args, fix


def parallelism_problems(cfg: LauncherConfig) -> list[ConfigError]:
    """Parallelism against the allocation: tp x pp x dp GPUs on nodes x gpus_per_node."""
    out = Problems()
    par, cl = cfg.parallel, cfg.cluster
    for name, v in (("parallel.tp", par.tp), ("parallel.pp", par.pp), ("parallel.dp", par.dp),
                    ("parallel.ep", par.ep), ("cluster.nodes", cl.nodes)):
        if v < 1:
            out.add(name, f"is {v}, must be >= 1", f"set {name}=1")
    gpus = par.tp * par.pp * par.dp
    ep_group = par.tp * par.dp
    if par.ep not in (1, ep_group) and par.ep >= 1:
        out.add("parallel.ep", f"is {par.ep}; vLLM's expert-parallel group is tp x dp = {ep_group}",
                f"set parallel.ep={ep_group} (expert parallel on) or parallel.ep=1 (off)")
    total = cl.nodes * cl.gpus_per_node
    if cfg.topology.kind == "disagg" and gpus <= max(1, cl.gpus_per_node):
        pass  # one-node servers placed on the nodes: launcher/contracts/placement.py judges the fit
    elif cl.gpus_per_node > 0 and cl.nodes >= 1:
        if cl.nodes == 1 and gpus > total:
            out.add("parallel.tp", f"tp x pp x dp = {gpus} GPUs exceeds cluster '{cl.name}' gpus_per_node="
                    f"{cl.gpus_per_node}", f"use tp x pp x dp <= {cl.gpus_per_node}, or cluster.nodes="
                    f"{-(-gpus // cl.gpus_per_node)}")
        elif cl.nodes > 1 and gpus != total:
            out.add("cluster.nodes", f"is {cl.nodes}: {cl.nodes} x {cl.gpus_per_node} GPUs = {total}, but one server "
                    f"uses tp x pp x dp = {par.tp} x {par.pp} x {par.dp} = {gpus}",
                    f"make tp x pp x dp equal nodes x gpus_per_node (e.g. cluster.nodes={max(1, gpus // cl.gpus_per_node)})")
        elif cl.nodes > 1 and par.dp > 1 and par.tp * par.pp <= cl.gpus_per_node and par.dp % cl.nodes:
            out.add("parallel.dp", f"is {par.dp}: data parallel across {cl.nodes} nodes needs dp divisible by nodes",
                    f"set parallel.dp to a multiple of {cl.nodes}")
    elif gpus > 1 and cl.nodes > 1 and gpus != cl.nodes:  # a CPU cluster: one rank per node
        out.add("cluster.nodes", f"is {cl.nodes} on a CPU cluster (gpus_per_node=0), where each node runs one rank, but "
                f"tp x pp x dp = {gpus}", f"set cluster.nodes={gpus}, or tp x pp x dp = {cl.nodes}")
    elif gpus > 1 and cl.nodes == 1:
        # parallel=tp1 (a group) would not undo a typed parallel.tp=2: name the fields themselves
        ones = " ".join(f"parallel.{n}=1" for n, v in (("tp", par.tp), ("pp", par.pp), ("dp", par.dp)) if v > 1)
        out.add("parallel.tp", f"tp x pp x dp = {gpus} but cluster '{cl.name}' has no GPUs (gpus_per_node=0)",
                f"set {ones} on a CPU cluster"
                + (f", cluster.nodes={gpus} (one CPU rank per node)" if cl.executor == "slurm" else "")
                + ", or use a GPU cluster (cluster=<name>, e.g. h100)")
    if cl.nodes > 1 and cl.executor != "slurm":
        out.add("cluster.nodes", f"is {cl.nodes} on the {cl.executor} executor", "multi-node servers need a Slurm cluster")
    if cl.container_scope not in ("server", "job"):
        out.add("cluster.container_scope", f"is '{cl.container_scope}'",
                "use server (only vLLM in the container) or job (the whole job in the container)")
    if cl.nodes > 1 and cl.container_scope == "job":
        out.add("cluster.container_scope", "is job with cluster.nodes > 1",
                "use cluster.container_scope=server: each node's server is its own container step")
    if par.draft_tp is not None and par.draft_tp not in (1, par.tp):
        out.add("parallel.draft_tp", f"is {par.draft_tp}; vLLM accepts 1 or the target's tp ({par.tp})",
                f"set parallel.draft_tp=1 or parallel.draft_tp={par.tp}")
    return out


def cluster_problems(cfg: LauncherConfig) -> list[ConfigError]:
    """Cluster."""
    out = Problems()
    cl = cfg.cluster
    if cl.executor not in ("local", "slurm"):
        out.add("cluster.executor", f"unknown executor '{cl.executor}'", "use local or slurm")
    if cl.requires_container and not cl.container_image:
        out.add("cluster.container_image", f"cluster '{cl.name}' runs jobs in a container but none is set",
                "set cluster.container_image=<image> or export CONTAINER_IMAGE")
    if cl.time_min < 1:
        out.add("cluster.time_min", f"is {cl.time_min}", "set a time limit in minutes, e.g. cluster.time_min=120")
    if cl.gpu_hour_price is not None and not cl.gpu_hour_price > 0:
        out.add("cluster.gpu_hour_price", f"is {cl.gpu_hour_price}",
                "give what one GPU costs an hour in US dollars, e.g. cluster.gpu_hour_price=2.50, or null for none")
    return out


def server_problems(cfg: LauncherConfig, eng: Optional[Engine]) -> list[ConfigError]:
    """Server."""
    out = Problems()
    srv = cfg.server
    out += memory_conflicts(srv, eng.memory_flag_names() if eng is not None else set())
    if srv.gpu_memory_utilization is not None and not 0 < srv.gpu_memory_utilization <= 1:
        out.add("server.gpu_memory_utilization", f"is {srv.gpu_memory_utilization}", "use a fraction in (0, 1]")
    if srv.port is not None and not 1024 <= srv.port <= 65535:
        out.add("server.port", f"is {srv.port}", "use a port in 1024-65535, or null for a free one")
    if srv.ready_timeout_s < 1:
        out.add("server.ready_timeout_s", f"is {srv.ready_timeout_s}", "use a positive number of seconds")
    if srv.unanswered_timeout_s < 1:
        out.add("server.unanswered_timeout_s", f"is {srv.unanswered_timeout_s}", "use a positive number of seconds")
    if srv.spec_decode_metrics not in ("none", "summary", "detailed"):
        out.add("server.spec_decode_metrics", f"is '{srv.spec_decode_metrics}'", "use summary or detailed")
    if not srv.command.strip():
        out.add("server.command", "is empty", f"set it, e.g. server.command='{eng.default_command}'" if eng is not None
                else "set it to the engine's server command")
    return out


def api_key_problems(cfg: LauncherConfig, eng: Optional[ApiKey]) -> list[ConfigError]:
    """The server's API key: through the environment only."""
    out = Problems()
    if eng is not None and api_key_in_args(cfg.server.extra_args, eng):
        out.add("server.extra_args", f"passes {eng.key_flag} on the command line, where it would be written to "
                "job.json, the logs and the process list", fix(eng))
    return out
