"""Each disaggregated server's prefix cache over a point, from an AIPerf server-metrics
export shaped as AIPerf 0.13 writes it (per series: endpoint, labels, stats)."""
from __future__ import annotations

import json

from launcher.bench import aiperf_runner as ar
from launcher.bench.prefix_cache import one_line, prefix_cache_window, scrape_urls
from launcher.engines import get_engine

VLLM = get_engine("vllm")  # the servers of these exports are vLLM's
KV_NAMES = VLLM.kv_transfer_metrics

P0, P1, D0 = "http://127.0.0.1:8100", "http://127.0.0.1:8101", "http://127.0.0.1:8200"
TOPOLOGY = {"servers": [{"role": "prefill0", "url": P0}, {"role": "prefill1", "url": P1},
                        {"role": "decode0", "url": D0}], "router_policy": "cache_aware"}


def _series(name, per_endpoint):
    return {name: {"type": "counter", "series": [
        {"endpoint_url": ep + "/metrics", "labels": {"engine": "0"}, "stats": {"total": t}}
        for ep, t in per_endpoint.items()]}}


def _export(queries, hits):
    return {**_series("vllm:prefix_cache_queries", queries), **_series("vllm:prefix_cache_hits", hits)}


def test_hits_per_server_and_the_prefill_totals():
    w = prefix_cache_window(_export({P0: 300.0, P1: 260.0, D0: 0.0}, {P0: 128.0, P1: 64.0, D0: 0.0}),
                            TOPOLOGY, router_policy="cache_aware", names=KV_NAMES)
    assert [(s["server"], s["queries"], s["hits"]) for s in w["servers"]] == [
        ("prefill0", 300, 128), ("prefill1", 260, 64), ("decode0", 0, 0)]
    assert (w["prefill_queries"], w["prefill_hits"], w["prefill_hit_rate"]) == (560, 192, round(192 / 560, 4))
    assert w["servers"][2]["hit_rate"] is None and w["router_policy"] == "cache_aware"
    assert one_line(w) == "prefill0 128/300, prefill1 64/260 (cache_aware)"


def test_no_counters_no_window():
    assert prefix_cache_window({}, TOPOLOGY, names=KV_NAMES) is None
    assert prefix_cache_window(_export({P0: 1.0}, {P0: 1.0}), None, names=KV_NAMES) is None
    assert one_line(None) == "-"
    # a server whose counters were not scraped is left out, not counted as zero hits
    w = prefix_cache_window(_export({P0: 100.0}, {P0: 32.0}), TOPOLOGY, names=KV_NAMES)
    assert [s["server"] for s in w["servers"]] == ["prefill0"]


def test_aiperf_scrapes_decode_first_then_every_prefill_server():
    assert scrape_urls([D0 + "/metrics"], TOPOLOGY) == [D0 + "/metrics", P0 + "/metrics", P1 + "/metrics"]
    assert scrape_urls([], None) == []


def test_acceptance_counters_are_the_decode_servers_only(tmp_path):
    """A prefill server also speculates (its one token); the Prometheus AL reads decode only."""
    m = {**_series("vllm:spec_decode_num_drafts", {D0: 40.0, P0: 7.0}),
         **_series("vllm:spec_decode_num_accepted_tokens", {D0: 60.0, P0: 3.0})}
    (tmp_path / "server_metrics_export.json").write_text(json.dumps({"metrics": m}))
    w = ar.prometheus_window(tmp_path, VLLM.metrics, endpoints=[D0 + "/metrics"])
    assert (w["num_drafts"], w["num_accepted_tokens"]) == (40.0, 60.0)
    w = ar.prometheus_window(tmp_path, VLLM.metrics)  # aggregated: one server, every series
    assert (w["num_drafts"], w["num_accepted_tokens"]) == (47.0, 63.0)
