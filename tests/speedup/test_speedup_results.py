"""launcher.speedup, the report and compare on a real results folder with a
matched baseline (tests/speedup/data/smoke_baseline, see its README): no servers."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.speedup import analysis, cli

DATA = Path(__file__).parent / "data" / "smoke_baseline"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def run(tmp_path):
    dst = tmp_path / "smoke"
    shutil.copytree(DATA, dst)
    return dst


def _jobs(root):
    out = {}
    for d in root.iterdir():
        if (d / "job.json").exists():
            out[json.loads((d / "job.json").read_text())["num_speculative_tokens"]] = d
    return out   # None -> baseline, 1, 3


def _records(point):
    return [json.loads(ln) for ln in (point / "aiperf" / "profile_export.jsonl").read_text().splitlines() if ln.strip()]


def _step_ratio(spec_point, base_point):
    """Latency per engine step, speculative over baseline, straight from the AIPerf records."""
    def lat(r):
        return r["metrics"]["request_latency"]["value"]
    spec = [r for r in _records(spec_point) if r["metadata"]["benchmark_phase"] == "profiling"]
    base = [r for r in _records(base_point) if r["metadata"]["benchmark_phase"] == "profiling"]
    s = sum(lat(r) for r in spec) / sum(1 + r["spec_decode_acceptance"]["num_spec_steps"] for r in spec)
    b = sum(lat(r) for r in base) / sum(r["metrics"]["usage_completion_tokens"]["value"] for r in base)  # the server's count
    return s / b


def test_speedups_written_beside_each_point_and_summarised(run):
    res = analysis.write_all(run)
    jobs = _jobs(run)
    assert not (jobs[None] / "mtbench" / "t0_c1" / "speedup.json").exists()   # the baseline has none
    ratios = {}
    for k in (1, 3):
        for c in (1, 2):
            pdir, bdir = jobs[k] / "mtbench" / f"t0_c{c}", jobs[None] / "mtbench" / f"t0_c{c}"
            sp = json.loads((pdir / "speedup.json").read_text())
            tps = json.loads((pdir / "timing.json").read_text())["Output TPS"]
            base_tps = json.loads((bdir / "timing.json").read_text())["Output TPS"]
            assert sp["k"] == k and sp["concurrency"] == c and sp["baseline_job"] == jobs[None].name
            assert sp["speedup"]["throughput"] == pytest.approx(tps / base_tps)
            assert sp["speedup"]["paired_requests"] == 8          # 4 questions x 2 turns, paired
            assert sp["speedup"]["e2e_ratio"]["paired"] and sp["speedup"]["e2e_ratio"]["n"] == 8
            # the identical draft accepts every draft: k + 1 tokens a step
            assert sp["acceptance"]["expected_tokens_per_step"] == pytest.approx(k + 1)
            assert sp["acceptance"]["position_acceptance"] == [1.0] * k
            assert sp["step_time"]["ratio"] == pytest.approx(_step_ratio(pdir, bdir))
            ratios[(c, k)] = sp["step_time"]["ratio"]
    # the draft cost: the line through the two k at each concurrency
    for c in (1, 2):
        sp3 = json.loads((jobs[3] / "mtbench" / f"t0_c{c}" / "speedup.json").read_text())
        slope = (ratios[(c, 3)] - ratios[(c, 1)]) / 2
        cost = sp3["prediction"]["draft_cost"]
        assert cost["method"] == "fit over k=[1,3]" and cost["c"] == pytest.approx(slope)
        assert cost["v"] == pytest.approx(ratios[(c, 1)] - slope)
        assert sp3["prediction"]["predicted_speedup"] == pytest.approx(4.0 / (3 * slope + 1))
    summ = json.loads((run / "speedup_summary.json").read_text())
    assert summ == json.loads(json.dumps(res))
    best = {c["concurrency"]: c for c in summ["best_k"]}
    assert set(best) == {1, 2}
    for c, ch in best.items():
        assert ch["output_tps"] == max(ch["candidates"].values())
    sched = summ["schedules"][0]["speculative_config"]["num_speculative_tokens_per_batch_size"]
    assert sched[0][0] == 1 and sched[-1][1] == 2
    for k in (1, 3):
        block = json.loads((jobs[k] / "summary.json").read_text())["speedup"]
        assert [p["dir"] for p in block["points"]] == ["mtbench/t0_c1", "mtbench/t0_c2"]
        assert block["best_k"] == summ["best_k"]
    assert "speedup" not in json.loads((jobs[None] / "summary.json").read_text())


def test_job_option_updates_only_that_summary(run):
    jobs = _jobs(run)
    p = subprocess.run([sys.executable, "-m", "launcher.speedup", str(run), "--job", str(jobs[3])], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "best k=" in p.stdout
    assert "speedup" in json.loads((jobs[3] / "summary.json").read_text())
    assert "speedup" not in json.loads((jobs[1] / "summary.json").read_text())
    assert (jobs[1] / "mtbench" / "t0_c1" / "speedup.json").exists()   # point files for every job


def test_without_a_baseline_nothing_is_written(run):
    shutil.rmtree(_jobs(run)[None])
    p = subprocess.run([sys.executable, "-m", "launcher.speedup", str(run)], cwd=REPO, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and "no baseline job" in p.stdout
    assert not (run / "speedup_summary.json").exists()


def test_unusable_folder_is_one_line_exit_2(tmp_path):
    p = subprocess.run([sys.executable, "-m", "launcher.speedup", str(tmp_path / "nope")], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


def test_report_has_the_speedup_section(run, tmp_path):
    analysis.write_all(run)
    from launcher.report.build import build_report
    index = build_report(run, tmp_path / "report")
    html = index.read_text()
    for text in ("Speedup over the matched baseline", "Best k per load", "Predicted vs measured",
                 "num_speculative_tokens_per_batch_size", "Leviathan et al. 2023", "fit over k=[1,3]"):
        assert text in html, text
    for png in ("speedup_vs_concurrency.png", "speedup_predicted_vs_measured.png"):
        assert (tmp_path / "report" / png).stat().st_size > 10000 and f'src="{png}"' in html


def test_step_times_that_resolve_no_draft_cost_predict_nothing_and_the_report_says_why(run, tmp_path):
    """On a loaded machine the k=1 run can be slower a step than the k=3 run: the fit's draft cost
    is then negative, which would predict more than the tokens a step yields. No prediction, and
    the report says why in place of the figure."""
    from launcher.report.speedup_section import speedup_section

    res = analysis.write_all(run)
    for r in res["points"]:
        r["step_time"]["ratio"] = {1: 5.0, 3: 1.0}[r["k"]]      # r = v + c k: c = -2
    analysis._add_predictions(res["points"])
    assert all(r["prediction"]["predicted_speedup"] is None for r in res["points"])
    slower = [r for r in res["points"] if r["speedup"]["throughput"] < 1]
    assert slower and all("negative draft cost (c = -2.00" in r["prediction"]["diagnosis"] for r in slower)
    out = tmp_path / "report"
    out.mkdir()
    html = speedup_section(res, out)
    assert "No predicted-vs-measured figure: the step times give a negative draft cost (c = -2.00" in html
    assert not (out / "speedup_predicted_vs_measured.png").exists() and (out / "speedup_vs_concurrency.png").exists()


def _compare(a, b):
    return subprocess.run([sys.executable, "-m", "launcher.compare", str(a), str(b)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_compare_reports_speedup_deltas_and_gates_on_them(run, tmp_path):
    analysis.write_all(run)
    b = tmp_path / "b"
    shutil.copytree(run, b)
    p = _compare(run, b)
    assert p.returncode == 0, p.stdout[-3000:]
    assert "speedup A" in p.stdout and "Δspeedup" in p.stdout
    # B's recipe asks for more than the measured speedup: every speculative point fails the gate
    for k, job in _jobs(b).items():
        plan = json.loads((job / "job.json").read_text())
        plan["compare_thresholds"]["min_speedup"] = {"mtbench": 50.0}
        (job / "job.json").write_text(json.dumps(plan))
    p = _compare(run, b)
    assert p.returncode == 1
    assert p.stdout.count("below the gate min_speedup.mtbench=50.0") == 4, p.stdout[-3000:]
    # a worse speedup in B is flagged as a regression of the speedup
    sp_file = _jobs(b)[3] / "mtbench" / "t0_c1" / "speedup.json"
    sp = json.loads(sp_file.read_text())
    was = sp["speedup"]["throughput"]
    sp["speedup"]["throughput"] = was * 0.5
    sp_file.write_text(json.dumps(sp))
    for job in _jobs(b).values():
        plan = json.loads((job / "job.json").read_text())
        plan["compare_thresholds"]["min_speedup"] = {}
        (job / "job.json").write_text(json.dumps(plan))
    p = _compare(run, b)
    assert p.returncode == 1
    assert f"speedup {was:.2f}x -> {was * 0.5:.2f}x (-50.0%)" in p.stdout, p.stdout[-3000:]


def test_an_unreadable_export_leaves_that_point_out(run):
    jobs = _jobs(run)
    (jobs[3] / "mtbench" / "t0_c2" / "aiperf" / "profile_export.jsonl").write_text("{not json\n")
    res = analysis.write_all(run)
    assert len(res["points"]) == 3 and len(res["skipped"]) == 1 and "t0_c2" in res["skipped"][0]
    assert not (jobs[3] / "mtbench" / "t0_c2" / "speedup.json").exists()


def _clone_job(src: Path, name: str, **spec_changes) -> Path:
    dst = src.parent / name
    shutil.copytree(src, dst)
    for f in dst.rglob("speedup.json"):
        f.unlink()
    job = json.loads((dst / "job.json").read_text())
    job["speculative_config"] = {**job["speculative_config"], **spec_changes}
    job["server_id"] = name
    (dst / "job.json").write_text(json.dumps(job))
    return dst


def test_each_draft_has_its_own_best_k_and_forced_runs_are_never_candidates(run):
    k3 = _jobs(run)[3]
    spec = json.loads((k3 / "job.json").read_text())["speculative_config"]
    _clone_job(k3, "tiny-other-draft-k3", model=spec["model"] + "-other")
    _clone_job(k3, "tiny-forced-k3", rejection_sample_method="synthetic", synthetic_acceptance_length=2.5)
    res = analysis.analyse(analysis.load_results(run))
    drafts = {c["draft"] for c in res["best_k"]}
    assert drafts == {spec["model"], spec["model"] + "-other"}
    for c in res["best_k"]:  # one draft's choice never lists another draft's k
        assert set(c["candidates"]) == ({"1", "3"} if c["draft"] == spec["model"] else {"3"})
    forced = res["forced"]
    assert forced and all(f["forced"] == {"length": 2.5} and f["k"] == 3 for f in forced)
    assert sorted(f["concurrency"] for f in forced) == [1, 2]
    assert all(f["measured_al"] is not None for f in forced)
    assert len({s["draft"] for s in res["schedules"]}) == 2
    out = subprocess.run([sys.executable, "-m", "launcher.speedup", str(run)], capture_output=True, text=True,
                         cwd=REPO)
    assert out.returncode == 0 and "forced AL 2.5 k=3: mtbench T=0 C=1: measured AL" in out.stdout


def test_step_time_counts_the_servers_tokens_not_aiperfs_retokenized_text(run):
    """AIPerf's output_sequence_length re-tokenizes the returned text; on a
    random-weight model's text it was 1261 for the server's 256 (H200, vLLM
    0.26). The per-request figures use the server's usage count, so inflating
    AIPerf's figure changes nothing."""
    before = json.loads(json.dumps(analysis.write_all(run)))
    base = _jobs(run)[None]
    for export in base.glob("*/t*/aiperf/profile_export.jsonl"):
        rows = _records(export.parent.parent)
        for r in rows:
            assert r["metrics"]["usage_completion_tokens"]["value"] >= 1  # the server's figure is there
            r["metrics"]["output_sequence_length"]["value"] *= 5
        export.write_text("".join(json.dumps(r) + "\n" for r in rows))
    after = analysis.write_all(run)
    for b, a in zip(before["points"], after["points"]):
        assert a["step_time"] == pytest.approx(b["step_time"])
        assert a["speedup"]["decode"] == pytest.approx(b["speedup"]["decode"])
