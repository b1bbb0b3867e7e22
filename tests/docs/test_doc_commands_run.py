"""Every command that README.md, upload/README.md and docs/*.md show, run as
written (tests/docs/doc_commands.py collects them):

- launcher commands as dry runs, in test_doc_commands_dry_run.py (no server: a light file);
- report, compare and upload_to_s3 against the real results of the session's
  smoke run (copied to `results/smoke`, `results/a`, `results/b` in a scratch
  folder) and a real S3 server (moto_server), bucket created from the s3:// URL
  (e2e); so is any later `python -m launcher.X` module the docs show.

A command line that several places show (the same text, run the same way) runs once,
and each place's test judges that one run: the line is what is tested, not where it is
written.

A command marked `<!-- doc-test: skip: REASON -->` is not run; the last test
lists and counts those. Usage lines (`[--flag X]`, `<placeholder>`, `...`) are
not run either: test_doc_parsing.py compares their flags with --help."""
from __future__ import annotations

import re
import shutil
import time

import boto3
import pytest
from botocore.config import Config

from tests.docs.doc_runs import MARKED, RUN, as_run, failure, needs_results, run_line

ON_RESULTS = [c for c in RUN if needs_results(c.entry_point)]


@pytest.fixture(scope="module")
def doc_workdir(tmp_path_factory, request):
    """A scratch folder standing in for the repository root of the docs."""
    return tmp_path_factory.mktemp("doc_cwd")


@pytest.fixture(scope="module")
def results_tree(smoke_run, doc_workdir):
    assert smoke_run["proc"].returncode == 0, smoke_run["proc"].stderr[-3000:]
    for name in ("smoke", "a", "b"):
        dst = doc_workdir / "results" / name
        if not dst.exists():
            shutil.copytree(smoke_run["out"] / "smoke", dst)
    return doc_workdir / "results"


@pytest.fixture(scope="module")
def results_runs() -> dict:
    """Each distinct line run on the results, by line: when it started, and its one run."""
    return {}


@pytest.mark.e2e
@pytest.mark.parametrize("cmd", ON_RESULTS, ids=[f"{c.where}:{c.entry_point}" for c in ON_RESULTS])
def test_documented_command_runs_on_real_results(cmd, request, doc_workdir, results_tree, results_runs):
    extra: dict = {}
    if cmd.entry_point == "upload":
        url = request.getfixturevalue("moto_server")
        extra = {"SPECDEC_BENCH_S3_ENDPOINT": url, "AWS_ACCESS_KEY_ID": "doc-test", "AWS_SECRET_ACCESS_KEY": "doc-test",
                 "AWS_DEFAULT_REGION": "us-east-1"}
        s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="doc-test",
                          aws_secret_access_key="doc-test", config=Config(s3={"addressing_style": "path"}))
        for bucket in re.findall(r"s3://([^/\s]+)", cmd.text):
            try:
                s3.create_bucket(Bucket=bucket)
            except s3.exceptions.BucketAlreadyOwnedByYou:
                pass
    line = as_run(cmd)
    if line not in results_runs:
        results_runs[line] = (time.time(), run_line(line, doc_workdir, extra))
    started, p = results_runs[line]
    assert p.returncode == 0, failure(cmd, line, p)
    if cmd.entry_point == "report":  # the smoke run built a report too: this one must have written its own
        written = [f for f in (doc_workdir / "results").rglob("index.html") if f.stat().st_mtime >= started - 0.5]
        assert written, "the report wrote no index.html"


def test_marked_commands_are_counted_with_their_reasons(capsys):
    with capsys.disabled():
        print(f"\n[doc-test] {len(RUN)} documented commands run; {len(MARKED)} marked as not runnable here:")
        for c in MARKED:
            print(f"  {c.where}: {c.text[:70]} -- {c.skip_reason}")
    assert len(RUN) >= 8
    assert all(c.skip_reason for c in MARKED)
