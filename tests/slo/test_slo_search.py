"""The max-load search over concurrency (launcher/results/slo_search.py)."""
from __future__ import annotations

from launcher.results.slo_search import FAILED, MET, NOISY, boundary, max_load, next_probe


def run_search(truth, start, probes=10):
    """Drive the search against a server whose verdict at c is truth(c); returns (verdicts, probes used)."""
    v = {c: truth(c) for c in start}
    used = 0
    while used < probes and (c := next_probe(v)) is not None:
        assert c not in v
        v[c] = truth(c)
        used += 1
    return v, used


def test_bisects_between_the_last_met_and_the_first_failed():
    assert boundary({1: MET, 2: MET, 8: FAILED, 16: FAILED}) == (2, 8)
    assert next_probe({1: MET, 2: MET, 8: FAILED}) == 5
    v, used = run_search(lambda c: MET if c <= 6 else FAILED, [1, 2, 8, 16])
    assert max_load(v)["max_concurrency"] == 6 and max_load(v)["first_not_met"] == 7
    assert max_load(v)["status"] == "exact" and used == 3 and {5, 6, 7} <= set(v)  # 2..8: 5, 6, then 7


def test_neighbours_need_no_probe():
    assert next_probe({1: MET, 2: FAILED}) is None
    assert max_load({1: MET, 2: FAILED})["status"] == "exact"


def test_met_everywhere_is_unbounded():
    r = max_load({1: MET, 2: MET, 4: MET})
    assert r["max_concurrency"] == 4 and r["status"] == "unbounded" and next_probe({1: MET, 4: MET}) is None


def test_not_met_at_the_lowest_load_probes_down_to_one():
    assert next_probe({4: FAILED, 8: FAILED}) == 2
    v, _ = run_search(lambda c: FAILED, [4, 8])
    assert max_load(v)["max_concurrency"] is None and max_load(v)["status"] == "never_met" and 1 in v


def test_a_noisy_boundary_stops_the_search():
    v = {1: MET, 2: NOISY, 8: FAILED}
    assert next_probe(v) is None
    r = max_load(v)
    assert r["max_concurrency"] == 1 and r["first_not_met"] == 2 and r["status"] == "within_noise"


def test_probes_run_out():
    v, used = run_search(lambda c: MET if c <= 37 else FAILED, [1, 64], probes=2)
    assert used == 2 and max_load(v)["status"] == "probes_exhausted"
    v, _ = run_search(lambda c: MET if c <= 37 else FAILED, [1, 64])
    assert max_load(v)["max_concurrency"] == 37


def test_an_unmeasured_point_stops_the_search():
    assert next_probe({1: MET, 4: None, 8: FAILED}) is None
    assert max_load({1: MET, 4: None})["status"] == "unmeasured"


def test_a_met_point_above_a_failed_one_is_within_noise():
    # measured on the CPU stack: TTFT p90 over the SLO at concurrency 1 (a cold first phase), met at 2 and 4
    v = {1: FAILED, 2: MET, 4: MET}
    assert next_probe(v) is None
    r = max_load(v)
    assert r["status"] == "within_noise" and r["max_concurrency"] is None and "met at 2, 4" in r["note"]
