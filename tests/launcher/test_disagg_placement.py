"""topology=disagg across nodes, pure: which node each server runs on
(launcher.contracts.placement), validation's one-line refusals of placements that do not
fit, the plan's server_nodes, the rendered Slurm steps, and the node side's placing of
servers on the nodes' addresses, ports and cores (launcher.node.disagg.place_servers,
launcher.node.node_facts). No process is started."""
from __future__ import annotations

import json

import pytest

from launcher.engines import get_engine
from launcher.contracts import placement
from launcher.contracts.job import JobSpec, TopologySpec
from launcher.login.config.validate import validate
from launcher.login.plan import make_plan
from launcher.login.sbatch import describe_commands
from launcher.node.disagg import place_servers
from launcher.node.node_facts import NodeFacts, node_address, parse_facts, probe_argv
from tests.support.login import with_engine


@pytest.mark.parametrize("p, d, nodes, mode, pn, expected", [
    (1, 1, 1, "auto", None, [0, 0]),
    (1, 1, 2, "auto", None, [0, 1]),
    (2, 2, 2, "split", None, [0, 0, 1, 1]),
    (1, 2, 3, "auto", None, [0, 1, 2]),
    (2, 1, 3, "split", None, [0, 1, 2]),
    (4, 4, 4, "split", 1, [0, 0, 0, 0, 1, 2, 3, 1]),
    (3, 1, 2, "split", None, [0, 0, 0, 1]),
])
def test_server_nodes(p, d, nodes, mode, pn, expected):
    assert placement.server_nodes(p, d, nodes, mode, pn) == expected
    assert placement.problems(p, d, nodes, mode, pn, 0, 1) == []


@pytest.mark.parametrize("args, field, words", [
    ((1, 1, 2, "one_node", None, 0, 1), "topology.placement", "is one_node but cluster.nodes=2"),
    ((1, 1, 1, "split", None, 0, 1), "topology.placement", "is split on 1 node"),
    ((1, 1, 3, "auto", None, 0, 1), "cluster.nodes", "leaves a node without a server"),
    ((1, 1, 2, "split", 2, 0, 1), "topology.prefill_nodes", "is 2 of cluster.nodes=2"),
    ((1, 1, 2, "packed", None, 0, 1), "topology.placement", "is 'packed'"),
    ((3, 1, 2, "split", None, 4, 2), "topology", "node 0 runs 3 server(s) of tp 2: 6 GPUs; a node has 4"),
])
def test_placements_that_do_not_fit(args, field, words):
    (problem,) = placement.problems(*args)
    assert problem[0] == field and words in problem[1], problem


@pytest.mark.parametrize("overrides, line", [
    (("cluster.nodes=2",), "cluster.nodes: is 2 on the local executor"),
    (("cluster=slurm", "cluster.nodes=3"), "cluster.nodes: is 3: 2 node(s) for 1 prefill server(s)"),
    (("cluster=slurm", "cluster.nodes=2", "topology.placement=one_node"), "topology.placement: is one_node"),
    (("cluster=slurm", "cluster.nodes=2", "cluster.container_scope=job"), "cluster.container_scope: is job"),
    (("cluster=gb300", "cluster.nodes=2", "parallel=tp1", "topology.prefill=5"), "topology: node 0 runs 5 server(s)"),
])
def test_validation_refuses_what_does_not_fit(compose, overrides, line):
    errs = [e.line() for e in validate(*with_engine(compose("topology=disagg", *overrides)))]
    assert any(e.startswith(line) for e in errs), errs
    assert all("\n" not in e for e in errs)


@pytest.mark.parametrize("overrides", [
    ("cluster=slurm", "cluster.nodes=2"),
    ("cluster=slurm", "cluster.nodes=3", "topology.decode=2", "bench.disagg_parity=true"),
    ("cluster=slurm", "cluster.nodes=2", "cluster.container_image=/images/vllm.sqsh"),  # container steps
    ("cluster=gb300", "cluster.nodes=2", "parallel=tp1", "topology.prefill=4", "topology.decode=4"),
])
def test_several_nodes_are_accepted(compose, overrides):
    errs = [e.line() for e in validate(*with_engine(compose("topology=disagg", *overrides)))]
    assert not [e for e in errs if e.split(":")[0].startswith(("topology", "cluster", "parallel"))], errs


def test_plan_and_dry_run_put_each_server_on_its_node(compose):
    (job,) = make_plan(*with_engine(compose("topology=disagg", "cluster=slurm", "cluster.nodes=3", "topology.decode=2",
                               "cluster.container_image=/images/vllm.sqsh"))).jobs
    t = job.topology
    assert (t.placement, t.server_nodes) == ("split", [0, 1, 2])
    assert JobSpec.from_dict(json.loads(json.dumps(job.to_dict()))).topology.server_nodes == [0, 1, 2]
    lines = describe_commands(job, get_engine(job.engine))
    decode1 = next(ln for ln in lines if ln.startswith("#   decode 1: "))
    assert "--nodelist=<node2>" in decode1 and "VLLM_NIXL_SIDE_CHANNEL_HOST='<node2 address>'" in decode1
    assert "--container-image=/images/vllm.sqsh" in decode1
    assert "--nnodes" not in decode1 and "--headless" not in decode1  # each server is one node's
    router = next(ln for ln in lines if ln.startswith("#   router: "))
    assert "http://<node0 address>:<prefill0 port>" in router and "http://<node2 address>:<decode1 port>" in router
    assert any(ln.startswith("#   placement: prefill0 on node 0, decode0 on node 1, decode1 on node 2") for ln in lines)


ROUTER = {"router": "vllm-router", "router_command": "vllm-router"}  # placement does not read them


def _facts(host, addr, boot, cpus, ports):
    return NodeFacts(hostname=host, address=addr, boot_id=boot, cpus=cpus, ports=ports)


def test_servers_take_their_nodes_address_ports_and_cores():
    t = TopologySpec(prefill=1, decode=2, server_nodes=[0, 1, 1], placement="split", **ROUTER)
    nodes = ["n0", "n1"]
    facts = {"n0": _facts("n0", "10.0.0.10", "a", [0, 1, 2, 3], [5000, 5001, 5002, 5003]),
             "n1": _facts("n1", "10.0.0.11", "b", [0, 1, 2, 3], [6000, 6001, 6002, 6003])}
    placed = place_servers(t, 1, True, nodes=nodes, facts=facts)
    assert [(s.role, s.index, s.node, s.address, s.port, s.side_channel_port) for s in placed] == [
        ("prefill", 0, "n0", "10.0.0.10", 5000, 5001), ("decode", 0, "n1", "10.0.0.11", 6000, 6001),
        ("decode", 1, "n1", "10.0.0.11", 6002, 6003)]
    # one machine per node: each node's servers share out that node's cores
    assert [s.cores for s in placed] == [[[0, 1, 2, 3]], [[0, 1]], [[2, 3]]]
    # two nodes on one machine (one boot id, as the test cluster's namespaces): the cores are shared out across them
    same = {h: _facts(h, f.address, "one", [0, 1, 2, 3], f.ports) for h, f in facts.items()}
    assert [s.cores for s in place_servers(t, 1, True, nodes=nodes, facts=same)] == [[[0]], [[1]], [[2]]]
    assert all(s.cores is None for s in place_servers(t, 1, False, nodes=nodes, facts=same))


def test_servers_as_processes_stay_on_this_host():
    ports = iter(range(7000, 7010))
    placed = place_servers(TopologySpec(**ROUTER), 1, True, local_host="127.0.0.1", local_cores=[0, 1],
                           pick_port=lambda: next(ports))
    assert [(s.node, s.address, s.port, s.side_channel_port, s.cores) for s in placed] == [
        (None, "127.0.0.1", 7000, 7001, [[0]]), (None, "127.0.0.1", 7002, 7003, [[1]])]


def test_node_facts_probe_and_parse():
    argv = probe_argv("/py", ["n0", "n1"], 4)
    assert argv[:2] == ["srun", "--overlap"] and "--nodelist=n0,n1" in argv and "--ntasks-per-node=1" in argv
    out = "srun: warning\n" + "\n".join(json.dumps(_facts(h, a, "b", [0], [1, 2]).__dict__)
                                        for h, a in (("n0", "10.0.0.10"), ("n1", "10.0.0.11")))
    facts = parse_facts(out)
    assert facts["n1"].address == "10.0.0.11" and facts["n0"].ports == [1, 2]
    assert not node_address().startswith("127.")  # this machine has a non-loopback interface


def test_injected_fault_gives_only_the_decode_servers_another_draft(compose):
    (job,) = make_plan(*with_engine(compose("topology=disagg", "draft=tiny_identical",
                               "topology.decode_draft_model=/models/other-draft"))).jobs

    def draft(argv):
        return json.loads(argv[argv.index("--speculative-config") + 1])["model"]

    decode, prefill = (job.server_argv("h", 1, disagg_role=r, engine=get_engine(job.engine)) for r in ("decode", "prefill"))
    assert draft(decode) == "/models/other-draft" and argv_count(decode, "--speculative-config") == 1
    assert draft(prefill) == draft(job.server_argv("h", 1, engine=get_engine(job.engine))) != "/models/other-draft"  # prefill and the aggregated reference
    errs = [e.line() for e in validate(*with_engine(compose("topology=disagg", "draft=ngram", "topology.decode_draft_model=/m")))]
    assert any(e.startswith("topology.decode_draft_model: is set but draft.method=ngram") for e in errs), errs


def argv_count(argv, flag):
    return sum(a == flag for a in argv)


def test_ports_for_servers_come_from_below_the_ephemeral_range():
    from launcher.node.node_facts import ephemeral_range, free_ports

    ports = free_ports("127.0.0.1", 6)
    assert len(set(ports)) == 6
    lo = ephemeral_range()[0]
    if lo > 12000:
        assert all(10000 <= p < lo for p in ports), (ports, lo)
