"""KV-transfer figures of a disaggregated point, from an AIPerf server-metrics export
shaped as AIPerf 0.13 writes it (per series: endpoint, labels, stats)."""
from __future__ import annotations

from launcher.bench.aiperf_runner import aiperf_argv, GroupRun
from launcher.bench.kv_transfer import kv_transfer_window, topology_note
from launcher.engines import get_engine

KV_NAMES = get_engine("vllm").kv_transfer_metrics  # the disaggregated servers here are vLLM's

DECODE = "http://127.0.0.1:8200/metrics"


def _counter(name, totals, endpoint=DECODE):
    return {name: {"type": "counter", "series": [
        {"endpoint_url": endpoint, "labels": {"engine": "0", "model_name": "tiny", **labels}, "stats": {"total": t}}
        for labels, t in totals]}}


def _export(external=1730.0, compute=0.0, hits=0.0, transfers=4, seconds=0.8, nbytes=2097152.0, failed=0.0):
    m = _counter("vllm:prompt_tokens_by_source", [({"source": "external_kv_transfer"}, external),
                                                  ({"source": "local_compute"}, compute),
                                                  ({"source": "local_cache_hit"}, hits)])
    m["vllm:nixl_xfer_time_seconds"] = {"type": "histogram", "series": [
        {"endpoint_url": DECODE, "labels": {}, "stats": {"count": transfers, "sum": seconds}}]}
    m["vllm:nixl_bytes_transferred"] = {"type": "histogram", "series": [
        {"endpoint_url": DECODE, "labels": {}, "stats": {"count": transfers, "sum": nbytes}}]}
    m.update(_counter("vllm:nixl_num_failed_transfers", [({}, failed)]))
    return m


def test_every_prompt_token_transferred():
    w = kv_transfer_window(_export(), endpoints=[DECODE], names=KV_NAMES)
    assert w["external_kv_transfer_tokens"] == 1730 and w["prompt_tokens"] == 1730
    assert (w["transfers"], w["bytes"], w["mean_transfer_ms"]) == (4, 2097152, 200.0)
    assert w["every_prompt_transferred"] is True


def test_a_prompt_computed_or_cached_on_decode_is_not_a_transfer():
    assert kv_transfer_window(_export(compute=17.0), names=KV_NAMES)["every_prompt_transferred"] is False
    # the measurement: a repeated prompt served from decode's own prefix cache
    assert kv_transfer_window(_export(external=194.0, hits=1536.0), names=KV_NAMES)["every_prompt_transferred"] is False
    assert kv_transfer_window(_export(failed=1.0), names=KV_NAMES)["every_prompt_transferred"] is False


def test_other_endpoints_and_a_plain_server_count_nothing():
    m = _export()
    m["vllm:prompt_tokens_by_source"]["series"].append(
        {"endpoint_url": "http://127.0.0.1:9000/metrics", "labels": {"source": "local_compute"}, "stats": {"total": 99}})
    assert kv_transfer_window(m, endpoints=[DECODE], names=KV_NAMES)["local_compute_tokens"] == 0
    assert kv_transfer_window({}, names=KV_NAMES) is None


def test_topology_note_states_the_prefix_cache_control():
    n = topology_note({"kind": "disagg", "prefill": 1, "decode": 1, "decode_prefix_caching": False})
    assert n["prefix_cache_control"].startswith("prefix caching off on the decode servers")


def test_aiperf_scrapes_the_decode_servers(tmp_path):
    run = GroupRun("mtbench", 0.0, [1], tmp_path / "in.jsonl", 2, tmp_path / "a")
    argv = aiperf_argv("aiperf", model="tiny", url="http://r:1", tokenizer="t", run=run, request_timeout_s=60,
                       server_metrics=(DECODE,))
    i = argv.index("--server-metrics")
    assert argv[i + 1] == DECODE
    assert "--server-metrics" not in aiperf_argv("aiperf", model="tiny", url="http://r:1", tokenizer="t", run=run,
                                                 request_timeout_s=60)


def test_the_multiphase_config_scrapes_the_decode_servers(tmp_path):
    from launcher.bench.aiperf_runner import PhasePlan, multiphase_config

    kw = dict(model="tiny", url="http://r:1", tokenizer="t", input_file=tmp_path / "i.jsonl", artifact_dir=tmp_path,
              phases=[PhasePlan("p1_c1", 1, 2)], request_timeout_s=60)
    assert multiphase_config(**kw, server_metrics=(DECODE,))["benchmark"]["serverMetrics"] == {
        "enabled": True, "formats": ["json", "jsonl"], "urls": [DECODE]}
    # without more endpoints AIPerf scrapes the URL's own /metrics; every scrape is written with its time
    assert multiphase_config(**kw)["benchmark"]["serverMetrics"] == {"enabled": True, "formats": ["json", "jsonl"]}


def test_a_window_is_checked_against_the_prompt_tokens_its_point_sent():
    """The fresh-clone failure of 2026-12-07: a C=1 point sent 4 requests of 215 + 304 + 194 + 301 =
    1,014 prompt tokens, its decode window counted 3 transfers and 713 tokens (the last request's
    counters appeared after the next point began). The window says it does not cover the point,
    and whether every prompt was transferred is then unknown, not true."""
    lagged = kv_transfer_window(_export(external=713.0, transfers=3), names=KV_NAMES, point_prompt_tokens=1014)
    assert lagged["covers_the_point"] is False and lagged["every_prompt_transferred"] is None
    assert (lagged["prompt_tokens"], lagged["point_prompt_tokens"]) == (713, 1014)
    whole = kv_transfer_window(_export(external=1014.0), names=KV_NAMES, point_prompt_tokens=1014)
    assert whole["covers_the_point"] is True and whole["every_prompt_transferred"] is True
    # a covered window still says when decode computed a prompt itself
    computed = kv_transfer_window(_export(external=997.0, compute=17.0), names=KV_NAMES, point_prompt_tokens=1014)
    assert computed["covers_the_point"] is True and computed["every_prompt_transferred"] is False
    assert "covers_the_point" not in kv_transfer_window(_export(), names=KV_NAMES)  # no usage: no check


def test_a_point_records_the_prompt_tokens_of_its_requests():
    from launcher.bench.point_files import _prompt_tokens
    from launcher.results.records import parse_record
    rec = lambda n, usage: parse_record({"metadata": {"conversation_id": "81", "turn_index": n},  # noqa: E731
                                         "metrics": ({"usage_prompt_tokens": {"value": usage, "unit": "tokens"}}
                                                     if usage is not None else {})}, f"x:{n}")
    assert _prompt_tokens([rec(0, 215), rec(1, 304)]) == 519
    assert _prompt_tokens([rec(0, 215), rec(1, None)]) is None


def test_a_window_whose_transfer_count_lagged_its_prompt_tokens_says_so():
    """The fresh-clone failure of 2026-12-07 (a loaded 2-core machine): every prompt token of the
    point's 4 requests counted (1,014), but 3 transfers. Every prompt came by transfer (the tokens
    say so), but the transfer count, bytes and times are not the point's own."""
    late = kv_transfer_window(_export(external=1014.0, transfers=3), names=KV_NAMES, point_prompt_tokens=1014,
                              point_requests=4)
    assert late["covers_the_point"] is True and late["every_prompt_transferred"] is True
    assert late["transfers_cover_the_point"] is False and late["point_requests"] == 4
    whole = kv_transfer_window(_export(external=1014.0, transfers=4), names=KV_NAMES, point_prompt_tokens=1014,
                               point_requests=4)
    assert whole["transfers_cover_the_point"] is True
    # no count to expect where some prompt was not transferred, or where that is unknown
    computed = kv_transfer_window(_export(external=997.0, compute=17.0, transfers=3), names=KV_NAMES,
                                  point_prompt_tokens=1014, point_requests=4)
    assert computed["transfers_cover_the_point"] is None
    lagged = kv_transfer_window(_export(external=713.0, transfers=3), names=KV_NAMES, point_prompt_tokens=1014,
                                point_requests=4)
    assert lagged["transfers_cover_the_point"] is None
