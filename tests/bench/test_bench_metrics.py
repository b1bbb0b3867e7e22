"""Hand-computed cases for launcher.bench.metrics."""

import json
import math

import pytest

from launcher.bench.metrics import (
    RecordError, acceptance_rate, parse_prometheus_text, parse_records, prometheus_al,
    read_profile_export, timing,
)
from launcher.engines import get_engine
from launcher.results import EXTENSION_KEY

# The records here are a vLLM server's: its words for how a server reports per-request acceptance
HINT = get_engine("vllm").acceptance_hint()
NAMES = get_engine("vllm").metrics


def rec(cid, turn, hist=None, *, k=3, steps=None, accepted=None, drafted=None, osl=10,
        phase="profiling", error=None, cancelled=False, spec=True, list_hist=False,
        start_ns=0, latency_ms=100.0, ttft_ms=10.0, end_ns=None, ctok=None, per_step=None,
        max_tokens=None, gaps=None):
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
            "inter_chunk_latency": {"value": list(gaps or []), "unit": "ms"},
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
        if per_step is not None:
            r["spec_decode_acceptance"]["per_step_accepted"] = per_step
    if ctok is None and spec:  # emitted = what the steps made; ended by max_tokens
        ctok = 1 + sum((j + 1) * n for j, n in hist.items()) if hist or osl != 1 else 1
    if ctok is not None:
        r["metrics"]["usage_completion_tokens"] = {"value": ctok, "unit": "tokens"}
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


MAX = 100  # max_tokens of the fake points: a turn shorter than this ended with EOS


def acc(records, ids=("a", "b"), cats=("writing", "math"), dataset="specbench", **kw):
    kw.setdefault("max_tokens", MAX)
    kw.setdefault("acceptance_hint", HINT)
    return acceptance_rate(records, dataset, list(ids), list(cats), **kw)


def test_acceptance_rate_hand_computed():
    # Turns end at max_tokens (no EOS) with exactly the tokens the steps made.
    recs = [rec("a", 0, {1: 1, 2: 1}, ctok=6, max_tokens=6), rec("b", 0, {3: 2}, ctok=9),
            rec("a", 1, {0: 2, 3: 1}, ctok=7), rec("b", 1, {}, osl=1, ctok=1)]
    out = acceptance_rate(recs, "specbench", ["a", "b"], ["writing", "math"], max_tokens=None, acceptance_hint=HINT)
    assert out["Request_AL"] == {"a": pytest.approx(13 / 7), "b": pytest.approx(10 / 4)}
    assert out["Average_AL"] == pytest.approx((13 / 7 + 2.5) / 2)  # 61/28
    assert out["Category_AL"] == {"writing": pytest.approx(13 / 7), "math": pytest.approx(2.5)}
    # specdec_bench's histogram: only the lengths that occur, the prefill chunks included
    assert out["Acceptance_Length_Histogram"] == {1: 6, 2: 1, 3: 1, 4: 3}
    assert out["Conditional_Acceptance_Rate"] == {
        1: 1.0, 2: pytest.approx(5 / 11), 3: pytest.approx(4 / 5), 4: pytest.approx(3 / 4)}
    assert out["Joint_Acceptance_Rate"] == {
        1: 1.0, 2: pytest.approx(5 / 11), 3: pytest.approx(4 / 11), 4: pytest.approx(3 / 11)}
    ext = out[EXTENSION_KEY]
    assert ext["Server_AL"] == pytest.approx(1 + 12 / 7) and ext["Prometheus_AL"] is None
    assert (ext["num_requests"], ext["num_turns"], ext["num_spec_steps"],
            ext["num_accepted_draft_tokens"], ext["num_draft_tokens"]) == (2, 4, 7, 12, 21)
    # no truncation here: the whole gap is the prefill chunks and the per-request averaging
    gap = ext["al_gap"]
    assert gap["truncation_effect"] == pytest.approx(0.0)
    assert gap["prefill_effect"] + gap["truncation_effect"] + gap["averaging_effect"] == \
        pytest.approx(ext["Server_AL"] - out["Average_AL"])


def test_prometheus_al_only_from_a_window_that_is_the_points_own():
    recs = [rec("a", 0, {1: 1, 2: 1}, ctok=6, max_tokens=6), rec("b", 0, {3: 2}, ctok=9),
            rec("a", 1, {0: 2, 3: 1}, ctok=7), rec("b", 1, {}, osl=1, ctok=1)]  # 7 steps, 12 accepted
    ext = acc(recs, max_tokens=None, prometheus_window={"num_drafts": 7.0, "num_accepted_tokens": 12.0})[EXTENSION_KEY]
    assert ext["Prometheus_AL"] == pytest.approx(1 + 12 / 7)
    assert ext["prometheus_window"]["is_the_points_own"] is True
    # the counter disagrees with the requests' own stats on the same steps: shown, not hidden
    ext = acc(recs, max_tokens=None, prometheus_window={"num_drafts": 7.0, "num_accepted_tokens": 9.0})[EXTENSION_KEY]
    assert ext["Prometheus_AL"] == pytest.approx(1 + 9 / 7)
    # a window with a neighbour's steps (a phase boundary, another client) gives no AL, and says by how much
    ext = acc(recs, max_tokens=None, prometheus_window={"num_drafts": 11.0, "num_accepted_tokens": 20.0})[EXTENSION_KEY]
    assert ext["Prometheus_AL"] is None
    assert ext["prometheus_window"] == {"num_drafts": 11.0, "num_accepted_tokens": 20.0, "is_the_points_own": False,
                                        "steps_match": False}
    assert acc(recs, max_tokens=None)[EXTENSION_KEY]["prometheus_window"] is None


def test_eos_and_drafts_past_the_end_are_not_counted():
    # The server counted 1 + 3 steps + 6 accepted = 10 tokens, but emitted 9 (EOS last):
    # chunks 1, 4, 1, 2 (the last step's 3 drafts cut at EOS), EOS removed.
    r = rec("a", 0, {3: 2, 0: 1}, ctok=9, per_step=[3, 0, 3])
    out = acc([r], ids=["a"], cats=["w"])
    assert out["Request_AL"] == {"a": 2.0}
    assert out["Acceptance_Length_Histogram"] == {1: 2, 2: 1, 4: 1}
    gap = out[EXTENSION_KEY]["al_gap"]
    assert gap["tokens_counted_by_server"] == 10 and gap["tokens_in_chunks"] == 8
    assert gap["truncation_effect"] > 0


def test_mtbench_keys_are_run_order_indexes():
    recs = [rec("81", 0, {1: 1}, ctok=3, max_tokens=3), rec("81", 1, {}, ctok=1, max_tokens=1)]
    out = acceptance_rate(recs, "mtbench", ["81"], ["writing"], max_tokens=None, acceptance_hint=HINT)
    assert list(out["Request_AL"]) == [0] and out["Category_AL"] == {"writing": 4 / 3}  # chunks 1, 2 | 1
    assert json.loads(json.dumps(out))["Request_AL"] == {"0": 4 / 3}


def test_dense_list_histogram_gives_the_same_result():
    dense = [rec("a", 0, {1: 1, 2: 1}, list_hist=True), rec("a", 1, {0: 2, 3: 1}, list_hist=True)]
    sparse = [rec("a", 0, {1: 1, 2: 1}), rec("a", 1, {0: 2, 3: 1})]
    assert acc(dense, ["a"], ["w"]) == acc(sparse, ["a"], ["w"])


def test_warmup_failed_and_cancelled_are_left_out():
    base = [rec("a", 0, {1: 1, 2: 1}), rec("b", 0, {3: 2}), rec("a", 1, {0: 2, 3: 1}), rec("b", 1, {}, osl=1)]
    noisy = base + [
        rec("a", 2, {3: 9}, phase="warmup"),
        rec("b", 2, {3: 9}, error={"code": 500, "type": "x", "message": "boom"}, spec=False),
        rec("a", 3, {3: 9}, cancelled=True),
        # A failed record's stats are not checked (they are not used).
        rec("c", 0, {3: 1}, steps=99, error={"type": "x"}),
    ]
    a1, a2 = acc(noisy), acc(base)
    assert a2[EXTENSION_KEY].pop("failed_requests") == 0 and a1[EXTENSION_KEY].pop("failed_requests") == 3
    assert a1 == a2
    t = timing(noisy, question_ids=["a", "b"], max_tokens=MAX, acceptance_hint=HINT)
    assert t[EXTENSION_KEY]["failed_requests"] == 3 and t[EXTENSION_KEY]["num_turns"] == 4


def test_zero_step_turn_without_stats_is_one_chunk():
    # vLLM sends stats with 0 steps for a 1-token turn; tolerate their absence too.
    with_stats = acc([rec("a", 0, {2: 1}, ctok=4), rec("a", 1, {}, osl=1, ctok=1)], ["a"], ["w"], max_tokens=None)
    without = acc([rec("a", 0, {2: 1}, ctok=4), rec("a", 1, spec=False, osl=1, ctok=1)], ["a"], ["w"],
                  max_tokens=None)
    assert with_stats["Request_AL"] == without["Request_AL"] == {"a": pytest.approx(5 / 3)}


def test_missing_stats_on_a_speculative_run_is_an_error():
    records = [rec("a", 0, {1: 1}), rec("q7", 1, spec=False, osl=5)]
    with pytest.raises(RecordError, match=r"<records>:2 \(conversation q7, turn 1\): no spec_decode_acceptance"):
        acc(records, ["a", "q7"], ["w", "w"])


def test_baseline_without_speculation():
    out = acc([rec("a", 0, spec=False, ctok=4), rec("b", 0, spec=False, ctok=3)], ["a", "b"], ["w", "m"],
              speculative=False)
    assert out["Request_AL"] == {"a": 1.0, "b": 1.0}
    assert out["Average_AL"] == 1.0 and out["Category_AL"] == {"w": 1.0, "m": 1.0}
    assert out["Acceptance_Length_Histogram"] == {1: 5}  # EOS removed: 3 + 2 one-token chunks
    assert out[EXTENSION_KEY]["Server_AL"] is None and out[EXTENSION_KEY]["speculative"] is False


def test_repeated_turn_is_an_error():
    records = base_records() + [rec("a", 1, {1: 1})]
    with pytest.raises(RecordError, match=r"<records>:5 \(conversation a, turn 1\): this turn was already "
                                          r"recorded at <records>:3"):
        acc(records)
    with pytest.raises(RecordError, match="profiling_index"):
        timing(records, acceptance_hint=HINT)


def test_unknown_conversation_is_an_error():
    with pytest.raises(RecordError, match="conversation 'b' is not a question of the dataset"):
        acc(base_records(), ["a"], ["writing"])


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
        acc([bad])
    with pytest.raises(RecordError, match=r"<records>:1: no 'metadata'"):
        acc([{"metrics": {}}])


def test_read_profile_export_bad_json_names_line(tmp_path):
    path = tmp_path / "profile_export.jsonl"
    path.write_text(json.dumps(rec("a", 0, {1: 1})) + "\n\n" + '{"metadata": \n')
    with pytest.raises(RecordError, match=rf"{path}:3: invalid JSON"):
        read_profile_export(path)
    path.write_text(json.dumps(rec("a", 0, {1: 1})) + "\n")
    assert read_profile_export(path)[0].where == f"{path}:1"


# ------------------------------------------------------------------ timing

def timing_records():
    return [
        # start 1.0 s, first chunk 1.1 s, then chunks at 1.3 and 1.5 s; 40 tokens with EOS -> 39
        rec("a", 0, spec=False, start_ns=1_000_000_000, latency_ms=500.0, ttft_ms=100.0, osl=40,
            ctok=40, gaps=[200.0, 200.0]),
        # start 1.2 s, chunks at 1.4, 2.2 s; 161 tokens = max_tokens (no EOS)
        rec("a", 1, spec=False, start_ns=1_200_000_000, latency_ms=1000.0, ttft_ms=200.0, osl=161,
            ctok=161, gaps=[800.0]),
        # one token and EOS at 1.8 s: a TTFT but no generation rate
        rec("b", 0, spec=False, start_ns=1_500_000_000, latency_ms=300.0, ttft_ms=300.0, osl=1, ctok=2),
        # failed, earlier: outside the window
        rec("c", 0, spec=False, start_ns=500_000_000, error={"type": "x"}, osl=0),
        # warmup, earlier: ignored
        rec("d", 0, spec=False, start_ns=100_000_000, phase="warmup", osl=99),
    ]


def test_timing_hand_computed():
    t = timing(timing_records(), num_gpus=4, question_ids=["a", "b"], max_tokens=161, speculative=False,
               acceptance_hint=HINT)
    ext = t[EXTENSION_KEY]
    assert ext["total_output_tokens"] == 39 + 161 + 1
    assert ext["duration_s"] == pytest.approx(1.2)
    assert t["Output TPS"] == pytest.approx(201 / 1.2)
    assert t["Output TPS/gpu"] == pytest.approx(201 / 1.2 / 4)
    assert (ext["num_gpus"], ext["num_turns"], ext["failed_requests"]) == (4, 3, 1)
    # seconds, 4-decimal strings, numpy's linear quantiles, population std
    assert t["TTFT Time"] == {"min": "0.1000", "max": "0.3000", "mean": "0.2000", "std": f"{math.sqrt(0.02 / 3):.4f}",
                              "quantiles": {"0.25": "0.1500", "0.5": "0.2000", "0.75": "0.2500"}}
    assert t["E2E Request Time"]["max"] == "1.0000" and t["E2E Request Time"]["min"] == "0.3000"
    gen = t["Request Generation Tokens Per Second"]
    assert (gen["min"], gen["max"]) == (f"{38 / 0.4:.4f}", f"{160 / 0.8:.4f}")
    assert t["Number of Output Tokens"]["max"] == "161.0000"
    assert ext["counts"] == {"E2E Request Time": 3, "TTFT Time": 3, "Request Generation Step Time": 5,
                             "Request Generation Tokens Per Second": 2, "Number of Output Tokens": 3}
    assert list(t)[:7] == ["Output TPS", "Output TPS/gpu", "E2E Request Time", "TTFT Time",
                           "Request Generation Step Time", "Request Generation Tokens Per Second",
                           "Number of Output Tokens"]


def test_timing_units_converted():
    r = rec("a", 0, spec=False, start_ns=0, latency_ms=0.5, ttft_ms=0.1, osl=5, ctok=5, gaps=[400.0])
    r["metrics"]["time_to_first_token"] = {"value": 100_000_000, "unit": "ns"}
    t = timing([r], question_ids=["a"], max_tokens=5, speculative=False, acceptance_hint=HINT)
    assert t["TTFT Time"]["mean"] == "0.1000"
    assert t["E2E Request Time"]["mean"] == "0.5000"
    r["metrics"]["time_to_first_token"]["unit"] = "tokens"
    with pytest.raises(RecordError, match="not a time unit"):
        timing([r], acceptance_hint=HINT)


def test_timing_needs_a_success_and_good_args():
    with pytest.raises(RecordError, match="no successful profiling request"):
        timing([rec("a", 0, spec=False, error={"type": "x"})], acceptance_hint=HINT)
    with pytest.raises(ValueError, match="num_gpus"):
        timing([], num_gpus=0, acceptance_hint=HINT)


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
    assert prometheus_al(before, after, NAMES) == 1.75
    assert prometheus_al({}, after, NAMES) == 1 + 40 / 60
    assert prometheus_al(before, before, NAMES) is None           # no drafts in the window
    assert prometheus_al({}, {"process_open_fds": 3}, NAMES) is None  # no speculative config
    with pytest.raises(ValueError, match="went down"):
        prometheus_al(after, before, NAMES)


def test_aiperf_past_its_timeout_is_stopped(tmp_path):
    """run_aiperf stops a process that outlives its point timeout, and says so, keeping what it
    printed before (the timeout leaves a loaded machine's interpreter start-up time to print)."""
    import sys
    import time

    from launcher.bench.aiperf_runner import run_aiperf

    t = time.time()
    res = run_aiperf([sys.executable, "-c", "import time; print('completed=1', flush=True); time.sleep(60)"],
                     env=None, log_path=tmp_path / "aiperf.log", timeout_s=5.0, on_progress=lambda n: None)
    assert res.timed_out and res.returncode != 0
    assert time.time() - t < 30  # not the child's 60 s
    assert "completed=1" in (tmp_path / "aiperf.log").read_text()
