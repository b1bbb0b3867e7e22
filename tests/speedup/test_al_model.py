"""The cost model across ALs (launcher.speedup.al_model) and its held-out check
(launcher.speedup.held_out) on made-up levels whose requests are built from a known prefill and
verify step: a request of n tokens at AL a takes P + (n - 1) / a * s, the baseline's B."""
from __future__ import annotations

import math

import pytest

from launcher.speedup import al_model, held_out

N, P, S, B = 256, 0.020, 0.008, 1.70  # output tokens, prefill s, verify step s, the baseline's request s


def request(al: float, prefill: float = P, step: float = S) -> float:
    return prefill + (N - 1) / al * step


def level(al: float, jitter=(0.0, 0.004, -0.004), prefill: float = P, step: float = S, causes=()) -> dict:
    """A forced level's point row: each repeat's speedup is the baseline's request time over its own."""
    reps = []
    for j in jitter:
        t = request(al, prefill * (1 + j), step)
        reps.append({"speedup": B / t, "ttft_s": prefill * (1 + j), "tpot_s": step / al, "al": al})
    return {"drafter": "d (eagle3 k=3)", "dataset": "mtbench", "temperature": 0.0, "concurrency": 1, "k": 3,
            "configuration": {"fingerprint": "f", "label": ""}, "forced_acceptance": {"length": al},
            "request_parts": {"output_tokens": N, "repeats": reps},
            "causes": [{"word": w, "sentence": w} for w in causes]}


def test_the_prefill_is_paid_once_a_request_so_the_speedup_moves_as_the_request_time():
    p = al_model.predict([level(2.0, jitter=(0.0, 0.0))], 4.0)
    assert p["speedup"] == pytest.approx(B / request(4.0), rel=1e-12)
    # the constant step cost (AL / speedup at 2) spreads the prefill over the steps: it overshoots
    constant = 4.0 / (2.0 / (B / request(2.0)))
    assert constant > p["speedup"] * 1.01


def test_one_level_holds_the_repeats_the_prefill_and_the_step_drift_and_says_no_level_error():
    p = al_model.predict([level(2.0)], 3.5)
    t = p["terms"]
    assert t["levels"] is None and t["repeats"] > 0 and t["prefill"] > 0
    decode = (N - 1) / 3.5 * S
    assert t["step"] == pytest.approx(al_model.STEP_DRIFT * decode / (request(3.5)), rel=1e-2)
    assert p["half_rel"] == pytest.approx(math.sqrt(sum(v * v for v in t.values() if v is not None)))
    assert p["lo"] < B / request(3.5) < p["hi"]


def test_two_levels_that_follow_the_model_predict_each_other_and_add_their_leave_one_out_error():
    two = [level(2.0, jitter=(0.0, 0.0)), level(3.5, jitter=(0.0, 0.0))]
    errors = [e["error"] for e in al_model.leave_one_out(two)]
    assert errors == pytest.approx([0.0, 0.0], abs=1e-12)
    off = [level(2.0, jitter=(0.0, 0.0)), level(3.5, jitter=(0.0, 0.0), prefill=P * 1.5)]
    e = [x["error"] for x in al_model.leave_one_out(off)]
    p = al_model.predict(off, 2.7)
    assert p["terms"]["levels"] == pytest.approx(math.sqrt((e[0] ** 2 + e[1] ** 2) / 2))


def test_a_level_whose_step_got_dearer_is_outside_and_says_so():
    kept, dearer = level(4.0), level(6.0, step=S * 1.45, causes=("host-bound",))
    checks = held_out.check([kept, dearer])
    assert [h["level"] for h in checks] == ["forced AL 4", "forced AL 6"]
    six = checks[1]
    assert six["inside"] is False and six["error"] > 0.3
    assert six["why"][0].startswith("a verify step took 45% longer at AL 6.00")
    assert six["causes"] == ["host-bound"]
    assert six["moved"]["step"]["rel"] == pytest.approx(0.45)
    assert "OUTSIDE: a verify step took 45% longer" in held_out.line(six)


def test_levels_that_agree_are_inside_and_one_level_alone_is_not_checked():
    checks = held_out.check([level(2.0), level(3.5)])
    assert [h["inside"] for h in checks] == [True, True]
    assert held_out.check([level(2.0)]) == []
    assert held_out.summary(checks).startswith("2 of 2 level(s) predicted from the others fell inside")


def test_a_level_without_prefill_and_step_times_is_named_not_predicted():
    bare = {**level(3.5), "request_parts": {"output_tokens": None, "repeats": []}}
    assert al_model.predict([bare], 3.0) is None
    checks = held_out.check([level(2.0), bare])
    assert [h["predicted"] for h in checks] == [None, None]
    assert "no prefill and step times recorded" in held_out.line(checks[0])
    assert held_out.summary(checks).endswith("2 without the parts to predict from")
