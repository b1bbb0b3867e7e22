"""The suite's spread over xdist workers (tests/support/workers.py): the files that use one
costly session fixture are one unit of work, read from their text, and that reading agrees with
what collection finds."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support import workers

ROOT = Path(__file__).resolve().parents[1]


def test_files_using_one_costly_fixture_are_one_unit_and_two_fixtures_join_their_units(tmp_path):
    (tmp_path / "a.py").write_text("def test_a(smoke_run): pass\n")
    (tmp_path / "b.py").write_text("def test_b(smoke_run, slurm_cluster): pass\n")
    (tmp_path / "c.py").write_text("def test_c(slurm_cluster): pass\n")
    (tmp_path / "d.py").write_text("def test_d(spec_server): pass\n")
    (tmp_path / "e.py").write_text("def test_e(tmp_path): pass  # smoke_runner is another word\n")
    g = workers.file_groups(tmp_path, ["a.py", "b.py", "c.py", "d.py", "e.py"])
    assert g["a.py"] == g["b.py"] == g["c.py"]  # b joins the smoke run's and the cluster's units
    assert g["d.py"] == "vllm-servers" != g["a.py"]
    assert g["e.py"] == "e.py"


def test_the_text_reading_agrees_with_collection(request):
    """Every collected test that uses a costly session fixture (directly or through other
    fixtures) is in that fixture's unit: else the fixture would start on two workers."""
    items = request.session.items
    files = sorted({str(Path(str(i.fspath)).relative_to(ROOT)) for i in items})
    groups = workers.file_groups(ROOT, files)
    unit_of_fixture: dict[str, set] = {}
    for item in items:
        for fixture in set(getattr(item, "fixturenames", ())) & workers.SHARED_ON_ONE_WORKER.keys():
            unit_of_fixture.setdefault(fixture, set()).add(groups[str(Path(str(item.fspath)).relative_to(ROOT))])
    for fixture, units in unit_of_fixture.items():
        assert len(units) == 1, f"{fixture} is used in several units of work: {sorted(units)}"


def test_a_unit_that_runs_alone_waits_for_the_others_and_keeps_them_waiting():
    alone = {"slurm", "repeats.py"}
    # the other worker is free: the first waiting unit, alone or not
    assert workers.next_unit(["slurm", "a.py"], alone, [[]]) == "slurm"
    assert workers.next_unit(["a.py", "slurm"], alone, [[]]) == "a.py"
    # the other worker runs a unit that may have company: the first unit that may too
    assert workers.next_unit(["slurm", "repeats.py", "a.py", "b.py"], alone, [["c.py"]]) == "a.py"
    assert workers.next_unit(["slurm", "repeats.py"], alone, [["c.py"]]) is None
    # the other worker runs a unit that runs alone: nothing, whatever waits
    assert workers.next_unit(["a.py", "slurm"], alone, [["slurm-multinode", "repeats.py"]]) is None
    assert workers.next_unit([], alone, [[]]) is None


def test_beside_a_unit_that_runs_alone_only_light_units_run():
    alone, light = {"slurm", "repeats.py"}, {"u1.py", "u2.py"}
    # beside a unit that runs alone: the first light unit, never a unit that starts real parts
    assert workers.next_unit(["repeats.py", "a.py", "u1.py", "u2.py"], alone, [["slurm"]], light) == "u1.py"
    assert workers.next_unit(["repeats.py", "a.py"], alone, [["slurm"]], light) is None
    # beside a light unit, a unit that runs alone may start; beside a real one it may not
    assert workers.next_unit(["slurm", "a.py", "u2.py"], alone, [["u1.py"]], light) == "slurm"
    assert workers.next_unit(["slurm", "a.py", "u2.py"], alone, [["b.py"]], light) == "a.py"
    # with nothing marked light, the rule of the test above
    assert workers.next_unit(["slurm", "a.py"], alone, [["u1.py"]]) == "a.py"


def test_light_files_read_from_their_code_start_no_real_part():
    """The files the scheduler reads as light are those none of whose collected tests carries
    the e2e or slurm mark (tests/conftest.py marks by fixture, transitively, and by folder)."""
    p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider",
                        "-m", " or ".join(workers.REAL_PART_MARKS)], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    real = {line.split("::", 1)[0] for line in p.stdout.splitlines() if "::" in line}
    assert p.returncode == 0 and real, p.stdout[-2000:] + p.stderr[-2000:]
    files = [str(f.relative_to(ROOT)) for f in sorted((ROOT / "tests").rglob("test_*.py"))]
    light = {f for f in files if workers.is_light(ROOT, f)}
    assert light and not light & real, sorted(light & real)  # no file read as light starts a real part
    assert set(files) - real <= light, sorted(set(files) - real - light)  # and every file without one is light


def test_the_mark_read_from_the_files_agrees_with_collection():
    """The scheduler reads takes_both_cores from each file's code: the files it finds are those
    whose collected tests carry the mark (the whole suite collected, whatever this run selects)."""
    p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider",
                        "-m", workers.ALONE_MARK], cwd=ROOT, capture_output=True, text=True, timeout=300)
    marked = {line.split("::", 1)[0] for line in p.stdout.splitlines() if "::" in line}
    assert p.returncode == 0 and marked, p.stdout[-2000:] + p.stderr[-2000:]
    files = [str(f.relative_to(ROOT)) for f in sorted((ROOT / "tests").rglob("test_*.py"))]
    assert {f for f in files if workers.runs_alone(ROOT / f)} == marked


def test_two_workers_only_where_two_processes_run_at_full_speed(monkeypatch):
    assert workers.workers_for(2, 1.96) == 2
    assert workers.workers_for(2, 1.2) == 1  # hyperthreads of one core, a CPU quota
    assert workers.workers_for(1, 1.0) == 1
    monkeypatch.setenv("SPECDEC_TEST_WORKERS", "3")
    assert workers.auto_workers() == (3, "SPECDEC_TEST_WORKERS")
    monkeypatch.delenv("SPECDEC_TEST_WORKERS")
    n, why = workers.auto_workers()
    assert n in (1, 2) and "two processes at once did" in why


def test_units_wait_alone_first_then_the_costly_longest_first_then_the_light():
    units = ["u1.py", "slurm", "a.py", "b.py", "new.py", "u2.py", "repeats.py", "a.py"]
    alone = {"slurm", "repeats.py"}
    real = {"slurm": 5, "repeats.py": 2, "a.py": 9, "b.py": 1, "new.py": 1}
    seconds = {"slurm": 400.0, "repeats.py": 600.0, "a.py": 50.0, "b.py": 300.0, "u1.py": 5.0, "u2.py": 30.0}
    assert workers.unit_order(units, alone, real, seconds) == [
        "repeats.py", "slurm",            # alone, the longer first
        "b.py", "new.py", "a.py",         # real parts by recorded seconds (new.py: UNKNOWN_UNIT_S), not by test count
        "u2.py", "u1.py"]                 # light
    # nothing recorded: collection order within each kind
    assert workers.unit_order(units, alone, real, {}) == ["slurm", "repeats.py", "a.py", "b.py", "new.py",
                                                          "u1.py", "u2.py"]


def test_the_recorded_unit_seconds_name_this_suites_units():
    """tests/support/unit_seconds.json (python -m tests.support.timeline FILE --unit-seconds):
    every unit it names is one of the suite's (a renamed file is re-recorded, not kept)."""
    seconds = workers.recorded_unit_seconds()
    assert seconds and all(s >= 0 for s in seconds.values())
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py"))
    units = set(workers.file_groups(ROOT, files).values())
    assert set(seconds) <= units, sorted(set(seconds) - units)
    assert workers.recorded_unit_seconds(ROOT / "no-such-file.json") == {}


def test_a_worker_takes_its_next_unit_only_when_it_holds_its_last_test():
    """SharedFixtureScheduling._reschedule: xdist hands a worker its next unit while it still holds
    two tests, so a unit of two long tests took the next unit at its start; ours waits for the last."""
    from collections import OrderedDict

    class Node:
        shutting_down = False

        def shutdown(self):
            taken.append("shutdown")

    sched = workers.SharedFixtureScheduling.__new__(workers.SharedFixtureScheduling)
    node = Node()
    taken: list[str] = []
    sched.workqueue = OrderedDict(next_unit={"t": False})
    sched._assign_work_unit = lambda n: taken.append(sched.workqueue.popitem(last=False)[0])
    sched.log = lambda *a: None
    sched.assigned_work = {node: {"long.py": {"long.py::a": False, "long.py::b": False}}}
    sched._reschedule(node)
    assert taken == []                              # two left: xdist's rule would take next_unit here
    sched.assigned_work[node]["long.py"]["long.py::a"] = True
    sched._reschedule(node)
    assert taken == ["next_unit"]                   # its last test: the next unit
    sched._reschedule(node)
    assert taken == ["next_unit", "shutdown"]       # nothing left waiting
