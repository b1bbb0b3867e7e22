"""Hand-computed cases for launcher.bench.metrics."""

import json
import math
from fractions import Fraction

import pytest

from launcher.bench.metrics import (
    RecordError, acceptance_rate, al_gap_prediction, parse_prometheus_text, parse_records,
    prometheus_al, read_profile_export, stats, timing,
)


def rec(cid, turn, hist=None, *, k=3, steps=None, accepted=None, drafted=None, osl=10,
        phase="profiling", error=None, cancelled=False, spec=True, list_hist=False,
        start_ns=0, latency_ms=100.0, ttft_ms=10.0, end_ns=None):
    """An AIPerf 0.13 profile_export.jsonl record (the shape seen in the recorded export)."""
    hist = hist or {}
    r = {
        "metadata": {
            "conversation_id": cid, "turn_index": turn, "benchmark_phase": phase,
            "was_cancelled": cancelled, "request_start_ns": start_ns,
            "request_end_ns": end_ns if end_ns is not None else start_ns + int(latency_ms * 1e6),
        },
        "metrics": {
            "output_sequence_length": {"value": osl, "unit": "tokens"},
            "time_to_first_token": {"value": ttft_ms, "unit": "ms"},
            "request_latency": {"value": latency_ms, "unit": "ms"},
        },
        "error": error,
    }
    if spec:
        s = sum(hist.values()) if steps is None else steps
        a = sum(j * n for j, n in hist.items()) if accepted is None else accepted
        r["spec_decode_acceptance"] = {
            "engine": "vllm",
            "acceptance_histogram": ([hist.get(j, 0) for j in range(k + 1)] if list_hist
                                     else {str(j): n for j, n in hist.items() if n}),
            "num_spec_steps": s, "num_accepted_draft_tokens": a,
            "num_draft_tokens": k * s if drafted is None else drafted,
            "num_spec_tokens": k,
        }
    return r


# Conversation a: turn 0 steps accepting 1 and 2 drafts (S=2, A=3: 3 chunks,
# 6 tokens); turn 1 steps accepting 0, 0, 3 (S=3, A=3: 4 chunks, 7 tokens).
# Conversation b: turn 0 two steps accepting 3 (S=2, A=6: 3 chunks, 9 tokens);
# turn 1 produced one token (S=0: 1 chunk, 1 token).
def base_records():
    return [
        rec("a", 0, {1: 1, 2: 1}),
        rec("b", 0, {3: 2}),
        rec("a", 1, {0: 2, 3: 1}),
        rec("b", 1, {}, osl=1),
    ]


def test_acceptance_rate_hand_computed():
    out = acceptance_rate(base_records(), {"a": "writing", "b": "math"})
    assert out["Request_AL"] == {"a": pytest.approx(13 / 7), "b": pytest.approx(10 / 4)}
    assert out["Average_AL"] == pytest.approx((13 / 7 + 2.5) / 2)  # 61/28
    assert out["Category_AL"] == {"writing": pytest.approx(13 / 7), "math": pytest.approx(2.5)}
    # Chunk lengths: 4 prefill chunks + two steps of L=1, one each of L=2, L=3,
    # three of L=4.
    assert out["Acceptance_Length_Histogram"] == {"1": 6, "2": 1, "3": 1, "4": 3}
    assert out["Joint_Acceptance_Rate"] == {
        "2": pytest.approx(5 / 11), "3": pytest.approx(4 / 11), "4": pytest.approx(3 / 11)}
    assert out["Conditional_Acceptance_Rate"] == {
        "2": pytest.approx(5 / 11), "3": pytest.approx(4 / 5), "4": pytest.approx(3 / 4)}
    assert out["Server_AL"] == pytest.approx(1 + 12 / 7)
    assert out["Prometheus_AL"] is None
    assert (out["num_requests"], out["num_turns"], out["num_spec_steps"],
            out["num_accepted_draft_tokens"], out["num_draft_tokens"]) == (2, 4, 7, 12, 21)
    assert out["speculative"] is True
    # Category per request mean, not pooled: two requests in one category.
    both = acceptance_rate(base_records(), {"a": "x", "b": "x"})
    assert both["Category_AL"] == {"x": pytest.approx((13 / 7 + 2.5) / 2)}
    assert acceptance_rate(base_records())["Category_AL"] == {}


def test_dense_list_histogram_gives_the_same_result():
    dense = [rec("a", 0, {1: 1, 2: 1}, list_hist=True), rec("a", 1, {0: 2, 3: 1}, list_hist=True)]
    sparse = [rec("a", 0, {1: 1, 2: 1}), rec("a", 1, {0: 2, 3: 1})]
    assert acceptance_rate(dense) == acceptance_rate(sparse)
    assert acceptance_rate(dense)["Request_AL"] == {"a": pytest.approx(13 / 7)}


def test_histogram_keeps_zero_lengths_in_between():
    out = acceptance_rate([rec("a", 0, {3: 1})])
    assert out["Acceptance_Length_Histogram"] == {"1": 1, "2": 0, "3": 0, "4": 1}
    assert out["Conditional_Acceptance_Rate"] == {"2": 0.5, "3": 1.0, "4": 1.0}
    assert out["Joint_Acceptance_Rate"] == {"2": 0.5, "3": 0.5, "4": 0.5}


def test_warmup_failed_and_cancelled_are_left_out():
    noisy = base_records() + [
        rec("a", 2, {3: 9}, phase="warmup"),
        rec("b", 2, {3: 9}, error={"code": 500, "type": "x", "message": "boom"}, spec=False),
        rec("a", 3, {3: 9}, cancelled=True),
        # A failed record's stats are not checked (they are not used).
        rec("c", 0, {3: 1}, steps=99, error={"type": "x"}),
    ]
    assert acceptance_rate(noisy) == acceptance_rate(base_records())
    t = timing(noisy)
    assert t["failed_requests"] == 3 and t["num_requests"] == 4


def test_zero_step_turn_without_stats_is_one_chunk():
    # vLLM sends stats with 0 steps for a 1-token turn; tolerate their absence too.
    with_stats = acceptance_rate([rec("a", 0, {2: 1}), rec("a", 1, {}, osl=1)])
    without = acceptance_rate([rec("a", 0, {2: 1}), rec("a", 1, spec=False, osl=1)])
    assert with_stats["Request_AL"] == without["Request_AL"] == {"a": pytest.approx(5 / 3)}


def test_missing_stats_on_a_speculative_run_is_an_error():
    records = [rec("a", 0, {1: 1}), rec("q7", 1, spec=False, osl=5)]
    with pytest.raises(RecordError, match=r"<records>:2 \(conversation q7, turn 1\): no spec_decode_acceptance"):
        acceptance_rate(records)


def test_baseline_without_speculation():
    out = acceptance_rate([rec("a", 0, spec=False), rec("b", 0, spec=False)],
                          {"a": "w", "b": "m"}, speculative=False)
    assert out["Request_AL"] == {"a": 1.0, "b": 1.0}
    assert out["Average_AL"] == 1.0 and out["Category_AL"] == {"w": 1.0, "m": 1.0}
    assert out["Server_AL"] is None and out["Acceptance_Length_Histogram"] is None
    assert out["speculative"] is False and out["num_turns"] == 2


def test_repeated_turn_is_an_error():
    records = base_records() + [rec("a", 1, {1: 1})]
    with pytest.raises(RecordError, match=r"<records>:5 \(conversation a, turn 1\): this turn was already "
                                          r"recorded at <records>:3"):
        acceptance_rate(records)
    with pytest.raises(RecordError, match="profiling_index"):
        timing(records)


def test_unknown_conversation_for_category_map():
    with pytest.raises(RecordError, match="conversation 'b' is not a question of the dataset"):
        acceptance_rate(base_records(), {"a": "writing"})


@pytest.mark.parametrize("patch, message", [
    ({"num_spec_steps": 5}, "histogram counts sum to 2 but num_spec_steps is 5"),
    ({"num_accepted_draft_tokens": 4}, "histogram implies 3 accepted drafts but num_accepted_draft_tokens is 4"),
    ({"num_draft_tokens": 2}, "num_accepted_draft_tokens 3 > num_draft_tokens 2"),
    ({"num_draft_tokens": 7}, r"num_draft_tokens 7 > num_spec_steps\*num_spec_tokens 6"),
    ({"num_spec_steps": -2}, "num_spec_steps must be a non-negative integer, got -2"),
    ({"num_spec_steps": "2"}, "num_spec_steps must be a non-negative integer, got '2'"),
    ({"num_spec_steps": True}, "num_spec_steps must be a non-negative integer, got True"),
    ({"acceptance_histogram": {"1": 1, "x": 1}}, "acceptance_histogram key 'x'"),
    ({"acceptance_histogram": {"1": -1, "2": 3}}, r"acceptance_histogram\[1\] must be a non-negative integer"),
    ({"acceptance_histogram": "1,1"}, "acceptance_histogram must be a list or a map"),
    ({"acceptance_histogram": {"1": 1, "5": 1}, "num_accepted_draft_tokens": 6, "num_draft_tokens": 6},
     "a step accepted 5 drafts but num_spec_tokens is 3"),
])
def test_malformed_stats_name_the_record(patch, message):
    bad = rec("q9", 1, {1: 1, 2: 1})
    bad["spec_decode_acceptance"].update(patch)
    with pytest.raises(RecordError, match=rf"export.jsonl:2 \(conversation q9, turn 1\).*{message}"):
        parse_records([rec("a", 0, {1: 1}), bad], source="export.jsonl")


def test_missing_stats_field_and_metadata():
    bad = rec("a", 0, {1: 1})
    del bad["spec_decode_acceptance"]["num_spec_steps"]
    with pytest.raises(RecordError, match=r"<records>:1 .*has no 'num_spec_steps'"):
        acceptance_rate([bad])
    with pytest.raises(RecordError, match=r"<records>:1: no 'metadata'"):
        acceptance_rate([{"metrics": {}}])


def test_read_profile_export_bad_json_names_line(tmp_path):
    path = tmp_path / "profile_export.jsonl"
    path.write_text(json.dumps(rec("a", 0, {1: 1})) + "\n\n" + '{"metadata": \n')
    with pytest.raises(RecordError, match=rf"{path}:3: invalid JSON"):
        read_profile_export(path)
    path.write_text(json.dumps(rec("a", 0, {1: 1})) + "\n")
    assert read_profile_export(path)[0].where == f"{path}:1"


def test_al_gap_decomposition_is_exact():
    gap = al_gap_prediction(base_records(), exact=True)
    # T=4 turns, S=7 steps, A=12 accepted.
    assert gap["Server_AL"] == Fraction(19, 7)
    assert gap["pooled_chunk_al"] == Fraction(23, 11)
    assert gap["Average_AL"] == Fraction(61, 28)
    assert gap["prefill_effect"] == Fraction(48, 77)
    assert gap["averaging_effect"] == Fraction(-27, 308)
    assert gap["Server_AL"] - gap["Average_AL"] == gap["prefill_effect"] + gap["averaging_effect"]
    assert gap["total_gap"] == Fraction(15, 28)
    floats = al_gap_prediction(base_records())
    ar = acceptance_rate(base_records())
    assert floats["Server_AL"] == pytest.approx(ar["Server_AL"])
    assert floats["Average_AL"] == pytest.approx(ar["Average_AL"])
    assert (floats["num_turns"], floats["num_spec_steps"]) == (4, 7)


def test_al_gap_needs_steps():
    with pytest.raises(RecordError, match="no verify steps"):
        al_gap_prediction([rec("a", 0, {}, osl=1)])


# ------------------------------------------------------------------ timing

def timing_records():
    return [
        # start 1.0 s, last response 1.5 s; 40 tokens after the first in 0.4 s
        rec("a", 0, spec=False, start_ns=1_000_000_000, latency_ms=500.0, ttft_ms=100.0, osl=41),
        # start 1.2 s, last response 2.2 s; 160 tokens in 0.8 s. request_end_ns
        # is 5 ms later (trailing usage chunk): the window ends at 2.2 s.
        rec("a", 1, spec=False, start_ns=1_200_000_000, latency_ms=1000.0, ttft_ms=200.0, osl=161,
            end_ns=2_205_000_000),
        # one token: no generation rate
        rec("b", 0, spec=False, start_ns=1_500_000_000, latency_ms=300.0, ttft_ms=300.0, osl=1),
        # failed, earlier: outside the window
        rec("c", 0, spec=False, start_ns=500_000_000, error={"type": "x"}, osl=0),
        # warmup, earlier: ignored
        rec("d", 0, spec=False, start_ns=100_000_000, phase="warmup", osl=99),
    ]


def test_timing_hand_computed():
    t = timing(timing_records(), num_gpus=4)
    assert t["total_output_tokens"] == 203
    assert t["duration_s"] == pytest.approx(1.2)
    assert t["Output TPS"] == pytest.approx(203 / 1.2)
    assert t["Output TPS/gpu"] == pytest.approx(203 / 1.2 / 4)
    assert (t["num_gpus"], t["num_requests"], t["failed_requests"]) == (4, 3, 1)
    assert t["TTFT Time"] == {
        "min": 100.0, "max": 300.0, "mean": 200.0, "std": pytest.approx(math.sqrt(20000 / 3)),
        "p25": 150.0, "p50": 200.0, "p75": 250.0, "count": 3}
    assert t["E2E Request Time"] == {
        "min": 300.0, "max": 1000.0, "mean": 600.0, "std": pytest.approx(math.sqrt(260000 / 3)),
        "p25": 400.0, "p50": 500.0, "p75": 750.0, "count": 3}
    gen = t["Request Generation Tokens Per Second"]
    assert (gen["min"], gen["max"], gen["count"]) == (pytest.approx(100.0), pytest.approx(200.0), 2)


def test_timing_units_converted_to_ms():
    r = rec("a", 0, spec=False, start_ns=0, latency_ms=0.5, ttft_ms=0.1, osl=5)
    r["metrics"]["time_to_first_token"] = {"value": 100_000_000, "unit": "ns"}
    r["metrics"]["request_latency"] = {"value": 0.5, "unit": "s"}
    t = timing([r])
    assert t["TTFT Time"]["mean"] == pytest.approx(100.0)
    assert t["E2E Request Time"]["mean"] == pytest.approx(500.0)
    assert t["Request Generation Tokens Per Second"]["mean"] == pytest.approx(4 / 0.4)
    r["metrics"]["request_latency"]["unit"] = "tokens"
    with pytest.raises(RecordError, match="not a time unit"):
        timing([r])


def test_timing_empty_and_bad_args():
    t = timing([rec("a", 0, spec=False, error={"type": "x"})])
    assert t["Output TPS"] is None and t["num_requests"] == 0 and t["failed_requests"] == 1
    assert t["TTFT Time"]["count"] == 0 and t["TTFT Time"]["p50"] is None
    with pytest.raises(ValueError, match="num_gpus"):
        timing([], num_gpus=0)


def test_stats_population_std_and_linear_percentiles():
    s = stats([1, 2, 3, 4])
    assert s == {"min": 1.0, "max": 4.0, "mean": 2.5, "std": pytest.approx(math.sqrt(1.25)),
                 "p25": 1.75, "p50": 2.5, "p75": 3.25, "count": 4}


# ------------------------------------------------------------------ Prometheus

PROM = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 196.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="a b}\\"c"} 4.0 1700000000000
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny"} 1.67e2
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 100
process_open_fds 12

"""


def test_parse_prometheus_text_sums_label_sets():
    m = parse_prometheus_text(PROM)
    assert m["vllm:spec_decode_num_drafts_total"] == 200.0
    assert m["vllm:spec_decode_num_accepted_tokens_total"] == 167.0
    assert m["vllm:spec_decode_num_accepted_tokens_per_pos_total"] == 100.0
    assert m["process_open_fds"] == 12.0
    with pytest.raises(ValueError, match="line 2"):
        parse_prometheus_text("ok 1\nbroken{a=\"x\" 1\n")


def test_prometheus_al():
    before = {"vllm:spec_decode_num_accepted_tokens_total": 10.0, "vllm:spec_decode_num_drafts_total": 20.0}
    after = {"vllm:spec_decode_num_accepted_tokens_total": 40.0, "vllm:spec_decode_num_drafts_total": 60.0}
    assert prometheus_al(before, after) == 1.75
    assert prometheus_al({}, after) == 1 + 40 / 60
    assert prometheus_al(before, before) is None           # no drafts in the window
    assert prometheus_al({}, {"process_open_fds": 3}) is None  # no speculative config
    with pytest.raises(ValueError, match="went down"):
        prometheus_al(after, before)


def test_aiperf_past_its_timeout_is_stopped(tmp_path):
    """run_aiperf stops a process that outlives its point timeout, and says so."""
    import sys
    import time

    from launcher.bench.aiperf_runner import run_aiperf

    t = time.time()
    res = run_aiperf([sys.executable, "-c", "import time; print('completed=1', flush=True); time.sleep(60)"],
                     env=None, log_path=tmp_path / "aiperf.log", timeout_s=1.0, on_progress=lambda n: None)
    assert res.timed_out and res.returncode != 0
    assert time.time() - t < 15
    assert "completed=1" in (tmp_path / "aiperf.log").read_text()
