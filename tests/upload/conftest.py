"""Fixtures: one real moto_server process per session, a fresh versioned bucket
per test, and a helper that runs the upload_to_s3 command in-process."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from upload.cli import main
from upload_s3_checks import CLEARED_ENV, CREDENTIAL_ENV



def _moto_server_command() -> str:
    beside_python = Path(sys.executable).parent / "moto_server"
    found = str(beside_python) if beside_python.exists() else shutil.which("moto_server")
    if not found:
        pytest.fail("moto_server not found: install the dev extra (pip install -e '.[dev]')")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory):
    """URL of a moto_server started as its own process for the whole session."""
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "moto_server.log"
    with open(log, "wb") as log_fh:
        proc = subprocess.Popen(
            [_moto_server_command(), "-H", "127.0.0.1", "-p", str(port)],
            stdout=log_fh, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1).read()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"moto_server did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


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
