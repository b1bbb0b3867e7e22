"""summary.json's point rows through their one owner (launcher.results.summary.PointRow):
typed, written with today's keys, and every summary on disk (of earlier versions too)
reads back exactly as it was."""
import json
from pathlib import Path

import pytest

from launcher.results.summary import ROW_KEY, PointRow, point_rows, row_dicts

TESTS = Path(__file__).resolve().parents[1]
SUMMARIES = sorted(TESTS.rglob("summary.json"))

# The keys a row the benchmark starts has (specdec_bench-facing names: the file's format).
STARTED = ["dataset", "temperature", "concurrency", "dir", "status", "reason", "Average_AL", "Server_AL",
           "Output TPS", "TTFT median s", "Decode tok/s median", "failed_requests", "benchmark_duration_s"]


def test_fixture_summaries_exist():
    assert len(SUMMARIES) >= 10


@pytest.mark.parametrize("path", SUMMARIES, ids=lambda p: str(p.relative_to(TESTS)))
def test_every_summary_on_disk_round_trips(path):
    summary = json.loads(path.read_text())
    rows = point_rows(summary)
    assert rows and len(rows) == len(summary["points"])
    assert row_dicts(rows) == summary["points"]
    for row, raw in zip(rows, summary["points"]):
        assert row.output_tps == raw.get("Output TPS") and row.average_al == raw.get("Average_AL")
        assert row.dir == raw["dir"] and row.status == raw["status"]


def test_a_started_row_has_todays_keys_and_figures_fill_it():
    row = PointRow.begun("mtbench", 0.0, 4, "mtbench/t0_c4")
    assert list(row.to_dict()) == STARTED and row.to_dict()["failed_requests"] == 0
    measured = row.with_figures({"Output TPS": 812.5, "Average_AL": 2.25, "Prometheus_AL": None, "TTFT count": 40,
                                 "a_newer_figure": 1})
    d = measured.to_dict()
    assert d["Output TPS"] == 812.5 and measured.output_tps == 812.5 and measured.ttft_count == 40
    assert "Prometheus_AL" in d and d["Prometheus_AL"] is None  # held: written as given
    assert d["a_newer_figure"] == 1 and list(d)[:len(STARTED)] == STARTED
    assert PointRow.from_dict(d).to_dict() == d


def test_planned_rows_keep_their_few_keys():
    d = PointRow.planned("specbench", 0.0, 1, "specbench/t0_c1").to_dict()
    assert d == {"dataset": "specbench", "temperature": 0.0, "concurrency": 1, "dir": "specbench/t0_c1",
                 "status": "pending", "reason": None}


def test_every_row_field_has_one_key():
    fields = [f for f in PointRow.__dataclass_fields__ if f not in ("held", "extra")]
    assert sorted(fields) == sorted(ROW_KEY) and len(set(ROW_KEY.values())) == len(ROW_KEY)
