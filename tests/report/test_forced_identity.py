"""issue 41 item 6: forced acceptance is part of what a point measured. A k=3 run forced to
AL 3.5 and one forced to AL 1.5 are two workloads: launcher.compare never pairs them (not even
on its loose dataset/T/C pass) and the history page gives them two series. The identity is read
in one place, launcher.results.identity, by the report, the console table, compare and history."""
from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

from launcher.compare.cli import main as compare_main
from launcher.history.series import build_history
from launcher.history.run_source import local_runs
from launcher.report.console import job_title
from launcher.report.html import provenance
from launcher.results.identity import identity, workload
from launcher.results.job_dir import load_job

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "tests" / "report" / "data" / "smoke_run1"


def forced_copy(dest: Path, length: float, day: str = "2026-12-01") -> Path:
    """The recorded smoke run (k=3) as if its server had forced the acceptance to ``length``:
    the speculative config and the point's record say so, as launcher.bench writes them."""
    job = shutil.copytree(SMOKE, dest)
    for conf in job.glob("*/*/configuration.json"):
        c = json.loads(conf.read_text())
        ext = c["specdec_launcher"]
        ext["speculative_config"] = {**ext["speculative_config"], "rejection_sample_method": "synthetic",
                                     "synthetic_acceptance_length": length}
        ext["forced_acceptance"] = {"length": length}
        c["timestamp"] = f"{day}T06:00:00+00:00"
        conf.write_text(json.dumps(c))
    return job


def test_compare_never_pairs_two_forced_levels(tmp_path, capsys):
    a, b = forced_copy(tmp_path / "a", 3.5), forced_copy(tmp_path / "b", 1.5)
    ja, jb = load_job(a), load_job(b)
    assert workload(ja, ja.points[0])[:4] == workload(jb, jb.points[0])[:4]      # same dataset, T, C and k
    assert workload(ja, ja.points[0]) != workload(jb, jb.points[0])              # ... not the same workload
    rc = compare_main([str(a), str(b)])
    out = capsys.readouterr().out
    assert rc == 1
    assert "regression" not in out.replace("0 regression(s)", "")               # nothing judged as a change
    assert "0 point(s) compared" in out, out
    assert out.count("MISSING") == 2 and "job only in A" in out and "job only in B" in out, out
    # the same level still compares: pairing is not broken for forced runs
    rc = compare_main([str(a), str(forced_copy(tmp_path / "a2", 3.5))])
    assert rc == 0 and "8 point(s) compared" in capsys.readouterr().out


def test_history_gives_two_forced_levels_two_series(tmp_path):
    root = tmp_path / "runs"
    forced_copy(root / "2026-12-01_fal3.5", 3.5, "2026-12-01")
    forced_copy(root / "2026-12-02_fal1.5", 1.5, "2026-12-02")
    forced_copy(root / "2026-12-03_fal3.5", 3.5, "2026-12-03")
    h = build_history(local_runs(root).runs)
    assert not h.left_out, h.left_out
    assert len(h.series) == 16                                      # 8 points x 2 levels
    by_level = {}
    for s in h.series:
        by_level.setdefault(s.key[4], []).append(s)
        assert s.key[4] in s.label
    assert sorted(by_level) == ["forced AL 1.5", "forced AL 3.5"]
    assert {len(s.runs) for s in by_level["forced AL 3.5"]} == {2} and {len(s.runs) for s in by_level["forced AL 1.5"]} == {1}
    assert not any(s.regressions for s in h.series)


def test_report_and_console_say_the_level(tmp_path):
    job = load_job(forced_copy(tmp_path / "a", 3.5))
    assert identity(job, job.points[0]).forced == "forced AL 3.5"
    assert "forced AL 3.5" in job_title(job)
    assert dict(provenance(job))["forced acceptance"] == "forced AL 3.5"
    plain = load_job(SMOKE)
    assert dict(provenance(plain))["forced acceptance"].startswith("no")


def test_one_reader_of_the_identity():
    """The four tools read a point's identity through launcher.results.identity, not configuration.json's keys."""
    for rel in ("launcher/report/html.py", "launcher/report/console.py", "launcher/history/series.py",
                "launcher/compare/match.py"):
        tree = ast.parse((ROOT / rel).read_text())
        names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "launcher.results.identity" in names, rel
        keys = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        read_here = keys & {"speculative_algorithm", "draft_length", "draft_model_dir", "model_dir", "speculative_config",
                            "forced_acceptance", "timestamp"}
        assert not read_here, (rel, read_here)
