"""launcher.compare against the noise: repeats, SUSPECT points, and points matched by workload."""
import json
import shutil
from pathlib import Path

from launcher.compare.cli import main
from launcher.results.repeats import record

SMOKE = Path(__file__).parent / "data" / "smoke_run1"


def _copy(dst: Path) -> Path:
    shutil.copytree(SMOKE, dst)
    return dst


def _repeats(job: Path, point: str, tps: list[float]) -> None:
    per = [{"repeat": i + 1, "phase": f"p_r{i + 1}", "Output TPS": v, "Average_AL": 2.0} for i, v in enumerate(tps)]
    (job / point / record.REPEATS_FILE).write_text(json.dumps(record.build(per, record.held_repeat(per))))


def _run(capsys, *args):
    rc = main([str(a) for a in args])
    return rc, capsys.readouterr().out


def _lines(out: str, word: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith(word)]


def test_a_change_beyond_threshold_and_interval_is_flagged(tmp_path, capsys):
    a, b = _copy(tmp_path / "a"), _copy(tmp_path / "b")
    _repeats(a, "mtbench/t0_c1", [100.0, 101.0, 99.0])
    _repeats(b, "mtbench/t0_c1", [80.0, 81.0, 79.0])        # -20%, tight
    _repeats(a, "mtbench/t0_c2", [100.0, 140.0, 60.0])
    _repeats(b, "mtbench/t0_c2", [80.0, 120.0, 40.0])       # -20%, but the interval spans zero
    _repeats(a, "specbench/t0_c1", [100.0, 101.0, 99.0])
    _repeats(b, "specbench/t0_c1", [97.0, 98.0, 96.0])      # interval excludes zero, but only -3%
    rc, out = _run(capsys, a, b, "--run-floor", "0")
    assert rc == 1
    (line,) = _lines(out, "REGRESSION")
    assert "mtbench/t0_c1" in line and "Output TPS -20.0% [" in line and "n=3+3" in line
    # the 5 points without repeats.json fall back to the single-run rule
    assert "5 point(s) with one repeat on a side" in out


def test_the_between_run_floor_widens_the_interval(tmp_path, capsys):
    a, b = _copy(tmp_path / "a"), _copy(tmp_path / "b")
    _repeats(a, "mtbench/t0_c1", [100.0, 101.0, 99.0])
    _repeats(b, "mtbench/t0_c1", [92.0, 93.0, 91.0])        # -8%
    assert _run(capsys, a, b, "--run-floor", "0")[0] == 1
    assert _run(capsys, a, b, "--run-floor", "0.05")[0] == 0


def test_suspect_points_are_reported_never_regressions(tmp_path, capsys):
    a, b = _copy(tmp_path / "a"), _copy(tmp_path / "b")
    s = json.loads((b / "summary.json").read_text())
    for row in s["points"]:
        if row["temperature"] == 0.7:
            row["engine_warning"] = "engine defect suspected: known-answer AL 1.05 at T=0.7, expected k+1 = 4"
    (b / "summary.json").write_text(json.dumps(s))
    for point in ("mtbench/t0.7_c1", "specbench/t0.7_c2"):
        t = json.loads((b / point / "timing.json").read_text())
        t[-1]["Output TPS"] *= 0.3                          # -70%: would be a regression
        (b / point / "timing.json").write_text(json.dumps(t))
    rc, out = _run(capsys, a, b)
    assert rc == 0 and not _lines(out, "REGRESSION")
    suspect = _lines(out, "SUSPECT")
    assert len(suspect) == 4 and all("t0.7" in ln and "engine defect suspected" in ln for ln in suspect)
    assert "0 regression(s), 0 improvement(s), 4 suspect" in out


def _as_specdec_bench(point: Path, dst: Path) -> Path:
    """A specdec_bench --save_dir: the metric files at the root, none of our keys, no marker."""
    dst.mkdir(parents=True)
    for name in ("acceptance_rate.json", "timing.json", "configuration.json"):
        doc = json.loads((point / name).read_text())
        for obj in doc if isinstance(doc, list) else [doc]:
            obj.pop("specdec_launcher", None)
        (dst / name).write_text(json.dumps(doc))
    shutil.copy(point / "mtbench_responses.jsonl", dst)
    return dst


def test_a_specdec_bench_folder_compares_with_our_point_of_the_same_workload(tmp_path, capsys):
    ours = _copy(tmp_path / "ours")
    ref = _as_specdec_bench(ours / "mtbench" / "t0_c2", tmp_path / "specdec_out")
    rc, out = _run(capsys, ref, ours, "--allow-missing")
    assert rc == 0
    assert "1 point(s) compared: 0 regression(s), 0 improvement(s), 0 suspect, 7 missing (allowed)" in out
    assert ". ~ mtbench/t0_c2" in out                        # its root against our folder
    missing = _lines(out, "MISSING")
    assert len(missing) == 7 and not any("mtbench/t0_c2" in ln for ln in missing)


def test_different_k_is_paired_with_a_note(tmp_path, capsys):
    a, b = _copy(tmp_path / "a"), _copy(tmp_path / "b")
    for cfg in b.glob("*/*/configuration.json"):
        c = json.loads(cfg.read_text())
        c["draft_length"] = 1
        c["specdec_launcher"]["speculative_config"]["num_speculative_tokens"] = 1
        cfg.write_text(json.dumps(c))
    rc, out = _run(capsys, a, b)
    assert rc == 0 and "8 point(s) compared" in out and "k differs (3 vs 1)" in out
