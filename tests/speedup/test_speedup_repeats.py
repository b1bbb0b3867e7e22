"""The best k and "beats the baseline" with repeats (docs/repeats.md)."""
from launcher.stats.repeats import summarize
from launcher.speedup import best_k, per_request
from launcher.speedup.analysis import throughput_repeats


def _row(c, k, tps_values, beats=None):
    s = summarize(tps_values)
    return {"dataset": "mtbench", "temperature": 0.0, "concurrency": c, "k": k, "output_tps": s.mean,
            "speedup": None, "beats_baseline": beats, "tps_repeats": s.to_dict()}


def test_noisy_points_are_left_out_and_median_minus_mad_decides():
    rows = [_row(1, 1, [100.0, 101.0, 99.0]),          # score 100 - 1 = 99
            _row(1, 3, [150.0, 100.0, 200.0]),         # the highest mean, but noisy (rel MAD 1/3)
            _row(1, 5, [104.0, 98.0, 100.0])]          # median 100, MAD 2: score 98
    (ch,) = best_k.best_k_per_load(rows)
    assert ch.k == 1 and ch.score == 99.0 and ch.noisy_excluded == (3,) and ch.repeats == 3
    assert not ch.all_noisy and ch.candidates[3] == 150.0


def test_equal_scores_go_to_the_smaller_k():
    (ch,) = best_k.best_k_per_load([_row(2, 3, [100.0, 102.0, 98.0]), _row(2, 2, [100.0, 98.0, 102.0])])
    assert ch.k == 2


def test_when_every_k_is_noisy_the_choice_says_so():
    (ch,) = best_k.best_k_per_load([_row(1, 1, [100.0, 60.0, 140.0]), _row(1, 3, [100.0, 150.0, 50.0])])
    assert ch.all_noisy and ch.noisy_excluded == () and ch.k == 1    # scores 60 vs 50


def test_beats_the_baseline_only_when_the_intervals_separate():
    base = summarize([100.0, 102.0, 98.0]).to_dict()
    assert per_request.beats_baseline({"throughput": 1.3}, summarize([130.0, 131.0, 129.0]).to_dict(), base) is True
    # a higher mean whose interval reaches the baseline's: not beyond the noise
    assert per_request.beats_baseline({"throughput": 1.1}, summarize([110.0, 140.0, 80.0]).to_dict(), base) is False
    # without repeats the per-request rule stands
    assert per_request.beats_baseline({"throughput": 1.3, "e2e_speedup": {"lo": 1.1}}) is True


def test_throughput_speedup_over_repeats_pairs_repeat_i_with_repeat_i():
    spec = {"per_repeat": [{"Output TPS": 20.0}, {"Output TPS": 33.0}, {"Output TPS": 30.0}]}
    base = {"per_repeat": [{"Output TPS": 10.0}, {"Output TPS": 11.0}, {"Output TPS": 12.0}]}
    s = throughput_repeats(spec, base)
    assert s["n"] == 3 and s["mean"] == (2.0 + 3.0 + 2.5) / 3 and s["median"] == 2.5
    assert throughput_repeats(spec, None) is None
