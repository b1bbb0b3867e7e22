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


def req(i, start, end, acc):
    return {"id": str(i), "start_ns": start, "end_ns": end, "max_accepted": acc}


def test_most_constrained_requests_over_their_k_break_the_schedule():
    # concurrency 2, both requests in flight together the whole time: k(2) = 1; both accepted 3 in a step
    r = check_point(SCHED, [req(0, 0, 10, 3), req(1, 0, 10, 3)])
    assert r["applied"] is False and r["note"] == NOT_APPLIED
    assert (r["constrained_requests"], r["violating_requests"]) == (2, 2)
    assert r["violations"][0]["allowed_k"] == 1
    ok = check_point(SCHED, [req(0, 0, 10, 1), req(1, 0, 10, 1)])
    assert ok["applied"] is True and ok["violating_share"] == 0


def test_one_request_over_its_k_proves_nothing():
    # the client's in-flight count is not the server's batch (a request may sit in prefill):
    # measured with the schedule applied, 0 to 2 of 7 to 14 constrained requests broke it
    reqs = [req(i, 0, 10, 1) for i in range(7)] + [req(7, 0, 10, 3)]
    assert check_point(SCHED, reqs)["applied"] is True
    reqs = [req(i, 0, 10, 3) for i in range(5)] + [req(i, 0, 10, 1) for i in range(5, 8)]
    assert check_point(SCHED, reqs)["applied"] is False


def test_a_request_alone_for_a_while_may_use_the_larger_k():
    r = check_point(SCHED, [req(0, 0, 10, 3), req(1, 0, 5, 1)])  # the first alone from 5 to 10
    assert r["constrained_requests"] == 1 and r["applied"] is True


def test_no_constrained_request_cannot_tell():
    r = check_point(SCHED, [req(0, 0, 10, 3), req(1, 10, 20, 3)])  # never together: k=3 allowed throughout
    assert r["applied"] is None and r["note"].startswith("cannot tell")
    assert check_point(SCHED, [])["applied"] is None


def test_per_position_counters_beyond_every_allowed_k_break_the_schedule():
    reqs = [req(0, 0, 10, 1), req(1, 0, 10, 1)]
    assert check_point(SCHED, reqs, per_position_counts=[20.0, 0.0, 0.0])["applied"] is True
    r = check_point(SCHED, reqs, per_position_counts=[20.0, 4.0, 1.0])
    assert r["applied"] is False and r["accepted_beyond_largest_allowed_position"] == 5.0
