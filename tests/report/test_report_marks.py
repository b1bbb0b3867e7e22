"""The marks every table and plot carries: few samples, noisy, suspect temperature."""
import json
import shutil
from pathlib import Path

from launcher.results.repeats import record
from launcher.report.html import points_table
from launcher.results.job_dir import load_results
from launcher.report.marks import point_marks

SMOKE = Path(__file__).parent / "data" / "smoke_run1"


def test_marks_of_a_noisy_suspect_point(tmp_path):
    job = shutil.copytree(SMOKE, tmp_path / "job")
    per = [{"repeat": i + 1, "Output TPS": v} for i, v in enumerate([100.0, 60.0, 140.0])]
    (job / "mtbench" / "t0.7_c1" / record.REPEATS_FILE).write_text(json.dumps(record.build(per, 0)))
    s = json.loads((job / "summary.json").read_text())
    for row in s["points"]:
        if row["dir"] == "mtbench/t0.7_c1":
            row["engine_warning"] = "engine defect suspected: known-answer AL 1.05 at T=0.7, expected k+1 = 4"
    (job / "summary.json").write_text(json.dumps(s))
    (j,) = load_results(job)
    pt = next(p for p in j.points if p.dir == "mtbench/t0.7_c1")
    mk = point_marks(pt)
    assert mk.noisy and mk.suspect.startswith("engine defect") and mk.repeats == 3 and mk.tps.n == 3
    assert mk.listed[-2:] == ["~", "!"] and mk.symbols.endswith("~ !")  # each mark stands apart (issue 41)
    html = points_table(j)
    assert "100.0 ±" in html and "(n=3) ~ noisy" in html and "! SUSPECT T" in html
    calm = next(p for p in j.points if p.dir == "mtbench/t0_c1")
    assert not point_marks(calm).noisy and point_marks(calm).suspect is None and point_marks(calm).tps is None
