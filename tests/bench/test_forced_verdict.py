"""Forced acceptance's known answer: the server's counters give the forced AL, within
the sampling noise of vLLM's synthetic mechanism. Checked on hand-worked figures and on
the counters the H200 recorded (tests/data/h200_vllm026/PROVENANCE.md)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from launcher.engines import forced_acceptance as fa

H200 = Path(__file__).resolve().parents[1] / "data" / "h200_vllm026"


@pytest.mark.parametrize("forced,k,rates", [
    ({"length": 2.5}, 3, [1.0, 0.5, 0.0]),
    ({"length": 1.0}, 3, [0.0, 0.0, 0.0]),
    ({"length": 4.0}, 3, [1.0, 1.0, 1.0]),
    ({"length": 3.25}, 4, [1.0, 1.0, 0.25, 0.0]),
    ({"rates": [0.9, 0.5, 0.1]}, 3, [0.9, 0.5, 0.1]),
])
def test_expected_rates(forced, k, rates):
    assert fa.expected_rates(forced, k) == pytest.approx(rates)


def test_tolerance_is_z_standard_errors_of_the_accepted_drafts_per_step():
    # L=2.5, k=3: A is 1 or 2 with probability 1/2 each: sd 0.5 per step.
    v = fa.verdict({"length": 2.5}, 3, num_drafts=10000, num_accepted=15000)
    assert v["expected_al"] == 2.5 and v["measured_al"] == 2.5 and v["passed"]
    assert v["tolerance"] == pytest.approx(fa.Z * 0.5 / math.sqrt(10000), abs=1e-4)
    # rates [0.9, 0.5, 0.1]: E[A] = 1.5, E[A^2] = 0.9 + 3*0.5 + 5*0.1 = 2.9, var 0.65
    v = fa.verdict({"rates": [0.9, 0.5, 0.1]}, 3, num_drafts=400, num_accepted=600)
    assert v["expected_al"] == 2.5 and v["tolerance"] == pytest.approx(fa.Z * math.sqrt(0.65 / 400), abs=1e-4)


def test_an_integer_length_has_only_the_floor():
    assert fa.verdict({"length": 4.0}, 3, 100, 300)["passed"]
    v = fa.verdict({"length": 4.0}, 3, 100, 299)
    assert v["tolerance"] == fa.FLOOR and not v["passed"]


def test_no_counters_is_unknown_not_a_pass():
    res = fa.run_verdicts({"length": 2.5}, 3, [{"dataset": "mtbench", "temperature": 0.0, "num_drafts": 0}])
    assert res["verdict"] == "unknown" and res["runs"][0]["passed"] is None
    assert "no server counters read" in fa.verdict_line(fa.run_verdicts({"length": 2.5}, 3, []))


@pytest.mark.parametrize("length", [1.5, 2.5, 3.5])
def test_the_h200_counters_give_the_forced_length(length):
    summary = json.loads((H200 / f"forced_{length}.summary.json").read_text())
    res = fa.run_verdicts({"length": length}, 3, summary["prometheus_runs"])
    assert res["verdict"] == "pass", res
    (run,) = res["runs"]
    assert run["points"] == ["mtbench/t0_c1", "mtbench/t0_c8", "mtbench/t0_c32"]
    assert abs(run["measured_al"] - length) <= run["tolerance"] < 0.05


@pytest.mark.parametrize("length", [1.5, 2.5, 3.5])
def test_a_mechanism_off_by_two_percent_fails(length):
    summary = json.loads((H200 / f"forced_{length}.summary.json").read_text())
    runs = [dict(r, num_accepted_tokens=r["num_accepted_tokens"] - 0.02 * length * r["num_drafts"])
            for r in summary["prometheus_runs"]]
    res = fa.run_verdicts({"length": length}, 3, runs)
    assert res["verdict"] == "fail"
    assert fa.verdict_line(res).startswith(f"forced AL {length:g}: FAIL (mtbench T=0: measured ")


def test_counter_windows_take_each_run_once_and_single_points_from_their_own_window(tmp_path):
    from launcher.bench.cli import PointOutcome, counter_windows

    summary = json.loads((H200 / "forced_2.5.summary.json").read_text())
    outcomes = [PointOutcome("mtbench", 0.0, c, status="complete") for c in (1, 8, 32)]
    assert counter_windows(summary["prometheus_runs"], outcomes, tmp_path) == summary["prometheus_runs"]
    # a point not covered by a run and not complete contributes nothing
    extra = PointOutcome("mtbench", 0.7, 1, status="failed")
    assert counter_windows(summary["prometheus_runs"], outcomes + [extra], tmp_path) == summary["prometheus_runs"]
