"""Counting acceptance from stream chunks (pure functions, hand-worked numbers)."""
from __future__ import annotations

import json

import pytest

from launcher.bench.metrics import attach_stream_stats, parse_record
from launcher.bench.run_counters import sweep_prometheus_check
from launcher.bench.stream_chunks import chunks_from_usage, read_raw_chunks, record_chunks, stats_from_chunks


def test_chunks_are_differences_of_cumulative_usage():
    assert chunks_from_usage([0, 1, 2, None, 5, 9, 9, 11]) == [1, 1, 3, 4, 2]
    with pytest.raises(ValueError, match="went down"):
        chunks_from_usage([0, 3, 2])


def test_stats_from_chunks_by_hand():
    st = stats_from_chunks([1, 4, 2, 1, 3], k=3)
    assert st["num_spec_steps"] == 4 and st["num_accepted_draft_tokens"] == 3 + 1 + 0 + 2
    assert st["acceptance_histogram"] == [1, 1, 1, 1] and st["per_step_accepted"] == [3, 1, 0, 2]
    assert st["mean_acceptance_length"] == pytest.approx(1 + 6 / 4)
    merged = stats_from_chunks([1, 4, 6], k=3)  # 6 > k+1: two steps in one chunk
    assert merged["chunks_over_k_plus_1"] == 1 and len(merged["acceptance_histogram"]) == 6


def _event(tokens, content=True, finish=None):
    choices = [{"index": 0, "delta": {"content": "x"}, "finish_reason": finish}] if content else []
    return {"name": "data", "value": json.dumps({"choices": choices, "usage": {"completion_tokens": tokens}})}


def test_record_chunks_skip_role_and_final_usage_events():
    rec = {"responses": [{"packets": [_event(0)]}, {"packets": [_event(1), _event(4)]},
                         {"packets": [_event(6, finish="stop"), _event(6, content=False)]},
                         {"packets": [{"name": "data", "value": "[DONE]"}]}]}
    assert record_chunks(rec) == ([1, 3, 2], "stop", True)


def test_a_stream_without_usage_on_chunks_is_refused(tmp_path):
    rec = {"metadata": {"conversation_id": "1", "turn_index": 0, "benchmark_phase": "profiling"},
           "responses": [{"packets": [{"name": "data", "value": json.dumps({"choices": [{"delta": {"content": "a"}}]})},
                                      _event(3, content=False)]}]}
    p = tmp_path / "raw.jsonl"
    p.write_text(json.dumps(rec) + "\n")
    with pytest.raises(ValueError, match="continuous_usage_stats"):
        read_raw_chunks(p)


def test_attach_gives_records_the_stats_their_chunks_imply():
    rec = parse_record({"metadata": {"conversation_id": "q", "turn_index": 0, "benchmark_phase": "profiling"},
                        "metrics": {}}, "f:1")
    [out] = attach_stream_stats([rec], {("q", 0): [1, 4, 2]}, k=3)
    assert out.spec.steps == 2 and out.spec.accepted == 4 and out.spec.per_step_accepted == (3, 1)
    assert out.completion_tokens == 7


def test_run_check_from_chunks_needs_equal_steps_and_no_more_accepted():
    w = {"num_drafts": 10.0, "num_accepted_tokens": 12.0}
    assert sweep_prometheus_check(w, 10, 11, stream_counted=True)["matches"] is True
    assert sweep_prometheus_check(w, 9, 11, stream_counted=True)["matches"] is False  # a merged chunk
    assert sweep_prometheus_check(w, 10, 13, stream_counted=True)["matches"] is False
    assert sweep_prometheus_check(w, 10, 11)["matches"] is False  # per-request stats must match exactly
