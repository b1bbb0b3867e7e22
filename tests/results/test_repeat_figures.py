"""A repeat's figures: its TPOT counts the server's tokens, not AIPerf's re-tokenized text; its
request counts feed the validity rule over every repeat."""
from __future__ import annotations

import pytest

from launcher.results.records import TurnRecord
from launcher.results.repeats.record import build, compact, held_repeat, repeat_figures
from launcher.results.validity import repeat_problems


def _turn(i: int, osl: int, completion: int | None) -> TurnRecord:
    return TurnRecord(where=f"x:{i}", conversation_id=str(i), turn_index=0, phase="profiling", profiling_index=0,
                      failed=False, start_ns=0, end_ns=1, osl=osl, ttft_ms=100.0, latency_ms=1100.0, spec=None,
                      completion_tokens=completion)


def test_tpot_uses_the_servers_completion_tokens():
    # 1 s of decode after the first token: 256 server tokens -> 1/255 s a token,
    # whatever AIPerf's re-tokenization of the text counted (1261 here, as on the H200)
    got = repeat_figures({}, {}, [_turn(i, 1261, 256) for i in range(3)])
    assert got["TPOT s"] == pytest.approx(1.0 / 255)


def test_tpot_falls_back_to_aiperfs_count_without_usage():
    got = repeat_figures({}, {}, [_turn(0, 101, None)])
    assert got["TPOT s"] == pytest.approx(1.0 / 100)


def test_each_repeat_keeps_its_failed_and_successful_request_counts():
    tim = {"Output TPS": 10.0, "specdec_launcher": {"failed_requests": 2, "num_turns": 38}}
    got = repeat_figures({}, tim, [])
    assert (got["failed_requests"], got["succeeded_requests"]) == (2, 38)
    # a timing object without our extension (specdec_bench's own) gives no counts, not zeros
    assert repeat_figures({}, {"Output TPS": 10.0}, [])["failed_requests"] is None


def _rows(*failed):
    return [{"repeat": i + 1, "phase": f"p1_c4_r{i + 1}", "Output TPS": 100.0 + i, "failed_requests": f,
             "succeeded_requests": 40 - f if f is not None else None} for i, f in enumerate(failed)]


def test_a_repeat_that_lost_requests_breaks_the_rule_whichever_repeat_the_files_hold():
    # repeat 3 lost 4 of 40 (10 % > 5 %); the files hold repeat 2 (the median), which lost none
    rows = _rows(0, 0, 4)
    assert build(rows, held_repeat(rows))["files_hold"]["repeat"] == 2
    assert repeat_problems(rows, 0.05) == ["repeat 3 (p1_c4_r3): 4 of 40 requests failed (> 5%)"]
    assert repeat_problems(rows, 0.10) == []          # at the allowed fraction, not above it
    assert repeat_problems(_rows(1, 0, 0), 0.05) == []  # 1 of 40 is within 5 %
    assert repeat_problems(_rows(None, None), 0.0) == []  # rows written before the counts: nothing to judge


def test_the_summary_row_sums_every_repeats_failures():
    assert compact(build(_rows(0, 1, 2), 1))["failed_requests"] == 3
    assert compact(build(_rows(None, None), 0))["failed_requests"] is None


def test_the_job_logs_table_gives_every_repeats_failed_requests():
    import io
    from launcher.bench.sweep_table import print_table
    row = {"dir": "mtbench/t0_c1", "temperature": 0.0, "status": "complete", "Output TPS": 100.0,
           "failed_requests": 0, "repeats": compact(build(_rows(0, 1, 2), 1))}
    buf = io.StringIO()
    print_table({"points": [row]}, buf)
    out = buf.getvalue()
    assert "3 (n=3)" in out and "the failed requests of all N repeats" in out
