"""issue 41 item 4: plots that fit their data, checked in headless Chromium.

* a point whose decode speed could not be timed (few or no samples) is drawn on the
  throughput plot (hollow, at its end-to-end speed) and marked, not dropped;
* at one temperature there is no "Acceptance length vs temperature" plot (a single dot on a
  degenerate axis);
* a forced-acceptance run's page says at the top that the AL was set, and the plots that
  would only show the forced value (AL vs temperature, the histogram, Category_AL) are left out.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from launcher.report.build import build_report
from launcher.report.plots import drawable, per_user_speed
from launcher.results.job_dir import load_job
from tests.report.test_forced_identity import forced_copy
from tests.support.browser import run_script

SMOKE = Path(__file__).parent / "data" / "smoke_run1"
FACTS = """return {
  imgs: Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, i.naturalWidth]),
  captions: Array.from(document.querySelectorAll('figcaption, .fig p, p')).map(e => e.innerText),
  forced: (document.getElementById('forced-note') || {}).innerText || null,
  firstBlock: (document.querySelector('main > p.warn, main > h1 + p + p') || {}).id || null,
};"""


def _one_temperature(dst: Path, untimed: str) -> Path:
    """The smoke run at T=0 only, with one point whose requests' chunks after the first all arrived
    at once: no decode speed (the smoke report's case: its throughput plot had kept 1 point of 8)."""
    job = shutil.copytree(SMOKE, dst)
    for d in job.glob("*/t0.7_c*"):
        shutil.rmtree(d)
    s = json.loads((job / "summary.json").read_text())
    s["points"] = [r for r in s["points"] if r["temperature"] == 0]
    for r in s["points"]:
        if r["dir"] == untimed:
            r["Decode tok/s median"], r["Decode tok/s count"] = None, 0
    (job / "summary.json").write_text(json.dumps(s))
    tf = job / untimed / "timing.json"
    t = json.loads(tf.read_text())
    doc = t[-1] if isinstance(t, list) else t
    doc.pop("Request Generation Tokens Per Second", None)
    doc["specdec_launcher"]["counts"]["Request Generation Tokens Per Second"] = 0
    tf.write_text(json.dumps(t))
    return job


def _page(index: Path) -> dict:
    facts = run_script(index, FACTS)
    assert facts["imgs"] and all(done and width > 0 for _, done, width in facts["imgs"]), facts["imgs"]
    facts["srcs"] = [src for src, _, _ in facts["imgs"]]
    return facts


def test_one_temperature_report_draws_every_point_and_no_degenerate_plot(tmp_path):
    untimed = "specbench/t0_c1"
    job_dir = _one_temperature(tmp_path / "job", untimed)
    job = load_job(job_dir)
    p = next(p for p in job.points if p.dir == untimed)
    assert p.decode_tps_p50 is None and per_user_speed(p) == (p.e2e_tps_p50, True) and drawable(p)
    facts = _page(build_report(job_dir))
    assert not any("al_vs_temperature" in s for s in facts["srcs"]), facts["srcs"]
    assert any("pareto" in s for s in facts["srcs"])
    assert any("4 of 4 point(s) drawn" in c for c in facts["captions"]), facts["captions"]
    assert facts["forced"] is None


def test_forced_run_says_the_al_was_set_and_drops_its_acceptance_plots(tmp_path):
    job_dir = forced_copy(tmp_path / "job", 3.5)
    facts = _page(build_report(job_dir))
    assert facts["forced"] and "acceptance length was set, not earned by the draft" in facts["forced"]
    assert "forced AL 3.5" in facts["forced"] and facts["firstBlock"] == "forced-note"   # at the top
    for plot in ("al_vs_temperature", "acceptance_histogram", "category_al"):
        assert not any(plot in s for s in facts["srcs"]), (plot, facts["srcs"])
    assert any("pareto" in s for s in facts["srcs"])                                  # throughput is measured


def test_two_temperatures_keep_the_plot(tmp_path):
    facts = _page(build_report(shutil.copytree(SMOKE, tmp_path / "job")))
    assert any("al_vs_temperature" in s for s in facts["srcs"]) and facts["forced"] is None
    assert any("8 of 8 point(s) drawn" in c for c in facts["captions"])
