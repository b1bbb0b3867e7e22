"""An acceptance that cannot be true is marked, whatever the engine (launcher.results.plausibility),
and SGLang's AL comes from the counters that held on a real server when its stream merged steps.

The recorded folder is a real SGLang 0.5.17 run on an H100 (tests/data/h100_sglang0517_forced,
PROVENANCE.md): SGLANG_SIMULATE_ACC_LEN=2.5 in SGLang's default token mode, whose stream sent each
64-token reply as a 1-token chunk and one 63-token chunk; the server's log said "accept len" 2.45
to 2.60."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher.bench import aiperf_runner as ar
from launcher.bench.metrics import acceptance_rate, attach_stream_stats, profiling_records, read_profile_export
from launcher.bench.stream_chunks import read_raw_chunks
from launcher.engines import get_engine
from launcher.results.plausibility import from_extension, impossible_acceptance

FORCED = Path(__file__).resolve().parents[1] / "data" / "h100_sglang0517_forced" / "mtbench" / "t0_c1"


def test_an_al_above_k_plus_1_is_impossible_and_says_which():
    why = impossible_acceptance(3, {"Server_AL": 63.0, "Average_AL": 2.9, "Prometheus_AL": None})
    assert why is not None and "Server_AL 63" in why and "k + 1 = 4" in why and "Average_AL" not in why
    assert impossible_acceptance(3, {"Server_AL": 4.0, "Average_AL": 1.0}) is None  # the bounds themselves hold
    assert "below 1" in impossible_acceptance(3, {"Server_AL": 0.5})


def test_per_position_rates_must_agree_with_their_al_and_be_a_survival_curve():
    ok = {"rates": [0.9, 0.6, 0.3], "source": "prometheus"}
    assert impossible_acceptance(3, {}, per_position=ok, al_of_rates=2.8) is None
    assert "give AL 2.8" in impossible_acceptance(3, {}, per_position=ok, al_of_rates=3.5)
    assert "increase" in impossible_acceptance(3, {}, per_position={"rates": [0.5, 0.7, 0.1]}, al_of_rates=2.3)
    assert "outside [0, 1]" in impossible_acceptance(3, {}, per_position={"rates": [1.2, 0.5, 0.1]}, al_of_rates=2.8)


def test_merged_chunks_are_named_as_the_cause():
    why = impossible_acceptance(3, {"Average_AL": 29.2}, chunks_over_k_plus_1=61)
    assert "61 streamed chunks" in why
    assert impossible_acceptance(3, {"Average_AL": 2.5}, chunks_over_k_plus_1=2) is None  # merged, not impossible


def test_a_baseline_is_never_judged():
    assert from_extension({"speculative": False, "Server_AL": None}, 1.0, None) is None


def _recorded_point(directory: Path) -> dict:
    aip = directory / "aiperf"
    sgl = get_engine("sglang")
    records = attach_stream_stats(read_profile_export(aip / "profile_export.jsonl"),
                                  read_raw_chunks(aip / "profile_export_raw.jsonl"), 3)
    ok, _ = profiling_records(records)
    ids = list(dict.fromkeys(r.conversation_id for r in ok))
    return acceptance_rate(records, "mtbench", ids, ["writing"] * len(ids), max_tokens=None,
                           acceptance_hint=sgl.acceptance_hint(), prometheus_window=ar.prometheus_window(aip, sgl.metrics),
                           acceptance_source="stream_chunks")


def test_the_recorded_sglang_forced_point_gets_its_al_from_the_counters_and_is_marked():
    """Recomputed from the real server's files: the window finished exactly the point's 64 turns,
    so Server_AL is the counters' 1 + accepted / verify calls, within 0.1 of the forced 2.5 (it was
    recorded as 63.0); the stream's figures (Average_AL 29.2, 63 a step) are marked impossible,
    and the point is not exact (its chunks counted 61 steps, the server 1,624)."""
    doc = _recorded_point(FORCED)
    ext = doc["specdec_launcher"]
    w = ext["prometheus_window"]
    recorded = json.loads((FORCED / "acceptance_rate.json").read_text())[0]["specdec_launcher"]
    assert w["finished_requests"] == ext["num_turns"] and w["is_the_points_own"] and not w["steps_match"]
    assert ext["Server_AL"] == pytest.approx(1 + w["num_accepted_tokens"] / w["num_drafts"])
    assert abs(ext["Server_AL"] - 2.5) < 0.1 and recorded["Server_AL"] > 4
    assert ext["Server_AL_source"] == "counters" and ext["stream_AL"] == pytest.approx(recorded["Server_AL"])
    assert ext["impossible"] and "above k + 1 = 4" in ext["impossible"] and doc["Average_AL"] > 4


def test_no_recorded_point_is_marked_but_the_merged_sglang_run():
    """Every acceptance_rate.json recorded in tests/data (vLLM on GPUs and CPUs, SGLang): the rule
    marks exactly the SGLang run whose stream merged 63 tokens into one chunk."""
    data = Path(__file__).resolve().parents[1] / "data"
    marked, judged = set(), 0
    for f in sorted(data.glob("**/acceptance_rate.json")):
        doc = json.loads(f.read_text())
        doc = doc[0] if isinstance(doc, list) else doc
        conf = json.loads(f.with_name("configuration.json").read_text()) if f.with_name("configuration.json").exists() else {}
        k = ((conf.get("specdec_launcher") or {}).get("run_identity") or {}).get("k") or conf.get("draft_length")
        judged += 1
        if from_extension(doc.get("specdec_launcher") or {}, doc.get("Average_AL"), k):
            marked.add(f.relative_to(data).parts[0])
    assert judged > 50 and marked == {"h100_sglang0517_forced"}
