"""The break-even AL of forced-acceptance runs with its interval (launcher.speedup.break_even),
over the H100 repeats recorded for issue 37 and over two levels that bracket 1x."""
import json
from pathlib import Path

import pytest

from launcher.speedup.break_even import break_even, interpolated, one_line

REC = json.loads((Path(__file__).resolve().parents[1] / "data" / "gpu_repeats_issue37" / "recorded.json").read_text())


def _row(c, al, spec, base, forced=3.5, k=3):
    ratios = [s / b for s, b in zip(spec, base)]
    return {"dataset": "mtbench", "temperature": 0.0, "concurrency": c, "k": k, "server_al": al,
            "forced_acceptance": {"length": forced}, "speedup": {"throughput": sum(ratios) / len(ratios)},
            "throughput_per_repeat": ratios}


def test_the_break_even_is_the_step_cost_with_its_interval():
    h100 = REC["machines"]["H100"]
    rows = [_row(int(c), 3.5, h100["speculative"][c], h100["baseline"][c]) for c in ("1", "64")]
    (c1, c64) = break_even(rows)
    # C=1: speedup 1.78 at AL 3.5, so a step costs 3.5 / 1.78 = 1.97 baseline steps
    assert c1["break_even_al"] == pytest.approx(3.5 / (286.6 / 161.17), rel=0.01)
    assert c1["lo"] < c1["break_even_al"] < c1["hi"] and c1["hi"] - c1["lo"] < 0.1
    assert c64["break_even_al"] == pytest.approx(2.27, abs=0.02) and c64["n"] == 3
    assert c1["interpolated"] is None       # one level brackets nothing
    assert "break-even AL 1.97 [" in one_line(c1)


def test_two_levels_give_the_interpolation_and_pool_the_cost():
    rows = [_row(1, 2.5, [90.0, 92.0], [100.0, 100.0], forced=2.5), _row(1, 3.5, [126.0, 128.0], [100.0, 100.0])]
    (b,) = break_even(rows)
    assert b["n"] == 4 and [lv["forced"] for lv in b["levels"]] == [2.5, 3.5]
    assert b["interpolated"] == pytest.approx(2.5 + (1 - 0.91) / (1.27 - 0.91))
    assert b["levels"][0]["step_cost"] == pytest.approx(b["levels"][1]["step_cost"], rel=0.02)
    assert interpolated([(3.5, 1.2), (2.5, 1.1)]) is None     # both above 1x: not bracketed


def test_a_point_without_repeats_gives_an_estimate_without_interval():
    r = _row(4, 3.5, [200.0], [100.0])
    (b,) = break_even([r])
    assert b["break_even_al"] == 1.75 and b["lo"] is None and "no interval" in one_line(b)
    assert break_even([{**r, "forced_acceptance": None}]) == []
