"""launcher.compare on copies of a real smoke sweep with injected changes."""
import json
import shutil
import subprocess
import sys
from pathlib import Path
from statistics import mean

import pytest

from launcher.compare.cli import main

SMOKE = Path(__file__).parent / "data" / "smoke_run1"
REPO = Path(__file__).resolve().parents[2]


def _copy(dst: Path, server_id: str | None = None) -> Path:
    shutil.copytree(SMOKE, dst)
    if server_id:
        s = json.loads((dst / "summary.json").read_text())
        s["server_id"] = server_id
        (dst / "summary.json").write_text(json.dumps(s))
    return dst


def _edit_json(path: Path, fn) -> None:
    """Edit a JSON file; in a metric file (a list of runs) the last run."""
    data = json.loads(path.read_text())
    fn(data[-1] if isinstance(data, list) else data)
    path.write_text(json.dumps(data))


def _scale_al(job: Path, point: str, factors) -> None:
    """Multiply the point's Request_AL values (factors: one number, or one per
    request in file order) and recompute Average_AL / Category_AL / the summary row."""
    questions = {}
    for i, line in enumerate(next((job / point).glob("*_responses.jsonl")).read_text().splitlines()):
        row = json.loads(line)
        questions[str(row["question_id"])] = row["category"]
        if point.startswith("mtbench"):  # MT-Bench's Request_AL is keyed by run index
            questions[str(i)] = row["category"]

    def fix(acc):
        ra = acc["Request_AL"]
        fs = factors if isinstance(factors, list) else [factors] * len(ra)
        for (q, v), f in zip(list(ra.items()), fs):
            ra[q] = v * f
        acc["Average_AL"] = mean(ra.values())
        acc["Category_AL"] = {c: mean(v for q, v in ra.items() if questions[q] == c) for c in acc["Category_AL"]}
        new_al[0] = acc["Average_AL"]

    new_al = [None]
    _edit_json(job / point / "acceptance_rate.json", fix)
    _edit_json(job / "summary.json",
               lambda s: [r.update({"Average_AL": new_al[0]}) for r in s["points"] if r["dir"] == point])


def _scale_tps(job: Path, point: str, factor: float) -> None:
    def fix(t):
        t["Output TPS"] *= factor
        t["Output TPS/gpu"] *= factor
    _edit_json(job / point / "timing.json", fix)


def _drop_point(job: Path, point: str) -> None:
    shutil.rmtree(job / point)
    _edit_json(job / "summary.json", lambda s: s.update(points=[r for r in s["points"] if r["dir"] != point]))


def _run(capsys, *args) -> tuple[int, str]:
    rc = main([str(a) for a in args])
    return rc, capsys.readouterr().out


def _verdict_lines(out: str) -> list[str]:
    return [l for l in out.splitlines() if l.startswith(("REGRESSION", "improvement", "MISSING"))]


def test_two_copies_of_the_same_run_pass(tmp_path, capsys):
    a, b = _copy(tmp_path / "a"), _copy(tmp_path / "b")
    rc, out = _run(capsys, a, b)
    assert rc == 0 and _verdict_lines(out) == []
    assert "8 point(s) compared: 0 regression(s)" in out


def test_injected_al_regression_fails_naming_the_point(tmp_path, capsys):
    a, b = _copy(tmp_path / "a"), _copy(tmp_path / "b")
    _scale_al(b, "mtbench/t0_c1", 0.8)
    rc, out = _run(capsys, a, b)
    assert rc == 1
    lines = _verdict_lines(out)
    assert len(lines) == 1 and lines[0].startswith("REGRESSION") and "mtbench/t0_c1" in lines[0]
    assert "Average_AL -20.0%" in lines[0]


def test_al_improvement_passes(tmp_path, capsys):
    a, b = _copy(tmp_path / "a"), _copy(tmp_path / "b")
    _scale_al(b, "specbench/t0_c1", 1.15)
    rc, out = _run(capsys, a, b)
    assert rc == 0
    assert [l.split()[0] for l in _verdict_lines(out)] == ["improvement"]


def test_noise_inside_the_interval_is_not_flagged(tmp_path, capsys):
    a, b = _copy(tmp_path / "a"), _copy(tmp_path / "b")
    # Large per-request swings (mean change about -6%, beyond the 2% threshold)
    # whose interval still spans zero: noise, not a regression.
    _scale_al(b, "mtbench/t0_c1", [0.80, 1.10, 0.85, 1.12])
    rc, out = _run(capsys, a, b)
    assert rc == 0 and _verdict_lines(out) == []


def test_consistent_change_below_the_threshold_is_not_flagged(tmp_path, capsys):
    a, b = _copy(tmp_path / "a"), _copy(tmp_path / "b")
    _scale_al(b, "mtbench/t0_c1", 0.99)          # interval excludes zero, but only -1%
    rc, out = _run(capsys, a, b)
    assert rc == 0 and _verdict_lines(out) == []


def test_one_repeat_tps_is_flagged_only_beyond_the_single_run_threshold(tmp_path, capsys):
    a, b = _copy(tmp_path / "a"), _copy(tmp_path / "b")
    _scale_tps(b, "specbench/t0.7_c2", 0.90)       # -10%: within a single run's noise
    _scale_tps(b, "mtbench/t0_c2", 0.60)           # -40%: beyond the wide default (35%)
    rc, out = _run(capsys, a, b)
    assert rc == 1
    (line,) = _verdict_lines(out)
    assert "mtbench/t0_c2" in line and "Output TPS -40.0%" in line and "single-run" in line
    assert "8 point(s) with one repeat on a side: throughput cannot be judged against the noise" in out
    rc, out = _run(capsys, a, b, "--single-run-tps-threshold", "0.45")
    assert rc == 0
    rc, out = _run(capsys, a, b, "--single-run-tps-threshold", "0.05")
    assert rc == 1 and len(_verdict_lines(out)) == 2


def test_missing_and_failed_points(tmp_path, capsys):
    a, b = _copy(tmp_path / "a"), _copy(tmp_path / "b")
    _drop_point(b, "specbench/t0_c2")
    _edit_json(b / "summary.json", lambda s: [r.update(status="failed", reason="boom")
                                              for r in s["points"] if r["dir"] == "mtbench/t0.7_c1"])
    rc, out = _run(capsys, a, b)
    assert rc == 1
    missing = [l for l in _verdict_lines(out) if l.startswith("MISSING")]
    assert len(missing) == 2
    assert any("specbench/t0_c2" in l and "B absent" in l for l in missing)
    assert any("mtbench/t0.7_c1" in l and "B failed" in l for l in missing)
    rc, out = _run(capsys, a, b, "--allow-missing")
    assert rc == 0 and "(allowed)" in out


def test_folders_of_jobs_are_matched_by_server_id(tmp_path, capsys):
    for side in ("A", "B"):
        for sid in ("eagle3-k3", "ngram-k4"):
            _copy(tmp_path / side / "recipe" / sid, server_id=sid)
    _scale_al(tmp_path / "B" / "recipe" / "ngram-k4", "specbench/t0_c1", 0.8)
    _copy(tmp_path / "B" / "recipe" / "extra", server_id="extra")
    rc, out = _run(capsys, tmp_path / "A", tmp_path / "B")
    assert rc == 1
    lines = _verdict_lines(out)
    assert any(l.startswith("REGRESSION specbench/t0_c1 [job ngram-k4]") for l in lines)
    assert any(l.startswith("MISSING * [job extra]") and "only in B" in l for l in lines)
    assert "16 point(s) compared" in out


def test_single_jobs_with_different_names_are_paired(tmp_path, capsys):
    a, b = _copy(tmp_path / "a", server_id="vllm-0.32"), _copy(tmp_path / "b", server_id="vllm-0.33")
    rc, out = _run(capsys, a, b)
    assert rc == 0 and "vllm-0.32 vs vllm-0.33" in out


@pytest.mark.parametrize("make", ["absent", "empty", "bad_json"])
def test_bad_input_is_one_line_exit_2(tmp_path, make):
    a = _copy(tmp_path / "a")
    b = tmp_path / "b"
    if make != "absent":
        b.mkdir()
    if make == "bad_json":
        (b / "summary.json").write_text("{not json")
    out = subprocess.run([sys.executable, "-m", "launcher.compare", str(a), str(b)],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert out.stderr.startswith("error:")


def test_thresholds_default_to_the_candidates_recipe(tmp_path, capsys):
    """job.json's compare_thresholds (bench.gates.compare_*_threshold) set the defaults."""
    from launcher.compare.cli import recipe_threshold
    from launcher.results.job_dir import load_results

    a, b = _copy(tmp_path / "a"), _copy(tmp_path / "b")
    _scale_tps(b, "mtbench/t0_c1", 0.60)
    assert _run(capsys, a, b)[0] == 1  # -40% TPS against the default single-run 35%
    (b / "job.json").write_text(json.dumps({"compare_thresholds": {"al": 0.02, "tps": 0.2, "single_run_tps": 0.5}}))
    assert recipe_threshold(load_results(b), "tps", 0.05) == 0.2
    assert _run(capsys, a, b)[0] == 0  # the recipe allows 50% for one repeat
    assert _run(capsys, a, b, "--single-run-tps-threshold", "0.35")[0] == 1  # the flag wins


def test_missing_names_the_validity_problem(tmp_path, capsys):
    """issue 41 item 7: a point that fails the validity rule is MISSING with its problem named,
    not "A complete, B complete" (tests/data/h200_vllm026_8b: no COMPLETE, no timing.json)."""
    data = Path(__file__).resolve().parents[1] / "data" / "h200_vllm026_8b"
    rc, out = _run(capsys, str(data), str(data))
    assert rc == 1
    missing = [l for l in _verdict_lines(out) if l.startswith("MISSING")]
    assert missing
    for line in missing:
        assert "complete, B complete" not in line, line
        assert "A and B invalid (" in line and "COMPLETE" in line and "timing.json missing" in line, line


def test_missing_names_one_sides_problem(tmp_path, capsys):
    a, b = _copy(tmp_path / "a"), _copy(tmp_path / "b")
    (b / "mtbench" / "t0_c1" / "timing.json").unlink()
    rc, out = _run(capsys, a, b)
    (line,) = [l for l in _verdict_lines(out) if l.startswith("MISSING")]
    assert "mtbench/t0_c1" in line and "A complete, B " in line and "timing.json missing" in line, line
