"""Fixtures: a fresh versioned bucket per test on the session's real moto_server
(tests/conftest.py), and a helper that runs the upload_to_s3 command in-process."""

from __future__ import annotations

import uuid

import boto3
import pytest
from botocore.config import Config

from upload.cli import main
from upload_s3_checks import CLEARED_ENV, CREDENTIAL_ENV



@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in CLEARED_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in CREDENTIAL_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("COLUMNS", "250")  # rich tables: no folded cells


@pytest.fixture(scope="session")
def s3(moto_server):
    """A client for the test's own assertions."""
    return boto3.client(
        "s3", endpoint_url=moto_server, region_name="us-east-1",
        aws_access_key_id="testing-key-id", aws_secret_access_key="testing-secret-access-key",
        config=Config(s3={"addressing_style": "path"}),
    )


@pytest.fixture
def bucket(s3):
    """A fresh bucket with versioning on, so any object written twice is visible."""
    name = f"upload-test-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


class CliResult:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err

    def __repr__(self):
        return f"CliResult(code={self.code}, out={self.out!r}, err={self.err!r})"


@pytest.fixture
def run_cli(capsys):
    """Run ``upload_to_s3 ARGS`` in this process; return its exit code and output."""

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run
