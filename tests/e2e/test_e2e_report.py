"""The HTML report of the real smoke run (with its lossless check against a
real reference server), rendered in headless Chromium."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support import stack
from tests.support.browser import image_stats, screenshot_page


def test_report_of_the_real_smoke_run_renders(smoke_run, tmp_path):
    assert smoke_run["proc"].returncode == 0, smoke_run["proc"].stderr[-3000:]
    results = smoke_run["out"] / "smoke"
    p = subprocess.run([sys.executable, "-m", "launcher.report", str(results), "--out", str(tmp_path / "report")],
                       cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    index = tmp_path / "report" / "index.html"
    assert str(index) in p.stdout
    html = index.read_text()
    summary = json.loads((smoke_run["job_dir"] / "summary.json").read_text())
    lossless = summary["lossless"]
    assert lossless and lossless["prompts"] > 0 and "passed" in lossless, lossless
    assert ("PASSED" if lossless["passed"] else "FAILED") in html
    assert "draft_model" in html and "0.32.0" in html  # provenance: method and engine version

    shot = tmp_path / "report.png"
    states = screenshot_page(index, shot)
    assert len(states) >= 4 and all(done and width > 0 for _, done, width in states), states
    colours, non_white = image_stats(shot)
    assert colours > 200 and non_white > 0.08, (colours, non_white)
