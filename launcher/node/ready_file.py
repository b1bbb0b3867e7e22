"""What server_ready.json says of the job's servers, written on the node once they are
ready: the server's own readiness (launcher.node.lifecycle), the engine and how it reports
acceptance, topology=disagg's servers and router (launcher.node.disagg), every listening
socket (launcher.node.listeners) and, multi-node, where each rank ran. The benchmark reads it
(launcher.contracts.server_ready)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from launcher.contracts.server_ready import write_server_ready
from launcher.node import disagg, listeners
from launcher.node.lifecycle import ServerProcess
from launcher.node.servers import ServerGroup


def write_ready(servers: ServerGroup, server: ServerProcess) -> Path:
    """The job's server_ready.json for ``server`` (topology=disagg: the router)."""
    ctx = servers.ctx
    sp = ctx.spec
    info = server.ready_info(sp.bind_host)
    info = replace(info, engine=sp.engine, acceptance_source=sp.acceptance_source,
                   speculative_config=sp.speculative_config,
                   engine_version=info.engine_version or sp.engine_version,
                   amx_permission_hook=servers.amx_permission_hook())
    if servers.members:
        info = replace(info, **disagg.ready_info(servers, server))
    found = listeners.job_listeners(servers.members, server, ctx.api_key)
    ctx.log(listeners.describe(found))
    info = replace(info, listeners=found)
    ranks = servers.rank_placements()
    if ranks is not None:
        info = replace(info, ranks=ranks)
    return write_server_ready(ctx.paths.server_ready(), info)
