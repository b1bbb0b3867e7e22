"""The speedup at any AL from a configuration's forced step costs (launcher.speedup.at_al), and a
real drafter's measured speedup beside the prediction at its AL, on made-up point rows shaped like
launcher.speedup.analysis.analyse()'s."""
from __future__ import annotations

from statistics import mean

import pytest

from launcher.speedup.at_al import lines, measured_vs_predicted, predict, configuration_costs


def row(conf, c, al, per_repeat, forced=True, causes=()) -> dict:
    m = mean(per_repeat)
    return {"drafter": conf, "dataset": "mtbench", "temperature": 0.0, "concurrency": c, "k": 3,
            "forced_acceptance": {"length": al} if forced else None, "server_al": al, "measured_al": al,
            "speedup": {"throughput": m}, "throughput_per_repeat": list(per_repeat),
            "throughput_repeats": {"mean": m, "lo": min(per_repeat), "hi": max(per_repeat)},
            "causes": [{"word": w, "sentence": w} for w in causes]}


FORCED = [row("A", 1, 3.0, [1.50, 1.52, 1.48]), row("A", 1, 2.0, [1.0, 1.01, 0.99]),
          row("B", 1, 3.0, [2.0, 2.02, 1.98])]


def test_each_configuration_has_its_own_step_cost():
    costs = {c["drafter"]: c for c in configuration_costs(FORCED)}
    assert set(costs) == {"A", "B"}
    expected_a = mean([3.0 / s for s in (1.50, 1.52, 1.48)] + [2.0 / s for s in (1.0, 1.01, 0.99)])
    assert costs["A"]["step_cost"] == pytest.approx(expected_a) and costs["A"]["n"] == 6
    assert costs["B"]["step_cost"] == pytest.approx(mean(3.0 / s for s in (2.0, 2.02, 1.98)))


def test_the_prediction_is_al_over_the_cost_with_the_interval_inverted():
    cost = {"step_cost": 2.0, "lo": 1.8, "hi": 2.5}
    assert predict(cost, 4.0) == {"al": 4.0, "speedup": 2.0, "lo": 4.0 / 2.5, "hi": 4.0 / 1.8}
    assert predict({"step_cost": 2.0, "lo": None, "hi": None}, 4.0)["lo"] is None


def test_a_real_drafter_is_set_beside_the_prediction_and_a_gap_is_marked_with_its_causes():
    costs = configuration_costs(FORCED)
    cost_a = next(c for c in costs if c["drafter"] == "A")
    near = row("A", 1, 2.6, [2.6 / cost_a["step_cost"]] * 2, forced=False)
    far = row("A", 1, 2.6, [1.0, 1.02], forced=False, causes=("host-bound",))
    other = row("C", 1, 2.6, [1.3, 1.3], forced=False)  # no forced runs of its own configuration: no prediction
    out = measured_vs_predicted(FORCED + [near, far, other], costs)
    assert len(out) == 2 and [m["gap"] for m in out] == [False, True]
    assert out[1]["predicted"] == pytest.approx(2.6 / cost_a["step_cost"])
    assert [c["word"] for c in out[1]["causes"]] == ["host-bound"]


def test_at_al_lines_without_forced_runs_say_so():
    assert lines([], [2.7]) == ["--at-al: no forced runs with a matched baseline here, so no step cost to predict from"]
    text = lines(configuration_costs(FORCED), [2.7, 4.25])
    assert len(text) == 2 and all("AL 2.7: " in t and "AL 4.25: " in t for t in text)
