"""The report's fleet section (launcher.report.fleet_section, fleet_plots): which gains the figure marks,
the section's words without a price and without energy, and nothing without a comparison."""
from __future__ import annotations

from launcher.report.fleet_plots import equal_speed_curves, marked
from launcher.report.fleet_section import fleet_section


def _iv(v):
    return {"mean": v, "lo": None, "hi": None, "n": 1}


def _reading(x, side, kind="equal", c=None):
    s = {"tps_per_gpu": _iv(1000.0), "joules_per_token": None, "usd_per_million_tokens": None, "at_least": False,
         "from_concurrency": [], "reached": 1}
    b = {**s, "tps_per_gpu": _iv(500.0)}
    return {"per_user_tps": x, "anchor": {"side": side, **({"concurrency": c} if c else {})}, "kind": kind,
            "gain": _iv(2.0) if kind in ("equal", "at least") else None, "speculative": s, "baseline": b}


def _point(c, x, y):
    return {"concurrency": c, "repeats": 1, "per_user_tps": _iv(x), "tps_per_gpu": _iv(y), "joules_per_token": None,
            "usd_per_million_tokens": None, "energy_source": None}


def _comparison():
    return {"job": "spec", "baseline_job": "base", "drafter": "eagle3 (eagle3 k=3)", "forced": None, "k": 3,
            "configuration": None, "dataset": "mtbench", "temperature": 0.0, "repeat_pairs": 1,
            "reach": {"speculative": {"fastest": {"per_user_tps": 300.0, "concurrency": 1},
                                      "slowest": {"per_user_tps": 100.0, "concurrency": 16}},
                      "baseline": {"fastest": {"per_user_tps": 200.0, "concurrency": 1},
                                   "slowest": {"per_user_tps": 100.0, "concurrency": 16}}},
            "both_cover": [100.0, 200.0], "only_speculative_above": 200.0,
            "at_speed": [_reading(300.0, "speculative", "baseline cannot reach", 1), _reading(200.0, "baseline", c=1),
                         _reading(199.0, "speculative", c=4), _reading(150.0, "asked"), _reading(100.0, "baseline", c=16)],
            "points": {"speculative": [_point(1, 300.0, 300.0), _point(16, 100.0, 3000.0)],
                       "baseline": [_point(1, 200.0, 100.0), _point(16, 100.0, 1500.0)]},
            "energy": {"speculative": {"source": None, "absent": "no GPU on this machine that NVML can read"},
                       "baseline": {"source": None, "absent": "no GPU on this machine that NVML can read"}}}


def test_the_figure_marks_the_baselines_speeds_first_and_never_two_that_would_overlap():
    got = [(a["anchor"]["side"], a["per_user_tps"]) for a in marked(_comparison())]
    # 199 lies within 4 % of the x range (200 tok/s wide) of the baseline's 200: dropped;
    # the speed only the speculative server reaches carries no gain: not marked
    assert got == [("baseline", 200.0), ("baseline", 100.0), ("asked", 150.0)]


def test_the_section_without_a_price_or_energy_says_so(tmp_path):
    html = fleet_section({"fleet": {"gpu_hour_price": None, "comparisons": [_comparison()]}}, tmp_path)
    assert "At equal per-user speed" in html and "No GPU-hour price was given" in html
    assert "$ per million" not in html and "no energy figures (no GPU on this machine" in html
    assert (tmp_path / "fleet_equal_speed.png").is_file()
    priced = fleet_section({"fleet": {"gpu_hour_price": 3.0, "price_source": "--gpu-hour-price",
                                      "comparisons": [_comparison()]}}, tmp_path)
    assert "Dollars at $3.00 per GPU-hour (--gpu-hour-price)" in priced and "$ per million output tokens" in priced


def test_no_comparison_no_section(tmp_path):
    assert fleet_section(None, tmp_path) == "" and fleet_section({"fleet": {"comparisons": []}}, tmp_path) == ""
    assert equal_speed_curves([], tmp_path / "x.png") is None
