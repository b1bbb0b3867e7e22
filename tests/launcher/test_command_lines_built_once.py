"""Issue 52: a job's server command lines are built once (launcher/contracts/server_steps.py), for
the node that runs them and for the dry run that shows them; the dry run rebuilt the
disaggregated, multi-node and injected-fault lines on its own."""
from __future__ import annotations

import ast
import json
import shlex
from pathlib import Path

from launcher.contracts.job import shell_join
from launcher.contracts.server_steps import server_step
from launcher.engines import get_engine
from launcher.login.plan import make_plan
from launcher.login.sbatch import describe_commands
from tests.support.login import with_engine

ROOT = Path(__file__).resolve().parents[2]
BUILDER = "launcher/contracts/server_steps.py"
# The engine's pieces of a command line, assembled by the builder only (the engines define them).
PIECES = {"server_step_prefix", "router_argv", "disagg_env"}


def test_only_the_builder_assembles_a_servers_command_line():
    found = []
    for path in sorted((ROOT / "launcher").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == BUILDER or rel.startswith("launcher/engines/"):
            continue
        found += [f"{rel}:{n.lineno}: {n.func.attr}" for n in ast.walk(ast.parse(path.read_text()))
                  if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in PIECES]
    assert not found, "a command line assembled outside " + BUILDER + ":\n" + "\n".join(found)


def _line(lines: list[str], label: str) -> str:
    return next(ln for ln in lines if ln.startswith(f"#   {label}: "))[len(f"#   {label}: "):]


def test_the_dry_run_shows_the_disaggregated_servers_the_builder_gives_the_node(compose):
    (job,) = make_plan(*with_engine(compose("topology=disagg", "draft=tiny_identical", "cluster=slurm",
                                            "cluster.nodes=3", "topology.decode=2",
                                            "topology.decode_draft_model=/models/other-draft"))).jobs
    eng = get_engine(job.engine)
    lines = describe_commands(job, eng)
    for n, (role, i) in enumerate(job.topology.roles()):
        node = job.topology.node_of(n)
        argv = server_step(job, eng, job.bind_host, f"<{role}{i} port>", node=f"<node{node}>", disagg_role=role)
        shown = _line(lines, f"{role} {i}")
        assert shown.endswith(shell_join(argv)), (role, i, shown)
        model = json.loads(argv[argv.index("--speculative-config") + 1])["model"]
        assert (model == "/models/other-draft") == (role == "decode")  # the injected fault, on decode only


def test_the_dry_run_shows_each_rank_the_builder_gives_the_node(compose):
    (job,) = make_plan(*with_engine(compose("recipe=qwen3_dflash", "cluster=gb300", "cluster.nodes=2",
                                            "parallel.tp=8"))).jobs
    eng = get_engine(job.engine)
    lines = describe_commands(job, eng)
    for rank in range(2):
        argv = server_step(job, eng, job.bind_host, job.port or "<free port>", node=f"<node{rank}>", rank=rank,
                           head="<node0>", rpc_port="<rpc port>")
        assert shlex.split(_line(lines, f"server node {rank}")) == argv
    assert ("--headless" in argv) and f"--nodelist=<node{rank}>" in argv
