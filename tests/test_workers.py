"""The suite's spread over xdist workers (tests/support/workers.py): the files that use one
costly session fixture are one unit of work, read from their text, and that reading agrees with
what collection finds."""
from __future__ import annotations

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
