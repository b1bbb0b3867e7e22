"""The command line: bad input gets one line naming the problem and the fix,
exit status 2, and no traceback; no server is needed for any of these."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from upload_samples import timing, write_run

NO_CREDENTIALS_ENV = {
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
    "AWS_CONFIG_FILE": "/nonexistent/config",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def one_line_error(res) -> str:
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res.err
    assert "Traceback" not in res.err
    assert lines[0].startswith("upload_to_s3: error: ")
    return lines[0]


@pytest.mark.parametrize(
    "args, expected",
    [
        (["{run}", "bucket/prefix"], "is not an S3 URL; write it as s3://BUCKET[/PREFIX]"),
        (["{run}", "s3://Bad_Bucket/x"], "bucket name 'Bad_Bucket' is not valid"),
        (["{missing}", "s3://bucket-a/x"], "does not exist; pass a results folder"),
        (["{run}/timing.json", "s3://bucket-a/x"], "is not a folder"),
        (["{empty}", "s3://bucket-a/x"], "no run directories under"),
        (["{run}", "s3://bucket-a/x", "--jobs", "0"], "argument --jobs/-j: '0' is not between 1 and 256"),
        (["{run}", "s3://bucket-a/x", "--max-failed-fraction", "1.5"], "'1.5' is not between 0 and 1"),
        (["{run}", "s3://bucket-a/x", "--endpoint-url", "localhost:9000"], "is not an http(s) URL"),
        (["{run}", "s3://bucket-a/x", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["{run}"], "the following arguments are required"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(run_cli, tmp_path, args, expected):
    run = write_run(tmp_path / "run")
    (tmp_path / "empty").mkdir()
    fill = {"run": run, "missing": tmp_path / "missing", "empty": tmp_path / "empty"}
    res = run_cli(*[a.format(**fill) for a in args])
    assert res.code == 2
    assert expected in one_line_error(res)


def test_bad_max_attempts_is_named(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "many")
    res = run_cli(write_run(tmp_path / "run"), "s3://bucket-a/x")
    assert res.code == 2 and "AWS_MAX_ATTEMPTS='many' is not a positive integer" in one_line_error(res)


def test_upload_without_credentials_names_both_variable_sets(run_cli, tmp_path, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    for name, value in NO_CREDENTIALS_ENV.items():
        monkeypatch.setenv(name, value)
    res = run_cli(write_run(tmp_path / "run"), "s3://bucket-a/x", "--endpoint-url", "http://127.0.0.1:9")
    assert res.code == 2
    assert one_line_error(res).endswith(
        "no S3 credentials: set SPECDEC_BENCH_S3_KEY_ID and SPECDEC_BENCH_S3_SECRET, "
        "or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")


def test_dry_run_without_credentials_still_validates_and_plans(run_cli, tmp_path, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    for name, value in NO_CREDENTIALS_ENV.items():
        monkeypatch.setenv(name, value)
    job = tmp_path / "job"
    write_run(job / "good")
    write_run(job / "bad", timing_doc=timing(total_output_tokens=0))
    res = run_cli(job, "s3://bucket-a/x", "--dry-run")
    assert res.code == 1
    assert "destination not checked: no S3 credentials" in res.err
    assert "job/good" in res.out and "upload (destination not checked)" in res.out
    assert "job/bad" in res.out and "generated 0 tokens" in res.out
    assert "dry run, nothing sent: 1 to upload, 0 to skip, 1 refused" in res.out


def test_module_and_console_script_entry_points(tmp_path):
    for cmd in ([sys.executable, "-m", "upload", "--version"],
                [str(Path(sys.executable).parent / "upload_to_s3"), "--version"]):
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("upload_to_s3 ")


def test_names_with_brackets_are_printed_verbatim(run_cli, tmp_path, monkeypatch):
    for name, value in NO_CREDENTIALS_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    job = tmp_path / "job"
    write_run(job / "try[bold]", timing_doc={"total_output_tokens": 0})
    res = run_cli(job, "s3://bucket-a/x", "--dry-run")
    assert "job/try[bold]" in res.out
