"""Numbers a CI can trust, on the real stack: two identical smoke runs with
sweep.repeats=3 compare with zero regressions and zero improvements, and a real
change (the identical draft against the smoke's noisy one) is flagged.

Three launcher runs of the smoke recipe (one server each, as CI runs are), at T=0, on
MT-Bench alone and without the known-answer probe (it has its own tests): 2 points
(concurrency 1 and 2) of 3 repeats each per run. The identical-draft run measures its
repeats across two starts of its server instead (sweep.server_starts=2, 2 repeats each):
the pooled repeats.json is checked on it. The three runs share nothing but the machine,
so they run at the same time (about half the wall time of one after the other).

compare judges Average_AL (paired per question; at T=0 it does not move with load) and
pairs every point; its Output TPS thresholds are set past any load's reach: two identical
runs on a shared 2-core machine moved -62 % and +81 % (docs/repeats.md), and these runs
share the machine with each other. Its throughput rule over repeats is judged on recorded
repeats (tests/report/test_compare_repeats.py); here, that compare read each side's 3 repeats.
"""
from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support import stack

pytestmark = pytest.mark.takes_both_cores  # three launcher runs at once

RUN = ["sweep.repeats=3", "sweep.temperatures=[0]", "sweep.datasets=[mtbench]", "bench.known_answer=false",
       "report=false"]  # no report read here (tests/e2e/test_e2e_report.py reads the main command's)
RUNS = {"a": (), "b": (), "identical": ("draft=tiny_identical", "sweep.repeats=2", "sweep.server_starts=2")}
NO_TPS = ("--tps-threshold", "9.99", "--single-run-tps-threshold", "9.99")  # 999 %: judge AL and pairing only


def _launch(out, *extra: str):
    p = subprocess.run(stack.launcher_cmd(*RUN, *extra, f"output_dir={out}"), cwd=stack.REPO_ROOT,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (job,) = [d for d in (out / "smoke").iterdir() if (d / "job.json").exists()]
    return job


def _compare(a, b):
    return subprocess.run([sys.executable, "-m", "launcher.compare", str(a), str(b), *NO_TPS], cwd=stack.REPO_ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def runs(real_stack, tmp_path_factory):
    root = tmp_path_factory.mktemp("repeats")
    with ThreadPoolExecutor(len(RUNS)) as pool:
        jobs = {name: pool.submit(_launch, root / name, *extra) for name, extra in RUNS.items()}
        return {name: job.result() for name, job in jobs.items()}


def test_each_point_holds_three_repeats(runs):
    job = runs["a"]
    bench = json.loads((job / "job.json").read_text())["bench"]  # the spec gives the benchmark its repeats
    assert bench["repeats"] == 3 and bench["warmup"] is True
    summary = json.loads((job / "summary.json").read_text())
    # vLLM's counters over each AIPerf run hold every repeat's verify steps, exactly
    assert summary["prometheus_runs"] and all(r["matches"] for r in summary["prometheus_runs"]), \
        summary["prometheus_runs"]
    for row in summary["points"]:
        assert row["status"] == "complete" and row["repeats"]["n"] == 3, row
        doc = json.loads((job / row["dir"] / "repeats.json").read_text())
        assert [r["repeat"] for r in doc["per_repeat"]] == [1, 2, 3]
        held = doc["files_hold"]["repeat"]
        timing = json.loads((job / row["dir"] / "timing.json").read_text())[-1]
        assert timing["Output TPS"] == doc["per_repeat"][held - 1]["Output TPS"]  # the files hold that repeat
        # every repeat counts its requests: the held one's are timing.json's, and the row sums the failures
        ext = timing["specdec_launcher"]
        assert doc["per_repeat"][held - 1]["succeeded_requests"] == ext["num_turns"]
        assert doc["per_repeat"][held - 1]["failed_requests"] == ext["failed_requests"]
        assert all(r["succeeded_requests"] == ext["num_turns"] for r in doc["per_repeat"])  # same questions
        assert row["repeats"]["failed_requests"] == sum(r["failed_requests"] for r in doc["per_repeat"])
        tps = doc["stats"]["Output TPS"]
        assert tps["n"] == 3 and tps["lo"] <= tps["mean"] <= tps["hi"]
        assert sorted(p.name for p in (job / row["dir"] / "aiperf_repeats").iterdir()) == \
            sorted(f"r{i}" for i in (1, 2, 3) if i != held)


def test_identical_runs_compare_clean(runs):
    p = _compare(runs["a"], runs["b"])
    assert p.returncode == 0, p.stdout[-4000:]
    assert "2 point(s) compared: 0 regression(s), 0 improvement(s), 0 suspect, 0 missing" in p.stdout, p.stdout[-4000:]
    assert p.stdout.count("(n=3)") == 4, p.stdout[-4000:]  # each side's Output TPS taken over its 3 repeats


def test_a_real_change_is_flagged(runs):
    worse = _compare(runs["identical"], runs["a"])   # B: the noisy draft, against the identical one
    assert worse.returncode == 1, worse.stdout[-4000:]
    lines = [ln for ln in worse.stdout.splitlines() if ln.startswith("REGRESSION")]
    assert len(lines) == 2 and all("Average_AL" in ln for ln in lines), worse.stdout[-4000:]
    better = _compare(runs["a"], runs["identical"])
    assert better.returncode == 0
    assert "0 regression(s), 2 improvement(s)" in better.stdout, better.stdout[-4000:]


def test_repeats_across_two_server_starts_are_pooled(runs):
    job = runs["identical"]
    assert json.loads((job / "job.json").read_text())["bench"]["server_starts"] == 2
    log = (job / "logs" / "job.log").read_text()
    assert log.count("server start 2/2: restarting the speculative server") == 1, log[-3000:]
    summary = json.loads((job / "summary.json").read_text())
    # the second start's AIPerf run: the server's counters hold exactly that start's repeats
    assert summary["prometheus_runs"] and all(r["matches"] for r in summary["prometheus_runs"])
    for row in summary["points"]:
        assert row["status"] == "complete" and row["repeats"]["n"] == 4, row
        doc = json.loads((job / row["dir"] / "repeats.json").read_text())
        assert [(r["repeat"], r["server_start"]) for r in doc["per_repeat"]] == [(1, 1), (2, 1), (3, 2), (4, 2)]
        held = doc["files_hold"]["repeat"]
        tps = [r["Output TPS"] for r in doc["per_repeat"]]
        assert sorted(tps)[1] == tps[held - 1]  # the lower median over both starts
        timing = json.loads((job / row["dir"] / "timing.json").read_text())[-1]
        assert timing["Output TPS"] == tps[held - 1]
        assert sorted(p.name for p in (job / row["dir"] / "aiperf_repeats").iterdir()) == \
            sorted(f"r{i}" for i in (1, 2, 3, 4) if i != held)
        assert not (job / row["dir"] / ".earlier_starts").exists()
        assert all(r["machine"]["engine_cores"] is not None for r in doc["per_repeat"])  # the node's samples
        conf = json.loads((job / row["dir"] / "configuration.json").read_text())
        ext = next(v for v in conf.values() if isinstance(v, dict) and "machine" in v)
        # the node's samples over the held repeat's requests: a window shorter than the sampling
        # period (or one the sampler missed under load) holds none and closes on the next sample,
        # so its figures are there whatever its count (launcher.runtime.machine.window_summary)
        win = ext["machine"]["window"]
        assert ext["machine"]["host"]["cores"] and win["window_s"] > 0, win
        assert ext["machine"]["host"]["one_core_ms"] > 0  # one core's speed, timed on the node
        assert win["engine_cores"] is not None and win["cpu_busy_share"] is not None, win
        assert ext["http_keep_alive"]["safe"] is True


def test_every_repeat_sends_the_first_questions_in_dataset_order(runs):
    """Each repeat of a point (AIPerf phases of one run, one sequential sampler) sends the
    same questions, the dataset's, in dataset order at C=1: the input file lays out each
    phase's copy (runtime.datasets.aiperf_phase_lines); read on the real AIPerf's records."""
    from launcher.runtime.datasets import question_key, question_of_session, read_mtbench
    job = runs["a"]
    bench = json.loads((job / "job.json").read_text())["bench"]
    (mtbench,) = [d for d in bench["datasets"] if d["name"] == "mtbench"]
    asked = [question_key(q) for q in read_mtbench(mtbench["path"], bench["num_requests"])]
    assert len(asked) == 4
    for row in json.loads((job / "summary.json").read_text())["points"]:
        point = job / row["dir"]
        exports = [point / "aiperf" / "profile_export.jsonl", *sorted(point.glob("aiperf_repeats/r*/profile_export.jsonl"))]
        assert len(exports) == 3, exports
        for export in exports:
            recs = [json.loads(line) for line in export.read_text().splitlines()]
            first = sorted((r["metadata"]["request_start_ns"], question_of_session(r["metadata"]["conversation_id"]))
                           for r in recs if r["metadata"]["turn_index"] == 0)
            sent = [q for _, q in first]
            assert sorted(sent) == sorted(asked), (export, sent, asked)
            if row["concurrency"] == 1:
                assert sent == asked, (export, sent)  # one at a time: in the dataset's order
