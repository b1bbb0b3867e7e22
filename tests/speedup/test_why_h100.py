"""Why the recorded H100 speedups are what they are (issue 53), through the product's own
commands on the recorded folders (tests/speedup/recorded.py): the decomposition speedup = AL /
step cost, the causes named from the machine records, the --at-al prediction and its interval.
Expectations come from the recorded files themselves (repeats.json's Output TPS and machine
blocks, summary.json's Server_AL), not from the analysis under test."""
from __future__ import annotations

import io
import json
import math
import re
from statistics import mean, median, stdev

import pytest
from rich.console import Console

from launcher.report.build import build_report
from launcher.report.console import print_results
from launcher.results.job_dir import load_results
from launcher.stats.repeats import t_critical
from launcher.speedup.at_al import predict
from launcher.speedup.causes import THRESHOLDS
from launcher.speedup.analysis import SUMMARY_FILE
from launcher.speedup.cli import main as speedup_main
from tests.speedup.recorded import (ASYNC_JOB, ASYNC_PAIR, DFLASH, DFLASH_BASE, DFLASH_JOB, DRAFT_JOB,
                                    model_prediction, output_tokens, repeat_parts, repeats, results_copy,
                                    server_al)


@pytest.fixture(scope="module")
def dflash(tmp_path_factory):
    root = results_copy(DFLASH, tmp_path_factory.mktemp("why") / "qwen3_dflash")
    assert speedup_main([str(root)]) == 0
    return root


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = results_copy(ASYNC_PAIR, tmp_path_factory.mktemp("why") / "gpu_8b")
    assert speedup_main([str(root)]) == 0
    return root


def rows(root, job):
    res = json.loads((root / SUMMARY_FILE).read_text())
    return {r["concurrency"]: r for r in res["points"] if r["job"] == job}


def words(row) -> list[str]:
    return [c["word"] for c in row["causes"]]


def machine(root, job, c, key) -> list[float]:
    return [r["machine"][key] for r in repeats(root, job, c)["per_repeat"]]


def expected_cost(root, job, base, c) -> tuple[float, float, float]:
    """Step cost from the files: Server_AL over each repeat's Output TPS ratio; its mean and t-interval."""
    s = [r["Output TPS"] for r in repeats(root, job, c)["per_repeat"]]
    b = [r["Output TPS"] for r in repeats(root, base, c)["per_repeat"]]
    costs = [server_al(root, job, c) * y / x for x, y in zip(s, b)]
    half = t_critical(len(costs) - 1) * stdev(costs) / math.sqrt(len(costs))
    return mean(costs), mean(costs) - half, mean(costs) + half


# ------------------------------------------------------------------ decomposition

@pytest.mark.parametrize("c", [1, 4, 16])
def test_the_step_cost_is_the_al_over_the_speedup_per_repeat(dflash, c):
    d = rows(dflash, DFLASH_JOB)[c]["decomposition"]
    cost, lo, hi = expected_cost(dflash, DFLASH_JOB, DFLASH_BASE, c)
    assert d["al"] == pytest.approx(server_al(dflash, DFLASH_JOB, c))
    assert (d["step_cost"], d["lo"], d["hi"], d["n"]) == (pytest.approx(cost), pytest.approx(lo), pytest.approx(hi), 3)
    assert d["speedup"] * d["step_cost"] == pytest.approx(d["al"], rel=0.01)  # the split holds


def test_the_issue_figures_dflash_at_c1_and_c16(dflash):
    """issue 53: 3.07x at C=1 is AL 3.98 / 1.30 [1.28, 1.31]; 2.42x at C=16 is 3.98 / 1.64."""
    r = rows(dflash, DFLASH_JOB)
    assert f"{r[1]['decomposition']['speedup']:.2f}" == "3.07"
    assert f"{r[1]['decomposition']['step_cost']:.2f} [{r[1]['decomposition']['lo']:.2f}, " \
           f"{r[1]['decomposition']['hi']:.2f}]" == "1.30 [1.28, 1.31]"
    assert f"{r[16]['decomposition']['step_cost']:.2f}" == "1.64"


# ------------------------------------------------------------------ causes

def test_dflash_is_gpu_bound_at_c1_and_clock_capped_at_c16(dflash):
    r = rows(dflash, DFLASH_JOB)
    # the evidence, read from the files: GPU busy throughout; a slowing reason over C=16's windows only
    assert min(machine(dflash, DFLASH_JOB, 1, "util_pct")) >= THRESHOLDS.gpu_busy_pct
    assert median(machine(dflash, DFLASH_JOB, 1, "slowed_share")) < THRESHOLDS.slowed_share
    assert median(machine(dflash, DFLASH_JOB, 16, "slowed_share")) >= THRESHOLDS.slowed_share
    assert words(r[1]) == ["GPU-bound"]
    assert words(r[16]) == ["GPU-bound", "clock-capped"]
    capped = next(c["sentence"] for c in r[16]["causes"] if c["word"] == "clock-capped")
    lo, hi = min(machine(dflash, DFLASH_JOB, 16, "sm_mhz")), max(machine(dflash, DFLASH_JOB, 16, "sm_mhz"))
    assert f"{lo:,.0f}–{hi:,.0f} MHz" in capped and "sw_power_cap" in capped and "speculative side" in capped
    assert r[1]["settings_differ"] == []  # the same flags, and vLLM 0.26 keeps async scheduling on for dflash


def test_the_draft_model_server_is_host_bound_and_not_like_for_like(pair):
    r = rows(pair, DRAFT_JOB)
    for c in (1, 4, 16):
        assert median(machine(pair, DRAFT_JOB, c, "engine_cores")) >= THRESHOLDS.engine_cores_near_one
        assert median(machine(pair, DRAFT_JOB, c, "util_pct")) < THRESHOLDS.gpu_busy_pct
        assert words(r[c]) == ["host-bound", "unlike"]
    # the flags are the baseline's; the engine's own choice differs, inferred (these files predate the log reader)
    ready = json.loads((pair / DRAFT_JOB / "server_ready.json").read_text())
    assert "engine_chosen" not in ready
    assert r[1]["settings_differ"] == ["asynchronous scheduling on→off (the engine's choice; inferred from its "
                                       "rule for this method and version)"]


def test_a_flag_the_user_added_is_named_and_makes_its_own_configuration(pair):
    a, d = rows(pair, ASYNC_JOB), rows(pair, DRAFT_JOB)
    assert a[1]["settings_differ"] == ["+ --async-scheduling"]
    assert a[1]["drafter"] != d[1]["drafter"] and "+ --async-scheduling" in a[1]["drafter"]
    res = json.loads((pair / SUMMARY_FILE).read_text())
    assert {c["drafter"] for c in res["step_costs"]} == {a[1]["drafter"], d[1]["drafter"]}


def test_the_summary_records_the_thresholds_and_each_points_sentences(dflash):
    res = json.loads((dflash / SUMMARY_FILE).read_text())
    assert res["cause_thresholds"] == THRESHOLDS.to_dict()
    assert all(r["causes"] and all(c["sentence"] for c in r["causes"]) for r in res["points"])
    point = json.loads((dflash / DFLASH_JOB / "mtbench" / "t0_c1" / "speedup.json").read_text())
    assert point["decomposition"] == rows(dflash, DFLASH_JOB)[1]["decomposition"]


# ------------------------------------------------------------------ prediction

@pytest.mark.parametrize("which", ["dflash", "pair"])
def test_the_prediction_at_the_forced_al_holds_the_measured_speedup(which, request):
    root = request.getfixturevalue(which)
    res = json.loads((root / SUMMARY_FILE).read_text())
    assert res["step_costs"]
    for cost in res["step_costs"]:
        for r in (r for r in res["points"] if r["drafter"] == cost["drafter"]
                  and r["concurrency"] == cost["concurrency"]):
            p = predict(cost, r["server_al"])
            assert p["lo"] <= r["speedup"]["throughput"] <= p["hi"], (cost, r["speedup"]["throughput"], p)


def test_at_al_prints_each_configuration_and_concurrency(dflash, capsys):
    """One forced level: the prediction moves the level's speedup as the request time (prefill plus
    (n - 1) / AL verify steps), and its interval says it rests on one level."""
    assert speedup_main([str(dflash), "--at-al", "2.7", "4.25"]) == 0
    out = [ln for ln in capsys.readouterr().out.splitlines() if "at AL:" in ln]
    assert len(out) == 3  # one configuration x C=1, 4, 16
    for c in (1, 4, 16):
        cost, lo, hi = expected_cost(dflash, DFLASH_JOB, DFLASH_BASE, c)
        reps, n = repeat_parts(dflash, DFLASH_JOB, DFLASH_BASE, c), output_tokens(dflash, DFLASH_JOB, c)
        line = next(ln for ln in out if f" C={c}:" in ln)
        assert f"step cost {cost:.2f} [{lo:.2f}, {hi:.2f}]" in line, line
        for al in (2.7, 4.25):
            s, plo, phi = model_prediction(reps, n, al, len(reps))
            assert f"AL {al:g}: {s:.2f}x [{plo:.2f}, {phi:.2f}]" in line, line
        assert "one forced level only" in line and "a second forced level measures" in line


# ------------------------------------------------------------------ the results table and the report

def test_the_results_table_names_a_cause_for_each_speculative_point(dflash, pair):
    for root, job in ((dflash, DFLASH_JOB), (pair, DRAFT_JOB)):
        buf = io.StringIO()
        print_results(load_results(root), Console(file=buf, width=80, highlight=False, color_system=None))
        out = buf.getvalue()
        assert max(len(ln) for ln in out.splitlines()) <= 80
        section = out.split(f"job {job}", 1)[1].split("\njob ", 1)[0]
        why = section.split("why: speedup = Server_AL / step cost", 1)[1]
        for c, r in rows(root, job).items():
            d = r["decomposition"]
            line = next(ln for ln in why.splitlines() if re.match(rf"^ *mtbench +0 +{c} ", ln))
            assert f"{d['speedup']:.2f}x" in line and f"{d['step_cost']:.2f}±{(d['hi'] - d['lo']) / 2:.2f}" in line
            assert line.split()[-len(r["causes"]):] == words(r), line
        for w in {w for r in rows(root, job).values() for w in words(r)}:
            assert re.search(rf"^{re.escape(w)}: ", why, re.M), w  # each word used has its legend line


def test_the_report_has_a_why_page(dflash):
    index = build_report(dflash)
    page = index.parent / "why.html"
    assert 'href="why.html"' in index.read_text() and page.is_file()
    html = page.read_text()
    assert (index.parent / "why_speedup_vs_al.png").is_file()
    for r in rows(dflash, DFLASH_JOB).values():
        for c in r["causes"]:
            assert c["sentence"].replace("'", "&#x27;") in html
    assert "speedup 3.07x = server AL 3.98 / a step&#x27;s cost of 1.30 [1.28, 1.31] baseline steps" in html
