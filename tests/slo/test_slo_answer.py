"""At your SLO (launcher/speedup/slo.py): max load per configuration and the
recommendation per load range, ties to the simpler configuration."""
from __future__ import annotations

import pytest

from launcher.speedup import slo


def row(config, k, c, g, verdict="met", reps=None):
    return {"dataset": "mtbench", "temperature": 0.0, "concurrency": c, "config": config, "k": k,
            "goodput_rps": g, "good_output_tps": g * 30, "good_fraction": 1.0, "verdict": verdict,
            "goodput_repeats": reps}


ROWS = [
    # baseline: meets up to 4
    row("base", 0, 1, 1.0), row("base", 0, 2, 1.95), row("base", 0, 4, 3.5), row("base", 0, 8, 0.5, "failed"),
    # k=1: faster at 1 and 2, fails from 4
    row("k1", 1, 1, 1.5), row("k1", 1, 2, 2.0), row("k1", 1, 4, 1.0, "failed"),
    # k=3: ties with k=1 at 1 (within 5 %), fails at 2
    row("k3", 3, 1, 1.55), row("k3", 3, 2, 0.2, "failed"),
]


def test_max_load_per_configuration():
    (g,) = slo.recommend(ROWS)
    by = {c["label"]: c for c in g["configs"]}
    assert [c["label"] for c in g["configs"]] == ["baseline", "k=1", "k=3"]  # simplest first
    assert (by["baseline"]["max_concurrency"], by["baseline"]["first_not_met"]) == (4, 8)
    assert (by["k=1"]["max_concurrency"], by["k=3"]["max_concurrency"]) == (2, 1)


def test_recommendation_per_load_range_ties_go_to_the_simpler():
    (g,) = slo.recommend(ROWS)
    # judged where every configuration was measured (1 and 2). C=1: k3 1.55 vs k1 1.5: within 5 % -> k=1;
    # C=2: k3's max load is 1; k1 2.0 vs baseline 1.95: within 5 % -> baseline, up to its max load (4)
    assert [(p["concurrency"], p["label"]) for p in g["per_concurrency"]] == [(1, "k=1"), (2, "baseline")]
    assert [(r["from"], r["to"], r["label"]) for r in g["recommendation"]] == \
        [(1, 1, "k=1"), (2, 4, "baseline"), (5, None, "none meets the SLO")]
    (strict,) = slo.recommend(ROWS, tie_rel=0.0)
    # no ties: k=3 at 1; at 2 k=1 (2.0) up to its max load 2, then the baseline up to 4
    assert [(r["from"], r["to"], r["label"]) for r in strict["recommendation"]] == \
        [(1, 1, "k=3"), (2, 2, "k=1"), (3, 4, "baseline"), (5, None, "none meets the SLO")]


def test_a_schedule_point_the_engine_did_not_apply_is_not_recommended():
    sched = [[1, 1, 3], [2, 8, 1]]
    rows = ROWS + [dict(row("sched", None, c, 9.0), schedule=sched, schedule_check={"applied": c == 1})
                   for c in (1, 2)]
    (g,) = slo.recommend(rows)
    assert [(p["concurrency"], p["label"]) for p in g["per_concurrency"]] == [(1, "schedule"), (2, "baseline")]


def test_repeats_spread_makes_a_tie():
    rows = [row("base", 0, 1, 1.0, reps=[1.0, 0.8, 1.2]), row("k1", 1, 1, 1.15, reps=[1.15, 1.1, 1.2])]
    assert slo.recommend_at(rows, tie_rel=0.0)["config"] == "base"  # 0.15 apart, the baseline's MAD is 0.2
    rows[0]["goodput_repeats"] = [1.0, 1.0, 1.0]
    assert slo.recommend_at(rows, tie_rel=0.0)["config"] == "k1"


def test_only_points_that_meet_the_slo_are_recommended():
    assert slo.recommend_at([row("k1", 1, 4, 9.0, "noisy"), row("base", 0, 4, 1.0, "failed")]) is None


def test_parse_slo_arg():
    assert slo.parse_slo_arg("ttft_ms=300,tpot_ms=40,percentile=95") == {"ttft_ms": 300, "tpot_ms": 40,
                                                                         "percentile": 95}
    for bad, msg in (("ttft=3", "unknown key"), ("ttft_ms", "KEY=VALUE"), ("ttft_ms=x", "not a number"),
                     ("itl_ms=1,tpot_ms=2", "not both"), ("percentile=90", "no limit")):
        with pytest.raises(ValueError, match=msg):
            slo.parse_slo_arg(bad)


def test_report_section_renders_the_plot_and_the_tables(tmp_path):
    from launcher.report.slo_section import slo_section

    res = {"description": "p90 TTFT <= 300 ms", "source": "--slo", "tie_rel": 0.05,
           "goodput_agrees_with_aiperf": {"points_compared": 9, "agree": 9}, "groups": slo.recommend(ROWS)}
    html = slo_section(res, tmp_path)
    assert "At your SLO" in html and "agrees with AIPerf" in html and "9 of 9" in html
    assert (tmp_path / "slo_goodput_vs_concurrency.png").stat().st_size > 10_000
    assert "2–4" in html and "<b>baseline</b>" in html and "5 and above" in html
    assert slo_section(None, tmp_path) == ""


def test_a_schedule_point_is_predicted_by_the_fixed_k_it_gives_that_batch_size():
    sched = [[1, 1, 3], [2, 8, 1]]
    rows = ROWS + [dict(row("sched", None, 1, 1.4), schedule=sched, output_tps=50.0),
                   dict(row("sched", None, 2, 1.0), schedule=sched, output_tps=60.0)]
    rows = [dict(r, output_tps=r.get("output_tps", r["goodput_rps"] * 30)) for r in rows]
    (g,) = slo.recommend(rows)
    s = next(c for c in g["configs"] if c["label"] == "schedule")
    assert [(p["concurrency"], p["predicted"]["k"], p["predicted"]["goodput_rps"]) for p in s["points"]] == \
        [(1, 3, 1.55), (2, 1, 2.0)]
    assert g["configs"][-1]["label"] == "schedule"  # the least simple


def test_an_open_last_range_says_how_far_it_was_measured():
    rows = [row("base", 0, 1, 1.0), row("base", 0, 4, 3.0), row("k1", 1, 1, 0.5), row("k1", 1, 4, 0.5, "failed")]
    (g,) = slo.recommend(rows)
    assert [(r["from"], r["to"], r["label"], r.get("note")) for r in g["recommendation"]] == \
        [(1, None, "baseline", "met up to 4, the highest measured")]
