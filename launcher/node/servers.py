"""The node job's server group: start, readiness, stop. One server, a multi-node
server (one Slurm step per node, the head's API here), or topology=disagg's prefill
and decode servers with their router (launcher.node.disagg starts them into the group);
each server's environment and API key, and a failed server put in words
(launcher.node.server_fault), with the points it hit. Held by the node job
(launcher.node.serve_and_bench.NodeJob), on the job's context (launcher.node.job_context.JobContext)."""
from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Optional

from launcher.contracts.server_steps import server_step
from launcher.engines import ServerKey
from launcher.node import server_fault, slurm_steps
from launcher.node.job_context import JobContext
from launcher.node.lifecycle import (ServerDiedError, ServerProcess, ServerStartError, describe_returncode, log_tail,
                                     spawn, terminate_trees)
from launcher.node.net import client_host, node_address, pick_free_port, port_is_free, subprocess_line
from launcher.results.status import JobProgress, read_progress
from launcher.runtime import apikey
from launcher.runtime.cpuinfo import cpu_flags
from launcher.runtime.processes import ProcessTag

PORT_RETRIES = 2  # new free port after "address already in use" (picked ports only)


class ServerGroup:
    """The job's servers: ``serve()`` starts them and waits until ready, ``stop()``
    ends every process of them, ``check()`` raises when one has gone."""

    def __init__(self, ctx: JobContext):
        self.ctx = ctx
        self.server: Optional[ServerProcess] = None
        self.idle_spinners: list[dict] = []
        self.members: list[ServerProcess] = []  # topology=disagg: the prefill and decode servers (self.server: the router)
        self.workers: list = []  # multi-node: the other nodes' server steps (Popen of srun)
        self._key_dir: Optional[str] = None  # a private folder for an engine that reads its key from a file
        self.blamed_points: set[str] = set()  # points running while a server was failing (silent, engine gone)

    def server_env(self, extra_env: Optional[dict] = None) -> dict:
        """A server process's environment: this one, the recipe's server.env, ``extra_env``, and
        what the engine's CPU build needs on top of them (it reads them: launcher/engines/vllm_cpu.py)."""
        env = dict(os.environ)
        env.update({k: str(v) for k, v in self.ctx.spec.env.items()})
        env.update(extra_env or {})
        if self.cpu_server():
            env.update(self.ctx.engine.cpu_server_env(cpu_flags(), env))
        return env

    def server_launch(self, extra_env: Optional[dict] = None) -> tuple[dict, ServerKey]:
        """A server's environment and how it receives the job's key (the engine's way: a
        variable, or a private file outside the run that the server process removes once ready)."""
        if self.ctx.api_key and self._key_dir is None:
            self._key_dir = tempfile.mkdtemp(prefix="specdec-key-")  # 0700: the job's user alone
        return apikey.server_launch(self.ctx.api_key, self.server_env(extra_env), self.ctx.engine,
                                    Path(self._key_dir or tempfile.gettempdir()))

    def cpu_server(self) -> bool:
        """The server runs the engine's CPU build here (no GPUs asked, no container)."""
        return self.ctx.spec.launch.gpus_per_node == 0 and not self.ctx.spec.launch.container_image

    def amx_permission_hook(self) -> bool:
        """Whether the server's processes ask for the AMX state at start (docs/disagg.md)."""
        return self.cpu_server() and bool(self.ctx.engine.cpu_server_env(cpu_flags(), {}))

    def check(self) -> None:
        """Called while waiting and watching: a signal, a disagg server gone (a ready one's
        engine or API server ended, or one not ready yet exited), or a worker node's server gone."""
        ctx = self.ctx
        ctx.check_signal()
        # topology=disagg: while the others start, the first transfer runs, or a client runs
        self.check_servers([m for m in self.members if m.t_ready is not None],
                           "servers' start-up" if ctx.phase == "start-up" else ctx.phase)
        for m in self.members:
            if m.t_ready is None and m.poll() is not None:
                raise self.server_failure(m, "start-up")
        for i, w in enumerate(self.workers, start=1):
            rc = w.poll()
            if rc is not None:
                log = ctx.paths.node_server_log(i)
                f = server_fault.ServerFault(label=f"server on node {i} (its srun step)", log=ctx.paths.shown(log),
                                             rc=rc, log_fatal=server_fault.fatal_signal_in_log(log_tail(log, 2000)))
                ctx.end_cause = server_fault.fault_cause(f)
                raise ServerDiedError(server_fault.fault_message(f, ctx.phase), log_tail(log),
                                      cause=ctx.end_cause, log=f.log)

    def check_servers(self, watched: list[ServerProcess], what: str, settle_s: float = 0.0) -> None:
        """Raise for a server whose API server exited or whose engine process ended. An
        engine's death is followed by its API server's own end: wait up to ``settle_s``
        (3 s after an engine's death) for it, so the error says both."""
        for m in watched:
            m.check_engine_pids()
            if m.poll() is None and not m.engine_gone:
                continue
            self.blame_running_points()
            deadline = time.monotonic() + max(settle_s, 3.0 if m.engine_gone else 0.0)
            while m.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            if m.poll() is not None:
                self.ctx.log(f"the {m.label} exited (code {describe_returncode(m.poll())}) during the {what}")
            raise self.server_failure(m, what)

    def blame_running_points(self) -> None:
        """Note the points the benchmark is running now (progress.json): a server is failing."""
        self.blamed_points.update((read_progress(self.ctx.job_dir) or JobProgress()).running)

    def server_failure(self, server: ServerProcess, during: str) -> ServerDiedError:
        """The error for a server that failed after it was ready: which server, what ended
        (its API server, its engine, its answers), the signal, since when, and its log."""
        f = server.fault()
        self.ctx.end_cause = server_fault.fault_cause(f)
        return ServerDiedError(server_fault.fault_message(f, during), server.tail(), cause=self.ctx.end_cause,
                               log=server.log_name)

    def serve(self, speculative_config: object = "spec", phase: str = "server") -> ServerProcess:
        """Start the server (speculating with ``speculative_config``, default the spec's;
        None: without speculation) and wait until it is ready: one server phase.
        Multi-node: one srun step per node, the head's API on this node. Stop it with
        ``stop()``."""
        ctx = self.ctx
        sp, L = ctx.spec, ctx.spec.launch
        host = sp.bind_host
        probe = client_host(host)
        name = sp.served_name
        if L.server == "srun" and not slurm_steps.in_allocation():
            raise ServerStartError("the spec's launch.server is srun but this is not a Slurm allocation "
                                   "(SLURM_JOB_ID is unset); run it under sbatch/salloc or set launch.server=process")
        if L.nodes > 1 and L.server == "srun":
            nodes = slurm_steps.allocation_nodes()
            if len(nodes) < L.nodes:
                raise ServerStartError(f"the spec asks for {L.nodes} nodes but the allocation has {nodes}")
        else:  # child processes of this job: every rank on this host (one-host rehearsal of a multi-node launch)
            nodes = [None] * L.nodes
        if sp.port is not None and not port_is_free(host, sp.port):
            raise ServerStartError(f"port {sp.port} (SPECDEC_PORT or the spec's port) is already in use on {host}")
        attempts = 1 if sp.port is not None else 1 + PORT_RETRIES
        # what this server's speculative config asks of its environment (SGLang's forced acceptance)
        spec_env = self.ctx.engine.speculative_env(sp.speculative_config if speculative_config == "spec"
                                                   else speculative_config)
        if spec_env:
            ctx.log("server environment for its speculative config: "
                    + " ".join(f"{k}={v}" for k, v in sorted(spec_env.items())))
        for attempt in range(attempts):
            port = sp.port if sp.port is not None else pick_free_port(host)
            rpc_port = pick_free_port(host) if L.nodes > 1 else None
            head = self.head_address(nodes[0]) if nodes[0] else probe  # process launch: the ranks meet on this host
            self.workers = []
            for rank in range(1, L.nodes):
                wargv = server_step(sp, self.ctx.engine, host, port, node=nodes[rank], rank=rank, head=head,
                                    rpc_port=rpc_port, speculative_config=speculative_config,
                                    wrapper=self.rank_record(rank, nodes[rank]))
                ctx.log(f"starting the {phase} on node {rank} ({nodes[rank] or 'this host'}): {subprocess_line(wargv)}")
                with open(ctx.paths.node_server_log(rank), "ab") as f:
                    self.workers.append(spawn(wargv, stdout=f, env=self.server_env(spec_env)))
            argv = server_step(sp, self.ctx.engine, host, port, node=nodes[0], head=head, rpc_port=rpc_port,
                               speculative_config=speculative_config, wrapper=self.rank_record(0, nodes[0]))
            ctx.log(f"starting {phase} on {host}:{port}"
                    f"{' as a Slurm step' if L.server == 'srun' else ''}: {subprocess_line(argv)}")
            env, key = self.server_launch(spec_env)
            tag = ProcessTag()  # finds the server's processes on this machine (its listening sockets)
            env = tag.apply(env)
            server = ServerProcess(argv + key.argv, probe_host=probe, port=port, served_name=name,
                                   log_path=ctx.paths.server_log, log=ctx.log, env=env, api_key=ctx.api_key,
                                   engine=ctx.engine, key=key)
            server.label = "main server" if phase == "server" else phase
            server.tag = tag
            self.server = server
            server.start()
            try:
                server.wait_ready(sp.ready_timeout_s, check=self.check)
                return server
            except ServerStartError as e:
                if attempt + 1 < attempts and "address already in use" in e.tail.lower():
                    ctx.log(f"port {port} was taken before the server bound it; trying another port")
                    self.stop()
                    continue
                raise
        raise AssertionError("unreachable")

    def head_address(self, head_node: str) -> str:
        """The head node's address for the other ranks, resolved on the head (this job runs
        there: its hostname, else its first non-loopback interface), never a loopback one."""
        here = socket.gethostname().split(".")[0]
        if here == head_node.split(".")[0]:
            addr, iface = node_address()
            how = f"resolved on the head ({here}{', ' + iface if iface else ''})"
        else:  # the job's own task is not on the head: resolve its name here
            addr, _ = node_address(head_node)
            how = f"resolved from {here}: this job's task does not run on the head"
        if addr.startswith("127."):
            raise ServerStartError(f"the head node {head_node} has no address other nodes can reach ({addr}, {how}): "
                                   "give it a non-loopback address (/etc/hosts or an interface)")
        self.ctx.log(f"head node {head_node}: address {addr} ({how})")
        return addr

    def rank_record(self, rank: int, node: Optional[str]) -> list[str]:
        """A multi-node rank as a Slurm step runs under launcher.node.step_record: it writes where it
        runs (node, address, pid) to logs/rank<N>.json and sets the engine's per-node environment.
        Not in a container (the image lacks this package) nor for a process launch."""
        ctx = self.ctx
        L = ctx.spec.launch
        if L.nodes <= 1 or L.server != "srun" or L.container_image or node is None:
            return []
        rec = ctx.paths.rank_record(rank)
        rec.unlink(missing_ok=True)
        return [ctx.python, "-m", "launcher.node.step_record", "--record", str(rec), "--rank", str(rank),
                "--engine", ctx.spec.engine, "--"]

    def rank_placements(self) -> Optional[list]:
        """What each multi-node rank wrote of where it ran (logs/rank<N>.json), rank order."""
        if self.ctx.spec.launch.nodes <= 1:
            return None
        out = []
        for rank in range(self.ctx.spec.launch.nodes):
            try:
                out.append(json.loads(self.ctx.paths.rank_record(rank).read_text()))
            except (OSError, ValueError):
                out.append({"rank": rank, "node": None, "address": None, "note": "no record (a container step, or a rank not started by step_record)"})
        return out

    def stop(self, what: str = "server") -> None:
        """Stop the server phase: its processes (srun clients forward SIGTERM to their
        steps), then any server step still listed (scancel)."""
        log = self.ctx.log
        for m in self.members + ([self.server] if self.server is not None else []):
            m.key.remove_files()
        procs = [w for w in self.workers] + [m.proc for m in self.members if m.proc is not None]
        if self.server is not None and self.server.proc is not None:
            procs.append(self.server.proc)
        left = terminate_trees(procs, self.ctx.spec.stop_grace_s, log, what) if procs else set()
        if self.server is not None and self.server.proc is not None:
            log(f"{what} process ended (exit {describe_returncode(self.server.proc.returncode)})")
        if self.ctx.spec.launch.server == "srun" and slurm_steps.in_allocation():
            # the job as Slurm names it (an array task's JOBID_TASK): `squeue -s -j` on the array's own
            # id lists every task's steps, and this job would cancel another task's server
            steps = slurm_steps.cancel_steps(slurm_steps.slurm_job_id(os.environ), slurm_steps.SERVER_STEP_NAME, log)
            if steps:
                log(f"WARNING: server step(s) still listed after scancel: {steps}", logging.ERROR)
        if left:
            log(f"WARNING: processes still running after SIGKILL: {sorted(left)}", logging.ERROR)
        self.workers = []
        self.members = []

    def shut_down(self) -> None:
        """At the job's end: stop whatever of the servers still runs, remove the key's folder."""
        if self.server is not None or self.workers or self.members:
            self.ctx.log("stopping the server")
            self.stop()
        if self._key_dir is not None:
            shutil.rmtree(self._key_dir, ignore_errors=True)

    def engine_pids(self) -> list[int]:
        """The server now, or the disaggregated servers and router: their pids."""
        procs = ([self.server] if self.server is not None else []) + list(self.members)
        return [p.pid for p in procs if p.pid is not None]
