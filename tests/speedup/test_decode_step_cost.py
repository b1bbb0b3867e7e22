"""The decode-only step cost, and whether a configuration's step cost is the same at its forced
levels (issue 50: "two forced levels per drafter give its step cost and check that the cost is the
same at both").

The throughput's step cost (Server_AL / speedup) spreads each request's prefill over its steps,
and a request has fewer steps at a higher AL, so it rises with the AL; the decode-only cost
(Server_AL x TPOT / the baseline's TPOT) leaves the prefill out. Checked on synthetic rows and on
the recorded H100 run of qwen3_eagle3 at forced AL 2 and 3.5 (2 starts x 3 repeats), with the
expected figures computed here from repeats.json, not by the code under test."""
from __future__ import annotations

import json
from pathlib import Path
from statistics import mean

import pytest

from launcher.speedup import across
from launcher.speedup.break_even import repeat_decode_step_costs
from launcher.speedup.cli import main
from launcher.speedup.decompose import decode_cost_text, decomposition
from tests.speedup.recorded import DATA, results_copy

EAGLE3 = DATA / "h100_vllm026_qwen3_eagle3_2starts"
JOBS = {"2": "qwen3-8b-shaped-eagle3-k3-fal2-tp1-49dda453", "3.5": "qwen3-8b-shaped-eagle3-k3-fal3.5-tp1-15484f71"}
BASE = "qwen3-8b-shaped-none-tp1-0dcb1aec"


def _row(al: float, speedups: list[float], tpot_ratios: list[float]) -> dict:
    return {"server_al": al, "speedup": {"throughput": mean(speedups)}, "throughput_per_repeat": speedups,
            "tpot_ratio_per_repeat": tpot_ratios}


def test_the_decode_cost_is_the_al_times_each_repeats_tpot_ratio():
    row = _row(2.0, [1.6, 1.7], [0.58, 0.59])
    assert repeat_decode_step_costs(row) == pytest.approx([1.16, 1.18])
    d = decomposition(row)
    assert d["decode_step_cost"]["mean"] == pytest.approx(1.17)
    assert d["decode_step_cost"]["lo"] < 1.17 < d["decode_step_cost"]["hi"]
    assert decode_cost_text(d).startswith("1.17 [")


def test_no_tpots_no_decode_cost():
    row = _row(2.0, [1.6, 1.7], [])
    assert repeat_decode_step_costs(row) == []
    assert decomposition(row)["decode_step_cost"] is None
    assert decode_cost_text(decomposition(row)) == "–"
    assert repeat_decode_step_costs({"speedup": {"throughput": 1.5}, "tpot_ratio_per_repeat": [0.5]}) == []  # no AL


def _cost(m: float, lo: float, hi: float) -> dict:
    return {"mean": m, "lo": lo, "hi": hi, "n": 6}


def test_levels_agree_when_their_intervals_overlap():
    levels = {"2": {"step_cost": _cost(1.17, 1.16, 1.18)}, "3.5": {"step_cost": _cost(1.18, 1.175, 1.19)}}
    agree = across.levels_agree(levels)
    assert agree["intervals_overlap"] is True
    assert agree["spread_rel"] == pytest.approx(0.01 / 1.175)


def test_levels_do_not_agree_when_their_intervals_are_apart():
    levels = {"2": {"step_cost": _cost(1.17, 1.16, 1.18)}, "3.5": {"step_cost": _cost(1.22, 1.21, 1.23)}}
    assert across.levels_agree(levels)["intervals_overlap"] is False
    one_repeat = {"2": {"step_cost": _cost(1.17, None, None)}, "3.5": {"step_cost": _cost(1.17, None, None)}}
    assert across.levels_agree(one_repeat)["intervals_overlap"] is False  # no interval: not shown the same
    assert across.levels_agree({"2": {"step_cost": _cost(1.17, 1.16, 1.18)}}) is None
    assert across.levels_agree(levels, "decode_step_cost") is None


def _per_repeat(job: str, c: int, figure: str) -> list[float]:
    doc = json.loads((EAGLE3 / job / "mtbench" / f"t0_c{c}" / "repeats.json").read_text())
    return [r[figure] for r in doc["per_repeat"]]


def _server_al(job: str, c: int) -> float:
    rows = json.loads((EAGLE3 / job / "summary.json").read_text())["points"]
    return next(r["Server_AL"] for r in rows if r["concurrency"] == c)


@pytest.fixture(scope="module")
def eagle3(tmp_path_factory):
    root = tmp_path_factory.mktemp("eagle3")
    folder = results_copy(EAGLE3, root / "qe")
    out = root / "c.json"
    assert main([str(folder), "--out", str(out)]) == 0
    return {r["concurrency"]: r for r in json.loads(out.read_text())["rows"]}


@pytest.mark.parametrize("c", [1, 4, 16, 64])
def test_the_recorded_eagle3_costs_per_level_are_its_repeats(eagle3, c):
    row = eagle3[c]
    assert set(row["levels"]) == {"2", "3.5"}
    for level, job in JOBS.items():
        al = _server_al(job, c)
        tps = [s / b for s, b in zip(_per_repeat(job, c, "Output TPS"), _per_repeat(BASE, c, "Output TPS"))]
        tpot = [s / b for s, b in zip(_per_repeat(job, c, "TPOT s"), _per_repeat(BASE, c, "TPOT s"))]
        assert len(tps) == len(tpot) == 6  # 2 starts x 3 repeats
        got = row["levels"][level]
        assert got["step_cost"]["mean"] == pytest.approx(mean(al / x for x in tps))
        assert got["decode_step_cost"]["mean"] == pytest.approx(mean(al * x for x in tpot))
        assert got["decode_step_cost"]["n"] == 6


def test_the_prefill_is_why_the_throughputs_step_cost_rises_with_the_al(eagle3):
    """At every C the throughput's cost is higher at AL 3.5 than at 2, and the decode-only cost
    moves less: what the forced levels disagree on is the prefill's share, not the step."""
    for c, row in eagle3.items():
        thr, dec = row["levels_agree"]["step_cost"], row["levels_agree"]["decode_step_cost"]
        lv = row["levels"]
        assert lv["3.5"]["step_cost"]["mean"] > lv["2"]["step_cost"]["mean"], c
        assert dec["spread_rel"] < thr["spread_rel"], c
