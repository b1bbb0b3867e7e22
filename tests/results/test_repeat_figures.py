"""A repeat's TPOT counts the server's tokens, not AIPerf's re-tokenized text."""
from __future__ import annotations

import pytest

from launcher.results.records import TurnRecord
from launcher.results.repeats.record import repeat_figures


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
