"""Each speedup computation against numbers worked by hand (docs/speedup.md)."""
from __future__ import annotations

import math

import pytest

from launcher.speedup import best_k, per_request, predict
from launcher.speedup.per_request import RequestTiming as R


def test_ratio_stats_geomean_interval_and_quartiles():
    st = per_request.ratio_stats([(2.0, 1.0), (8.0, 1.0)])
    # log ratios ln2 and 3 ln2: mean 2 ln2 -> geomean 4; sample sd sqrt(2) ln2, n=2, t(1)=12.706
    assert st.geomean == pytest.approx(4.0)
    assert st.lo == pytest.approx(4.0 * 2 ** -12.706)
    assert st.hi == pytest.approx(4.0 * 2 ** 12.706)
    assert (st.p25, st.p50, st.p75) == pytest.approx((3.5, 5.0, 6.5))
    assert st.n == 2 and st.paired


def test_ratio_stats_single_pair_has_no_interval_and_drops_nonpositive():
    st = per_request.ratio_stats([(3.0, 2.0), (0.0, 1.0), (1.0, -1.0)])
    assert st.n == 1 and st.geomean == pytest.approx(1.5) and st.lo is None and st.hi is None
    assert per_request.ratio_stats([]) is None


def _rec(q, ttft, e2e, tokens, steps=None, hist=None):
    return R((q, 0), ttft, e2e, tokens, steps, hist)


def test_decode_tps_is_tokens_after_the_first_over_decode_time():
    r = _rec("a", 0.1, 1.1, 11)
    assert r.decode_s == pytest.approx(1.0) and r.decode_tps == pytest.approx(10.0)
    assert _rec("a", 0.1, 0.1, 5).decode_tps is None   # the whole stream at once
    assert _rec("a", 0.1, 1.0, 1).decode_tps is None   # one token: no decode phase


def test_point_speedup_pairs_by_question():
    base = [_rec("q1", 0.10, 1.10, 11), _rec("q2", 0.20, 2.20, 21), _rec("q9", 0.1, 9.0, 5)]
    spec = [_rec("q2", 0.25, 0.75, 21), _rec("q1", 0.10, 0.60, 11)]
    sp = per_request.point_speedup(spec, base, spec_tps=30.0, base_tps=20.0)
    assert sp["throughput"] == pytest.approx(1.5)
    assert sp["paired_requests"] == 2 and sp["base_requests"] == 3
    # decode tok/s: q1 10 -> 20 (x2), q2 10 -> 40 (x4): geomean sqrt(8)
    assert sp["decode"]["geomean"] == pytest.approx(math.sqrt(8))
    # TTFT: q1 x1, q2 x1.25 -> geomean sqrt(1.25)
    assert sp["ttft_ratio"]["geomean"] == pytest.approx(math.sqrt(1.25))
    # e2e: q1 0.6/1.1, q2 0.75/2.2
    assert sp["e2e_ratio"]["geomean"] == pytest.approx(math.sqrt(0.6 / 1.1 * 0.75 / 2.2))
    assert sp["e2e_speedup"]["geomean"] == pytest.approx(1 / math.sqrt(0.6 / 1.1 * 0.75 / 2.2))
    assert sp["e2e_ratio"]["paired"] is True


def test_point_speedup_without_common_questions_uses_medians_unpaired():
    base = [_rec("a", 0.1, 1.0, 11), _rec("b", 0.1, 3.0, 11)]    # median e2e 2.0
    spec = [_rec("x", 0.1, 0.5, 11)]
    sp = per_request.point_speedup(spec, base, None, 20.0)
    assert sp["throughput"] is None and sp["paired_requests"] == 0
    assert sp["e2e_ratio"] == {"n": 1, "paired": False, "geomean": pytest.approx(0.25), "lo": None, "hi": None,
                               "p25": None, "p50": None, "p75": None}


def test_beats_baseline_needs_throughput_and_the_interval_above_one():
    sp = {"throughput": 1.3, "e2e_speedup": {"lo": 1.05}}
    assert per_request.beats_baseline(sp) is True
    assert per_request.beats_baseline({"throughput": 1.3, "e2e_speedup": {"lo": 0.95}}) is False
    assert per_request.beats_baseline({"throughput": 0.9, "e2e_speedup": {"lo": 1.2}}) is False
    assert per_request.beats_baseline({"throughput": 1.3, "e2e_speedup": {"lo": None}}) is None


def test_expected_tokens_per_step_from_the_histogram():
    hist = {0: 2, 1: 1, 3: 1}                       # 4 steps, 0+1+3 = 4 accepted drafts
    assert predict.position_acceptance(hist) == pytest.approx([0.5, 0.25, 0.25])
    assert predict.expected_tokens_per_step(hist) == pytest.approx(2.0)   # = 1 + 4/4
    assert predict.expected_tokens_per_step(hist, 1) == pytest.approx(1.5)
    assert predict.expected_tokens_per_step(hist, 2) == pytest.approx(1.75)
    assert predict.expected_tokens_per_step({}) is None
    assert predict.merge_histograms([{"0": 1, "2": 3}, {0: 1, 1: 0}, None]) == {0: 2, 2: 3}


def test_step_times_pool_latency_per_engine_step():
    base = [_rec("a", 0.1, 1.1, 11), _rec("b", 0.2, 0.4, 5)]       # 1.5 s over 11 + 5 = 16 steps
    assert predict.base_step_s(base) == pytest.approx(1.5 / 16)
    spec = [_rec("a", 0.1, 1.1, 11, steps=4), _rec("b", 0.2, 0.4, 5, steps=1)]   # 1.5 s over 5 + 2 steps
    assert predict.spec_step_s(spec) == pytest.approx(1.5 / 7)
    assert predict.base_step_s([]) is None and predict.spec_step_s(base) is None


def test_draft_cost_fit_over_two_k_and_the_leviathan_prediction():
    cost = predict.draft_cost({1: 1.5, 3: 2.1})      # r = v + c k through both points
    assert cost.c == pytest.approx(0.3) and cost.v == pytest.approx(1.2)
    assert predict.predicted_speedup(3.4, 3, cost.c) == pytest.approx(3.4 / 1.9)
    assert predict.measured_step_speedup(3.4, 2.1) == pytest.approx(3.4 / 2.1)
    # Leviathan et al.'s i.i.d. case: a = 0.8, k = 4, c = 0.05 -> (1 - a^5) / (1 - a) / 1.2
    e = (1 - 0.8 ** 5) / (1 - 0.8)
    assert predict.predicted_speedup(e, 4, 0.05) == pytest.approx(3.3616 / 1.2)


def test_draft_cost_with_one_k_assumes_unit_verify_cost():
    cost = predict.draft_cost({3: 1.6})
    assert cost.c == pytest.approx(0.2) and cost.v == 1.0
    # then the prediction reproduces the measured step speedup by construction
    assert predict.predicted_speedup(3.2, 3, cost.c) == pytest.approx(predict.measured_step_speedup(3.2, 1.6))
    assert predict.draft_cost({}) is None
    assert predict.predicted_speedup(2.0, 3, -0.5) is None     # k c + 1 <= 0


def test_a_negative_draft_cost_predicts_nothing_and_says_why():
    cost = predict.draft_cost({1: 1.6, 3: 1.2})                 # the k=3 step cheaper: c = -0.2
    assert cost.c == pytest.approx(-0.2)
    assert predict.predicted_speedup(2.0, 3, cost.c) is None    # not 2.0 / 0.4, more than a step yields
    why = predict.unresolved_cost(cost)
    assert why.startswith("the step times give a negative draft cost (c = -0.20 target steps, fit over k=[1,3])")
    assert predict.diagnose(None, 0.8, unresolved=why) == f"slower; no prediction: {why}"
    assert predict.diagnose(None, 1.2, unresolved=why) == "faster than the baseline"
    assert predict.unresolved_cost(predict.draft_cost({1: 1.2, 3: 1.2})) is None   # c = 0: a free draft, defined
    assert predict.unresolved_cost(None) is None


def _row(c, k, tps, sp=None, beats=None):
    return {"dataset": "mtbench", "temperature": 0.0, "concurrency": c, "k": k, "output_tps": tps,
            "speedup": sp, "beats_baseline": beats}


def test_best_k_per_load_and_the_vllm_schedule():
    rows = [_row(1, 1, 10.0), _row(1, 3, 12.0, 1.4, True), _row(2, 1, 15.0, 1.1, False), _row(2, 3, 14.0),
            _row(8, 3, 20.0), _row(8, 1, 20.0, 0.9, False)]
    choices = best_k.best_k_per_load(rows)
    assert [(c.concurrency, c.k) for c in choices] == [(1, 3), (2, 1), (8, 1)]   # tie at C=8: smaller k
    assert choices[0].beats_baseline is True and choices[0].candidates == {1: 10.0, 3: 12.0}
    sched = best_k.vllm_schedule(choices)
    assert sched == {"num_speculative_tokens": 3, "num_speculative_tokens_per_batch_size": [[1, 1, 3], [2, 8, 1]]}


def test_schedule_starts_at_batch_size_one():
    ch = best_k.best_k_per_load([_row(4, 2, 5.0), _row(16, 3, 9.0)])
    assert best_k.vllm_schedule(ch)["num_speculative_tokens_per_batch_size"] == [[1, 15, 2], [16, 16, 3]]
    assert best_k.vllm_schedule([]) == {}


def test_diagnosis_separates_the_draft_from_overheads():
    assert predict.diagnose(1.8, 1.2) == "faster than the baseline"
    assert predict.diagnose(0.9, 0.8) == "slower: the draft costs more than its accepted tokens save"
    assert predict.diagnose(1.8, 0.8, v=1.4) == ("slower than predicted: overheads, not the draft "
                                                 "(a verify step costs 1.40 target steps)")
    assert predict.diagnose(None, None) == "no measurement"
