"""A server's curve read at a per-user speed (launcher.speedup.equal_speed), on small hand-made curves."""
from __future__ import annotations

import pytest

from launcher.speedup.equal_speed import CurvePoint, read_at, reach, usd_per_million

# per-user speed falls and throughput rises with C: the usual curve
CURVE = [CurvePoint(1, 100.0, 100.0, 400.0), CurvePoint(4, 90.0, 360.0, 420.0), CurvePoint(16, 60.0, 960.0, 600.0)]


def test_between_two_points_the_line_between_them_is_read_with_its_power():
    r = read_at(CURVE, 75.0)  # halfway from C=4 (90) to C=16 (60)
    assert r.tps_per_gpu == pytest.approx(660.0) and r.watts_per_gpu == pytest.approx(510.0)
    assert r.from_concurrency == (4, 16) and not r.at_least
    assert r.joules_per_token == pytest.approx(510.0 / 660.0)


def test_at_a_measured_point_its_own_figures():
    r = read_at(CURVE, 90.0)
    assert r.tps_per_gpu == pytest.approx(360.0) and r.watts_per_gpu == pytest.approx(420.0)


def test_never_past_the_fastest_point_and_a_lower_bound_below_the_slowest():
    assert read_at(CURVE, 100.5) is None  # no measured point is that fast per user
    low = read_at(CURVE, 30.0)  # slower than C=16: C=16 keeps the promise, more C was not measured
    assert low.at_least and low.tps_per_gpu == 960.0 and low.from_concurrency == (16,)


def test_a_faster_point_with_more_throughput_wins_over_the_line():
    """C=64 gave less per GPU than C=16 at a lower speed: C=16 keeps any promise below its speed,
    so the line from C=16 down to C=64 is not what a GPU serves there."""
    bent = CURVE + [CurvePoint(64, 20.0, 800.0, 610.0)]
    r = read_at(bent, 40.0)
    assert r.tps_per_gpu == 960.0 and r.from_concurrency == (16,) and not r.at_least


def test_order_of_the_points_does_not_matter_and_missing_power_stays_missing():
    r = read_at(list(reversed(CURVE)), 75.0)
    assert r.tps_per_gpu == pytest.approx(660.0)
    no_power = [CurvePoint(p.concurrency, p.per_user_tps, p.tps_per_gpu) for p in CURVE]
    r = read_at(no_power, 75.0)
    assert r.watts_per_gpu is None and r.joules_per_token is None


def test_reach_and_the_dollar_figure():
    assert reach(CURVE) == {"fastest": {"per_user_tps": 100.0, "concurrency": 1},
                            "slowest": {"per_user_tps": 60.0, "concurrency": 16}}
    # $3.60 an hour at 1,000 tok/s: 3.6e6 tokens for $3.60, so $1 per million
    assert usd_per_million(1000.0, 3.60) == pytest.approx(1.0)


def test_a_positive_figures_interval_stops_at_zero():
    """Two repeats far apart: Student's t (12.7) would put the lower end below 0 tok/s."""
    from launcher.speedup.fleet import interval
    iv = interval([100.0, 1000.0])
    assert iv["lo"] == 0.0 and iv["hi"] > 1000.0 and iv["mean"] == 550.0
    assert interval([100.0, 101.0])["lo"] > 0
