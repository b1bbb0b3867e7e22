"""The dynamic-k schedule check (launcher/results/schedule_check.py)."""
from __future__ import annotations

from launcher.results.schedule_check import NOT_APPLIED, allowed_k, check_point, in_flight_range, k_for_batch

SCHED = [[1, 1, 3], [2, 8, 1]]  # the schedule: k=3 alone, k=1 from two in flight


def test_k_for_batch_follows_vllm_ranges():
    assert [k_for_batch(SCHED, b) for b in (1, 2, 8, 9, 64)] == [3, 1, 1, 1, 1]  # past the last range: its k
    assert allowed_k(SCHED, 1, 2) == 3 and allowed_k(SCHED, 2, 2) == 1


def test_in_flight_range():
    iv = [(0, 10), (2, 8), (9, 20)]
    assert in_flight_range(iv, 0) == (1, 2)  # alone at 0, with the second from 2 to 8, then the third at 9
    assert in_flight_range(iv, 1) == (2, 2)
    assert in_flight_range(iv, 2) == (1, 2)


def test_a_request_always_in_a_batch_of_two_may_accept_one_draft_a_step():
    # concurrency 2, both requests in flight together the whole time: k(2) = 1
    reqs = [{"id": "a", "start_ns": 0, "end_ns": 10, "max_accepted": 3},
            {"id": "b", "start_ns": 0, "end_ns": 10, "max_accepted": 1}]
    r = check_point(SCHED, reqs)
    assert r["applied"] is False and r["note"] == NOT_APPLIED and r["violating_requests"] == 1
    assert r["violations"][0]["allowed_k"] == 1
    reqs[0]["max_accepted"] = 1
    assert check_point(SCHED, reqs)["applied"] is True


def test_a_request_alone_for_a_while_may_use_the_larger_k():
    reqs = [{"id": "a", "start_ns": 0, "end_ns": 10, "max_accepted": 3},  # alone from 5 to 10
            {"id": "b", "start_ns": 0, "end_ns": 5, "max_accepted": 1}]
    assert check_point(SCHED, reqs)["applied"] is True


def test_per_position_counters_beyond_every_allowed_k_break_the_schedule():
    reqs = [{"id": "a", "start_ns": 0, "end_ns": 10, "max_accepted": 1},
            {"id": "b", "start_ns": 0, "end_ns": 10, "max_accepted": 1}]
    assert check_point(SCHED, reqs, per_position_counts=[20.0, 0.0, 0.0])["applied"] is True
    r = check_point(SCHED, reqs, per_position_counts=[20.0, 4.0, 1.0])
    assert r["applied"] is False and r["accepted_beyond_largest_allowed_position"] == 5.0


def test_no_requests_cannot_tell():
    assert check_point(SCHED, [])["applied"] is None
