"""What the launcher assumes of SGLang 0.5.17, checked against a real server's replies.

The fixtures were recorded on an H100 (tests/data/h100_sglang0517_*/PROVENANCE.md):
``h100_sglang0517_capture`` holds one server's /server_info, /v1/models, /metrics and
two chat completions; ``h100_sglang0517_forced`` and ``h100_sglang0517_known_answer``
are the product's own result folders of two jobs run against SGLang there. Each test
reads them with the product's own parsers (launcher/bench/metrics.py,
launcher/bench/stream_chunks.py, launcher/engines/sglang.py).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from launcher.bench.aiperf_runner import prometheus_window
from launcher.bench.metrics import parse_prometheus_text
from launcher.bench.stream_chunks import _event_usage, chunks_from_usage, read_raw_chunks, record_chunks, \
    stats_from_chunks
from launcher.engines import get_engine
from launcher.engines.sglang import ACCEPT_LENGTH_GAUGE, ACCEPT_RATE_GAUGE, SGLang
from launcher.engines.types import ServingOptions

DATA = Path(__file__).resolve().parents[1] / "data"
CAPTURE = DATA / "h100_sglang0517_capture"
FORCED = DATA / "h100_sglang0517_forced"
KNOWN = DATA / "h100_sglang0517_known_answer"
FORCED_C1 = FORCED / "mtbench" / "t0_c1"
SGL = SGLang()
SAMPLE = re.compile(r'^(?P<name>[^{\s]+)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)')


def samples(text: str) -> list[tuple[str, dict, float]]:
    """(name, labels, value) of every sample line, read apart from the product's parser."""
    out = []
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m and not line.startswith("#"):
            out.append((m["name"], dict(re.findall(r'(\w+)="([^"]*)"', m["labels"] or "")), float(m["value"])))
    return out


def sse_values(text: str) -> list[str]:
    return [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]


def raw_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def acceptance_ext(point: Path) -> dict:
    doc = json.loads((point / "acceptance_rate.json").read_text())
    return (doc[0] if isinstance(doc, list) else doc)["specdec_launcher"]


@pytest.fixture(scope="module")
def metrics_text() -> str:
    return (CAPTURE / "metrics.txt").read_text()


# ------------------------------------------------------------------------------------------ /metrics
def test_the_counters_parse_summed_over_their_label_sets(metrics_text):
    parsed = parse_prometheus_text(metrics_text)
    rows = samples(metrics_text)

    def by_label(name):
        return {tuple(sorted(lab.items())): v for n, lab, v in rows if n == name}

    gen, req = by_label("sglang:generation_tokens_total"), by_label("sglang:num_requests_total")
    assert len(gen) == 2 and len(req) == 2  # is_streaming "true" and "false"
    assert parsed["sglang:spec_verify_calls_total"] == 76
    assert parsed["sglang:generation_tokens_total"] == sum(gen.values()) == 104
    assert parsed["sglang:num_requests_total"] == sum(req.values()) == 3
    # the server's own histogram of the same requests agrees with the summed counters
    assert parsed["sglang:generation_tokens_histogram_sum"] == parsed["sglang:generation_tokens_total"]
    assert parsed["sglang:generation_tokens_histogram_count"] == parsed["sglang:num_requests_total"]


def test_the_label_sets_are_those_the_launcher_reads(metrics_text):
    labels = {}
    for name, lab, _ in samples(metrics_text):
        labels.setdefault(name, set()).add(tuple(sorted(lab)))
    assert labels["sglang:spec_verify_calls_total"] == {("engine_type", "model_name")}
    for name in ("sglang:generation_tokens_total", "sglang:num_requests_total"):
        assert labels[name] == {("engine_type", "is_streaming", "model_name")}
        assert {lab["is_streaming"] for n, lab, _ in samples(metrics_text) if n == name} == {"true", "false"}
    gauge_labels = {("engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank")}
    for name in (ACCEPT_LENGTH_GAUGE, ACCEPT_RATE_GAUGE, "sglang:spec_num_steps", "sglang:spec_num_draft_tokens"):
        assert labels[name] == gauge_labels, name
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", metrics_text, re.M))
    assert types[ACCEPT_LENGTH_GAUGE] == types[ACCEPT_RATE_GAUGE] == "gauge"  # never differenced
    for counter in ("sglang:spec_verify_calls_total", "sglang:generation_tokens_total", "sglang:num_requests_total"):
        assert types[counter] == "counter"


def test_the_engines_metric_names_exist_and_give_an_al_within_k_plus_1(metrics_text):
    parsed = parse_prometheus_text(metrics_text)
    names = get_engine("sglang").metrics
    assert names.accepted is None  # no counter of accepted drafts: derived
    for n in (names.drafts, names.emitted_tokens, names.finished_requests):
        assert n + "_total" in parsed, n
    accepted = names.accepted_from(lambda n: parsed.get(n + "_total"))
    assert accepted == parsed["sglang:generation_tokens_total"] - parsed["sglang:num_requests_total"] \
        - parsed["sglang:spec_verify_calls_total"]
    k = int(parsed["sglang:spec_num_steps"])
    al = 1 + accepted / parsed[names.drafts + "_total"]
    assert 0 <= accepted and 1.0 <= al <= k + 1
    # the gauge is the last logged batch's, not the server's whole life: it need not agree
    assert 1.0 <= parsed[ACCEPT_LENGTH_GAUGE] <= k + 1


# ------------------------------------------------------------------------------------------ the stream
def test_the_captured_stream_asked_with_include_usage_only_has_usage_on_its_last_event():
    values = sse_values((CAPTURE / "stream.txt").read_text())
    assert values[-1] == "[DONE]"
    events = [_event_usage(v) for v in values]
    tokens = [t for t, _, _ in events]
    assert all(t is None for t in tokens[:-2]) and tokens[-2] == 48  # [DONE] last: no usage
    assert events[-2][1] is False  # the usage event has no choices
    assert [f for _, _, f in events if f] == ["length"]
    assert chunks_from_usage(tokens) == [48]  # one "chunk": nothing to count acceptance from
    first, finish = json.loads(values[0]), json.loads(values[-3])
    assert first["choices"][0]["delta"] == {"reasoning_content": None, "role": "assistant", "content": ""}
    assert "usage" not in first and "content" not in finish["choices"][0]["delta"]
    # as an AIPerf raw record, the product refuses it: no usage on a content event
    rec = {"metadata": {"conversation_id": "0", "turn_index": 0, "benchmark_phase": "profiling"},
           "responses": [{"packets": [{"name": "data", "value": v}]} for v in values]}
    assert record_chunks(rec) == ([48], "length", False)


def test_the_forced_run_streamed_merged_chunks_and_the_counters_saw_every_step():
    raw = FORCED_C1 / "aiperf" / "profile_export_raw.jsonl"
    chunks = read_raw_chunks(raw)
    first = raw_records(raw)[0]["metadata"]
    key = (first["conversation_id"].split("@")[0], int(first["turn_index"]))
    assert chunks[key] == [1, 63]  # the prefill token, then 63 tokens as one chunk
    assert {tuple(c) for c in chunks.values()} <= {(1, 63), (64,)}
    st = stats_from_chunks(chunks[key], 3)
    assert st["chunks_over_k_plus_1"] == 1 and st["mean_acceptance_length"] == 63.0
    decode_chunks = sum(len(c) - 1 for c in chunks.values())
    # the server's own counters over the point (AIPerf's export) counted every verify step
    w = prometheus_window(FORCED_C1 / "aiperf", SGL.metrics)
    turns = len(chunks)
    tokens = sum(sum(c) for c in chunks.values())
    assert w["num_accepted_tokens"] == tokens - turns - w["num_drafts"]
    assert w["num_drafts"] > 20 * decode_chunks  # 1624 verify steps against 61 decode chunks
    assert 2.4 < 1 + w["num_accepted_tokens"] / w["num_drafts"] < 2.7  # the log's "accept len" 2.45-2.60
    export = json.loads((FORCED_C1 / "aiperf" / "server_metrics_export.json").read_text())["metrics"]
    finished = sum(s["stats"]["total"] for s in export[SGL.metrics.finished_requests]["series"])
    assert finished == turns  # the counters moved once per finished request of the point
    # what the product recorded for this point (at dbeee38) is what its parsers read from the files
    ext = acceptance_ext(FORCED_C1)
    assert ext["num_spec_steps"] == decode_chunks and ext["chunks_over_k_plus_1"] == decode_chunks
    assert (ext["prometheus_window"]["num_drafts"], ext["prometheus_window"]["num_accepted_tokens"]) == \
        (w["num_drafts"], w["num_accepted_tokens"])


def test_the_forced_runs_chunk_events_are_shaped_as_the_capture():
    rec = raw_records(FORCED_C1 / "aiperf" / "profile_export_raw.jsonl")[0]
    values = [p["value"] for r in rec["responses"] for p in r["packets"] if p["name"] == "data"]
    events = [json.loads(v) for v in values[:-1]]
    assert values[-1] == "[DONE]"
    role, content, finish, last = events[0], events[1:-2], events[-2], events[-1]
    assert role["choices"][0]["delta"].get("role") == "assistant" and "usage" not in role
    assert all("usage" in e and e["choices"][0]["finish_reason"] is None for e in content)
    assert finish["choices"][0]["finish_reason"] == "length" and "usage" not in finish
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 64
    capture = [json.loads(v) for v in sse_values((CAPTURE / "stream.txt").read_text())[:-1]]
    for got, want in ((role, capture[0]), (finish, capture[-2]), (last, capture[-1])):
        assert list(got) == list(want) and list(got["choices"][0] if got["choices"] else {}) == \
            list(want["choices"][0] if want["choices"] else {})
    assert list(last["usage"]) == list(capture[-1]["usage"]) == list(content[0]["usage"])


def test_the_known_answer_runs_stream_also_has_fewer_chunks_than_verify_steps():
    point = KNOWN / "mtbench" / "t0_c1"
    ext = acceptance_ext(point)
    w = prometheus_window(point / "aiperf", SGL.metrics)
    assert (ext["prometheus_window"]["num_drafts"], ext["prometheus_window"]["num_accepted_tokens"]) == \
        (w["num_drafts"], w["num_accepted_tokens"])
    # no forced acceptance here, and still chunks above k + 1: the stream merged steps
    assert ext["chunks_over_k_plus_1"] > 0 and w["num_drafts"] > ext["num_spec_steps"]
    ka = json.loads((KNOWN / "known_answer.json").read_text())
    assert ka["engine"]["version"] == "0.5.17"
    for t in ka["temperatures"]:
        assert t["server_al"] == pytest.approx(1 + t["server_accepted"] / t["server_drafts"], abs=1e-4)


# ------------------------------------------------------------------------------------------ replies
def test_the_non_streamed_reply_carries_no_per_request_stats():
    reply = json.loads((CAPTURE / "nonstream.json").read_text())
    assert SGL.request_stats(reply) is None  # no meta_info without return_meta_info
    assert reply["usage"]["completion_tokens"] == 48 and reply["choices"][0]["finish_reason"] == "length"
    stream_usage = json.loads(sse_values((CAPTURE / "stream.txt").read_text())[-2])["usage"]
    assert list(reply["usage"]) == list(stream_usage)


def test_the_version_and_the_served_name_come_from_the_recorded_endpoints():
    body = (CAPTURE / "server_info.json").read_bytes()
    assert SGL.version_path == "/server_info"
    version = SGL.version_from_response(body)
    assert version == "0.5.17" and SGL.capabilities(version).version_known
    info = json.loads(body)
    ids = [m.get("id") for m in json.loads((CAPTURE / "models.json").read_text())["data"]]
    assert ids == [info["served_model_name"]]  # what the readiness probe looks for


def test_every_flag_the_launcher_renders_is_a_server_argument_of_0_5_17():
    info = json.loads((CAPTURE / "server_info.json").read_text())  # ServerArgs' fields, as the server has them
    opts = ServingOptions(served_name="s", tokenizer="/t", tp=2, pp=2, dp=2, ep=2, max_model_len=1024,
                          max_num_batched_tokens=512, dtype="bfloat16", gpu_memory_utilization=0.5,
                          enforce_eager=True)
    spec = SGL.speculative_flags({"method": "eagle3", "model": "/d", "num_speculative_tokens": 3,
                                  "use_rejection_sampling": True})
    ngram = SGL.speculative_flags({"method": "ngram", "num_speculative_tokens": 4})
    argv = SGL.server_argv("python3 -m sglang.launch_server", "/m", SGL.serving_flags(opts) + spec + ngram
                           + SGL.acceptance_flags(None) + SGL.multinode_flags(1, 2, "h", 5000, 2, 1, 1, 8), "h", 1)
    ready = json.loads((FORCED / "server_ready.json").read_text())["argv"]  # what the product ran there
    flags = {a for a in argv + ready if a.startswith("--")}
    assert len(flags) > 20
    missing = sorted(f for f in flags if f[2:].replace("-", "_") not in info)
    assert missing == []
    # the captured server ran the product's k = 3 chain for STANDALONE
    f = SGL.speculative_flags({"method": "draft_model", "model": "/d", "num_speculative_tokens": 3})
    got = {a[2:].replace("-", "_"): f[i + 1] for i, a in enumerate(f)
           if a.startswith("--") and a != "--speculative-draft-model-path"}
    assert {k: str(info[k]) for k in got} == got
