"""tests/support/timeline.py: where the suite's wall time goes, per worker (busy, idle, gaps), from
the lines the conftest hook writes; and the hook itself, in a pytest run of its own."""
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support import timeline

REPO = Path(__file__).resolve().parents[1]


def _row(worker, nodeid, start, end):
    return json.loads(timeline.record_line(worker, nodeid, start, end))


def test_busy_idle_and_the_gap_while_the_other_worker_runs_alone():
    rows = [_row("gw0", "tests/e2e/test_a.py::t1", 100, 300),      # a unit alone: 200 s
            _row("gw1", "tests/test_b.py::t1", 100, 150),
            _row("gw1", "tests/test_b.py::t2", 150, 160),          # light files run out at 60 s
            _row("gw1", "tests/e2e/test_c.py::t1", 300, 400)]      # the next unit once gw0 is done
    s = timeline.summary(rows)
    assert s["wall_s"] == 300
    w0, w1 = s["workers"]["gw0"], s["workers"]["gw1"]
    assert (w0["busy_s"], w0["idle_s"], w0["end_s"]) == (200, 100, 200)
    assert (w1["busy_s"], w1["idle_s"], w1["end_s"]) == (160, 140, 300)
    assert [f["file"] for f in w1["files"]] == ["tests/test_b.py", "tests/e2e/test_c.py"]
    assert w1["files"][0] == {"file": "tests/test_b.py", "start_s": 0, "end_s": 60}
    assert w1["gaps"] == [{"after": "tests/test_b.py", "at_s": 60, "gap_s": 140}]
    text = "\n".join(timeline.lines(s))
    assert "gw1: busy 160 s, idle 140 s, ends at 300 s" in text and "gap of 140 s at 60 s" in text


def test_the_hook_records_each_test_of_a_run(tmp_path):
    """The pure test above, run by a pytest of its own with the variable set: one line for it."""
    out = tmp_path / "timeline.jsonl"
    pure = "tests/test_timeline.py::test_busy_idle_and_the_gap_while_the_other_worker_runs_alone"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}  # not this worker's
    env["SPECDEC_TEST_TIMELINE"] = str(out)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n0", "-p", "no:cacheprovider", pure],
                       cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["file"] for r in rows] == ["tests/test_timeline.py"]
    assert rows[0]["worker"] == "main" and rows[0]["end"] >= rows[0]["start"]
    assert timeline.main([str(out)]) == 0


def test_unit_seconds_add_each_units_tests(tmp_path):
    rows = [_row("gw0", "tests/e2e/test_a.py::t1", 0, 100), _row("gw0", "tests/e2e/test_b.py::t1", 100, 130),
            _row("gw1", "tests/e2e/test_a.py::t2", 0, 20), _row("gw1", "tests/test_c.py::t1", 20, 21.5)]
    units = timeline.unit_seconds(rows, {"tests/e2e/test_a.py": "slurm", "tests/e2e/test_b.py": "slurm"})
    assert units == {"slurm": 150.0, "tests/test_c.py": 1.5}
    src = tmp_path / "t.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "units.json"
    assert timeline.main([str(src), "--unit-seconds", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["units"]["tests/test_c.py"] == 1.5 and "4 tests" in written["recorded"]
    assert timeline.main([str(src), "--unit-seconds"]) == 2
