"""The HTML report, built from a real smoke sweep (tests/report/data/smoke_run1),
checked as HTML and, when Chromium is available, rendered in a headless browser."""
import json
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from launcher.report.build import build_report
from tests.support.browser import image_stats, screenshot_page
from launcher.results.job_dir import ResultsError, find_job_dirs, load_results
from launcher.report.plots import pareto_front

DATA = Path(__file__).parent / "data"
SMOKE = DATA / "smoke_run1"
REPO = Path(__file__).resolve().parents[2]

# The shape written by launcher/bench/lossless.py (ids truncated with a "..." entry).
LOSSLESS = {
    "passed": False, "matches": 3, "required": 4, "prompts": 5, "min_match_fraction": 0.6,
    "num_mismatches": 2,
    "mismatches": [{
        "prompt": "Write a short note about the freedom to share software.",
        "spec_text": "Sharing software lets everyone learn <and> improve it together.",
        "ref_text": "Sharing software lets everyone learn and build on it.",
        "spec_token_ids": [101, 7, 88, 12, 5, 901, 33],
        "ref_token_ids": [101, 7, 88, 12, 5, 444, 35, 2],
        "first_diff_token": 5,
    }, {
        "prompt": "Explain recursion.", "spec_text": "A function that calls itself...",
        "ref_text": "A function that calls itself...", "first_diff_token": 30,
        "spec_token_ids": list(range(24)) + ["..."], "ref_token_ids": list(range(24)) + ["..."],
    }],
}

TELEMETRY = {
    "available": True, "reason": None,
    "gpus": [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-x", "total_gib": 139.8,
              "baseline_used_gib": 0.5, "peak_used_gib": 120.25, "peak_increase_gib": 119.75}],
    "kv_cache_cap_gib": 40.0,
}


def _job_copy(dst: Path, server_id: str | None = None, fail: str | None = None, lossless=None,
              telemetry=None) -> Path:
    """A copy of the smoke job with optional edits: a failed point (its files
    removed, as after a crash), a lossless block, a telemetry file."""
    shutil.copytree(SMOKE, dst)
    summary = json.loads((dst / "summary.json").read_text())
    if server_id:
        summary["server_id"] = server_id
    if fail:
        for row in summary["points"]:
            if row["dir"] == fail:
                row.update({k: None for k, v in row.items() if isinstance(v, float) and k != "temperature"})
                row.update(status="failed", reason="server died: CUDA out of memory")
        for name in ("acceptance_rate.json", "timing.json", "COMPLETE"):
            (dst / fail / name).unlink()
    if lossless is not None:
        summary["lossless"] = lossless
    (dst / "summary.json").write_text(json.dumps(summary))
    if telemetry is not None:
        (dst / "gpu_telemetry.json").write_text(json.dumps(telemetry))
    return dst


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs, self.text = [], []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.imgs.append(dict(attrs)["src"])

    def handle_data(self, data):
        self.text.append(data)


def _parse(index: Path) -> _Collect:
    c = _Collect()
    c.feed(index.read_text())
    return c


# ------------------------------------------------------------------ loading

def test_loads_the_real_job():
    (job,) = load_results(SMOKE)
    assert len(job.points) == 8 and all(p.ok for p in job.points)
    p = next(p for p in job.points if p.dir == "mtbench/t0_c1")
    assert p.average_al == pytest.approx(2.18211, abs=1e-4)
    assert p.server_al == pytest.approx(2.24779, abs=1e-4)   # vLLM's definition, in our extension
    assert p.output_tps_per_gpu == pytest.approx(29.549, abs=1e-3)
    assert p.decode_tps_p50 == pytest.approx(45.648)          # specdec_bench's 4-decimal string
    assert p.ttft_p50_ms == pytest.approx(174.3)               # seconds in timing.json
    assert p.histogram == {1: 48, 2: 28, 3: 28, 4: 17}
    assert not p.thin("TTFT Time")                             # 8 of 8 turns


def test_reads_a_specdec_bench_output_folder(tmp_path):
    """specdec_bench's own --save_dir (no COMPLETE, no extension, flat configuration) is a job of one point."""
    run = tmp_path / "sdb_run"
    run.mkdir()
    src = SMOKE / "mtbench" / "t0_c1"
    for name in ("acceptance_rate.json", "timing.json"):
        docs = json.loads((src / name).read_text())
        (run / name).write_text(json.dumps([{k: v for k, v in d.items() if k != "specdec_launcher"} for d in docs]))
    cfg = json.loads((src / "configuration.json").read_text())
    cfg.pop("specdec_launcher")
    (run / "configuration.json").write_text(json.dumps(cfg))
    (job,) = load_results(run)
    (p,) = job.points
    assert (p.dataset, p.temperature, p.concurrency, p.ok) == ("mtbench", 0.0, 1, True)
    assert p.average_al == pytest.approx(2.18211, abs=1e-4) and p.server_al is None
    (job,) = load_results(tmp_path)  # a folder of specdec_bench runs
    assert [q.dir for q in job.points] == ["sdb_run"]


def test_finds_jobs_in_a_folder_of_jobs(tmp_path):
    _job_copy(tmp_path / "recipe" / "b-job")
    _job_copy(tmp_path / "recipe" / "a-job")
    assert [d.name for d in find_job_dirs(tmp_path)] == ["a-job", "b-job"]
    assert [d.name for d in find_job_dirs(tmp_path / "recipe")] == ["a-job", "b-job"]


def test_job_without_summary_is_read_from_its_point_folders(tmp_path):
    job = _job_copy(tmp_path / "j")
    (job / "summary.json").unlink()
    (job / "mtbench" / "t0_c2" / "COMPLETE").unlink()
    (loaded,) = load_results(job)
    status = {p.dir: p.status for p in loaded.points}
    assert len(status) == 8 and status["mtbench/t0_c2"] == "failed" and status["mtbench/t0_c1"] == "complete"


def test_no_results_is_an_error(tmp_path):
    with pytest.raises(ResultsError):
        load_results(tmp_path)
    with pytest.raises(ResultsError):
        load_results(tmp_path / "missing")


def test_pareto_front():
    assert pareto_front([(1, 5), (2, 4), (1, 3), (3, 1), (2, 4)]) == {0, 1, 3, 4}


# ------------------------------------------------------------------ html

def test_report_of_one_job(tmp_path):
    job = _job_copy(tmp_path / "job", fail="specbench/t0.7_c2", lossless=LOSSLESS, telemetry=TELEMETRY)
    index = build_report(job)
    assert index == job / "report" / "index.html"
    page = _parse(index)
    assert sorted(page.imgs) == ["acceptance_histogram.png", "al_vs_temperature.png", "category_al.png", "pareto.png"]
    for src in page.imgs:
        assert (index.parent / src).stat().st_size > 5000
    text = " ".join(page.text)
    assert "server died: CUDA out of memory" in text           # failed point in the table, with its reason
    assert "Left out of the plots" in text and "specbench/t0.7_c2" in text
    assert "FAILED" in text and "3 of 5 outputs" in text and "2 of 2 mismatch" in text   # lossless block
    assert "NVIDIA H200" in text and "120.25" in text           # telemetry
    assert "0.32.0" in text and "tiny-target" in text and "DRAFT_TARGET" not in text  # engine version, model
    html = index.read_text()
    assert "<mark>" in html and "<b>901</b>" in html            # divergence highlighted in text and ids
    assert "(not recorded)" in html                             # divergence past the kept ids


def test_lossless_pending_and_absent(tmp_path):
    from launcher.report.html import lossless_block
    assert "NOT RUN" in lossless_block(None)
    pending = lossless_block({"status": "pending reference run", "prompts": 8})
    assert "PENDING REFERENCE RUN" in pending and "8 prompts" in pending
    passed = lossless_block({"passed": True, "matches": 8, "required": 5, "prompts": 8, "mismatches": []})
    assert "PASSED" in passed and "mismatch" not in passed


def test_cli_on_a_folder_of_jobs(tmp_path):
    _job_copy(tmp_path / "res" / "draft-a", server_id="draft-a")
    _job_copy(tmp_path / "res" / "draft-b", server_id="draft-b", fail="mtbench/t0_c1")
    out = subprocess.run([sys.executable, "-m", "launcher.report", str(tmp_path / "res"), "--out", str(tmp_path / "o")],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    index = tmp_path / "o" / "index.html"
    assert out.stdout.strip().splitlines()[-1] == str(index.resolve())
    page = _parse(index)
    assert {"overview_pareto.png", "overview_al_vs_temperature.png", "job1_pareto.png", "job2_category_al.png"} <= set(page.imgs)
    assert all((index.parent / s).exists() for s in page.imgs)
    text = " ".join(page.text)
    assert "draft-a" in text and "draft-b" in text and "Overview (2 jobs)" in text


def test_cli_bad_dir_is_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "launcher.report", str(tmp_path / "nope")],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------ browser

def test_report_renders_in_chromium(tmp_path):
    job = _job_copy(tmp_path / "job", fail="specbench/t0.7_c2", lossless=LOSSLESS, telemetry=TELEMETRY)
    index = build_report(job)
    shot = Path(tempfile.gettempdir()) / "specdec_report_screenshot.png"   # kept for a human look
    states = screenshot_page(index, shot)
    assert len(states) == 4
    assert all(done and width > 0 for _, done, width in states), states
    colours, non_white = image_stats(shot)
    assert colours > 200 and non_white > 0.08, (colours, non_white)


def test_the_points_table_gives_every_repeats_failed_requests(tmp_path):
    """With repeats, the 'failed req' cell sums every repeat's failures (summary.json's repeats row),
    not only the held repeat's, which is timing.json's."""
    from launcher.report.html import points_table
    dst = _job_copy(tmp_path / "job")
    summary = json.loads((dst / "summary.json").read_text())
    row = next(r for r in summary["points"] if r["dir"] == "mtbench/t0_c1")
    row["repeats"] = {"n": 3, "noisy": False, "files_hold": 2, "Output TPS mean": 30.0, "Output TPS lo": 29.0,
                      "Output TPS hi": 31.0, "Output TPS rel_mad": 0.01, "failed_requests": 2}
    (dst / "summary.json").write_text(json.dumps(summary))
    (job,) = load_results(dst)
    html = points_table(job)
    cells = html.split("mtbench/t0_c1", 1)[1].split("</tr>", 1)[0]
    assert ">2 (n=3)<" in cells and "failed requests of all N repeats" in html
