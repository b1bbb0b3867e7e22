"""The command lines of a job's servers, built once: the node starts them with the values it finds
(ports, nodes, addresses), and the dry run (launcher.login.sbatch.describe_commands) shows them with
placeholders. One server (aggregated), one rank of a multi-node server, one prefill or decode server
of topology=disagg (the injected fault included: JobSpec.server_argv), and the router in front of
those. Standard library only."""
from __future__ import annotations

from typing import Optional, Sequence

from launcher.contracts.job import JobSpec
from launcher.engines import Engine


def server_step(spec: JobSpec, eng: Engine, host: str, port: int | str, *, node: Optional[str] = None,
                rank: int = 0, head: Optional[str] = None, rpc_port: int | str | None = None,
                disagg_role: Optional[str] = None, speculative_config: object = "spec",
                wrapper: Sequence[str] = ()) -> list[str]:
    """What one server (or one rank) runs: its Slurm step's ``srun ...`` when the server is its own
    step (on ``node``; a disaggregated server's step only where it was placed on a node), then
    ``wrapper`` (a rank's step_record), then the server argv (JobSpec.server_argv)."""
    if disagg_role is not None:
        prefix = spec.launch.disagg_server_step().server_step_prefix(node) if node else []
        return prefix + list(wrapper) + spec.server_argv(host, port, disagg_role=disagg_role,
                                                         speculative_config=speculative_config, engine=eng)
    return spec.launch.server_step_prefix(node) + list(wrapper) + spec.server_argv(
        host, port, rank, head, rpc_port, speculative_config, engine=eng)  # type: ignore[arg-type]


def disagg_env(spec: JobSpec, eng: Engine, side_channel_port: int, cores: Optional[list] = None,
               side_channel_host: Optional[str] = None) -> dict[str, str]:
    """A disaggregated server's own environment: the KV-transfer side channel, its CPU cores and
    the transfer library's progress poll (topology.kv_progress_poll_us)."""
    return eng.disagg_env(side_channel_port, cores, side_channel_host=side_channel_host,
                          progress_poll_us=spec.topology.kv_progress_poll_us if spec.topology else 0)


def router_argv(spec: JobSpec, eng: Engine, port: int | str, prefill_urls: list[str], decode_urls: list[str],
                metrics_port: int | str, policy: Optional[str] = None) -> list[str]:
    """The router in front of the disaggregated servers (``policy``: the spec's unless given, as the
    warm-up router's round robin), listening on topology.router_host."""
    t = spec.topology
    return eng.router_argv(t.router_command, t.router_host, port, prefill_urls, decode_urls,
                           policy or t.router_policy, tuple(t.router_extra_args), metrics_port=metrics_port)
