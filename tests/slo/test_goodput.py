"""Goodput arithmetic (launcher/results/goodput.py) on hand-made and recorded records,
and agreement with AIPerf 0.13's own judgement of the recorded records."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from launcher.results import goodput as gp
from tests.support import stack

REC = Path(__file__).resolve().parents[1] / "bench" / "data" / "recorded"
JUDGE = Path(__file__).resolve().parents[1] / "support" / "aiperf_goodput_judge.py"


def req(ttft=None, itl=None, e2e=None, tokens=10, ok=True):
    return gp.RequestTimes(ok, {"time_to_first_token": ttft, "inter_token_latency": itl, "request_latency": e2e},
                           tokens)


def test_slo_from_recipe_keys_maps_onto_aiperf_tags():
    slo = gp.slo_from_dict({"ttft_ms": 200, "tpot_ms": 20, "itl_ms": None, "e2e_ms": None, "percentile": 90,
                            "percentiles": {"ttft_ms": 99}, "good_share": None})
    assert slo.aiperf_slos() == {"inter_token_latency": 20.0, "time_to_first_token": 200.0}
    assert slo.percentile("ttft_ms") == 99 and slo.percentile("tpot_ms") == 90
    assert gp.aiperf_goodput_arg(slo) == "inter_token_latency:20 time_to_first_token:200"
    assert gp.slo_from_dict(slo.to_dict()) == slo  # the job spec's copy reads back
    assert gp.slo_from_dict({"ttft_ms": None, "percentile": 90}) is None


def test_goodput_counts_requests_meeting_every_limit():
    # 4 requests over 2 s: two good (10 and 20 tokens), one too slow to first token, one failed
    slo = gp.Slo({"ttft_ms": 100, "tpot_ms": 10}, {"ttft_ms": 50, "tpot_ms": 50})
    reqs = [req(50, 5, tokens=10), req(100, 10, tokens=20), req(150, 5, tokens=30), req(ok=False, tokens=None)]
    g = gp.goodput(reqs, 2.0, slo)
    assert (g["good_requests"], g["requests"]) == (2, 4)
    assert g["goodput_rps"] == 1.0 and g["good_output_tps"] == 15.0 and g["good_fraction"] == 0.5
    # TTFT within 100 ms: 2 of 4 (the failed one counts as outside); p50 by nearest rank is 100 ms
    assert g["limits"]["ttft_ms"]["share_within"] == 0.5 and g["limits"]["ttft_ms"]["value_ms"] == 100
    assert g["limits"]["tpot_ms"]["share_within"] == 0.75
    assert g["meets_slo"]  # 50 % within each limit, as asked
    assert not gp.goodput(reqs, 2.0, gp.Slo(slo.limits, slo.percentiles, good_share=0.75))["meets_slo"]
    assert not gp.goodput(reqs, 2.0, gp.Slo(slo.limits, {"ttft_ms": 90}))["meets_slo"]


def test_a_request_without_the_metric_is_not_good():
    # AIPerf has no inter-token latency for a 1-token answer: it fails an ITL limit
    slo = gp.Slo({"itl_ms": 10})
    assert not gp.is_good(req(10, None), slo)
    assert gp.is_good(req(10, None), gp.Slo({"ttft_ms": 20}))


def test_nearest_rank_percentile_agrees_with_the_share_within():
    vals = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert gp.nearest_rank(vals, 90) == 90 and gp.nearest_rank(vals, 91) == 100 and gp.nearest_rank(vals, 50) == 50


def test_repeats_verdict():
    assert gp.repeats_verdict([True, True]) == "met"
    assert gp.repeats_verdict([False, False, None]) == "failed"
    assert gp.repeats_verdict([True, False, True]) == "noisy"
    assert gp.repeats_verdict([None]) is None


def test_recorded_point_goodput():
    """The recorded run (12 requests): 2 have TTFT <= 100 ms and ITL <= 10 ms."""
    slo = gp.Slo({"ttft_ms": 100, "itl_ms": 10})
    g = gp.point_goodput(REC, slo)
    assert g["requests"] == 12 and g["good_requests"] == 2
    # over AIPerf's observation window (request_count / request_throughput), not benchmark_duration
    assert g["duration_s"] == pytest.approx(12 / 3.6549310916744266) and g["duration_s"] > 3.273878272
    assert g["goodput_rps"] == pytest.approx(2 / g["duration_s"])
    assert g["aiperf"] is None and g["agrees_with_aiperf"] is None  # recorded without --goodput


CASES = [(limits, records) for limits in ({"ttft_ms": 100, "itl_ms": 10}, {"e2e_ms": 400}, {"ttft_ms": 150},
                                          {"tpot_ms": 9.0, "e2e_ms": 1000})
         for records in ("profile_export.jsonl", "edge/profile_export.jsonl")]


def test_ours_agree_with_aiperfs_own_judgement_of_recorded_records():
    """AIPerf's GoodRequestCountMetric (run in AIPerf's environment, one process for every
    case) and ours give each recorded request the same verdict."""
    aiperf_python = stack.AIPERF.parent / "python"
    if not aiperf_python.exists():
        stack.require_stack()
    slos = [gp.Slo(limits) for limits, _ in CASES]
    arg = json.dumps([[str(REC / rec), slo.aiperf_slos()] for slo, (_, rec) in zip(slos, CASES)])
    out = subprocess.run([str(aiperf_python), str(JUDGE), arg], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    theirs_all = json.loads(out.stdout.strip().splitlines()[-1])
    good_somewhere = 0
    for slo, (_, rec), theirs in zip(slos, CASES, theirs_all):
        ours = [int(gp.is_good(r, slo)) if r.ok else None for r in gp.read_requests(REC / rec)]
        assert ours == theirs, (slo, rec)
        good_somewhere += sum(x or 0 for x in theirs)
        assert 0 < sum(x or 0 for x in theirs) < len(theirs) or "edge" in rec or "e2e_ms" in slo.limits
    assert good_somewhere > 5  # the cases split the requests, not all one way


def test_aiperf_figures_are_compared_only_under_the_same_slo(tmp_path):
    import shutil
    for f in ("profile_export.jsonl", "profile_export_aiperf.json"):
        shutil.copy(REC / f, tmp_path / f)
    agg = json.loads((tmp_path / "profile_export_aiperf.json").read_text())
    dur = 12 / agg["request_throughput"]["avg"]
    agg["good_request_count"] = {"unit": "requests", "avg": 2.0}
    agg["goodput"] = {"unit": "requests/sec", "avg": 2 / dur}
    agg["input_config"] = {"slos": {"time_to_first_token": 100.0, "inter_token_latency": 10.0}}
    (tmp_path / "profile_export_aiperf.json").write_text(json.dumps(agg))
    assert gp.point_goodput(tmp_path, gp.Slo({"ttft_ms": 100, "itl_ms": 10}))["agrees_with_aiperf"] is True
    other = gp.point_goodput(tmp_path, gp.Slo({"ttft_ms": 50}))
    assert other["agrees_with_aiperf"] is None and "another SLO" in other["aiperf"]["note"]
    agg["good_request_count"]["avg"] = 3.0
    (tmp_path / "profile_export_aiperf.json").write_text(json.dumps(agg))
    assert gp.point_goodput(tmp_path, gp.Slo({"ttft_ms": 100, "itl_ms": 10}))["agrees_with_aiperf"] is False
