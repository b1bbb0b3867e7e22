"""engine=sglang on the node, against a stand-in answering as SGLang 0.5.17 does
(tests/node/fake_sglang.py, from the facts in docs/sglang.md; no SGLang runs here):
readiness and the version through the engine's endpoints, the API key off every
command line and out of every file of the run, the benchmark's preflight probes."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from launcher.bench.preflight import check_stream_usage, engine_version
from launcher.runtime import apikey
from launcher.engines import get_engine
from launcher.node.lifecycle import ServerProcess
from launcher.node.net import pick_free_port
from launcher.contracts.job import JobSpec
from tests.node.node_testlib import FAKE_MODEL, HERE, REPO, job_env, wait_for

SGL, VLLM = get_engine("sglang"), get_engine("vllm")
STAND_IN = f"{sys.executable} {HERE / 'fake_sglang.py'}"
KEY = "user-sg-key-0123456789"


def files_holding(root: Path, needle: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def test_readiness_and_version_come_from_sglangs_endpoints(tmp_path, monkeypatch):
    port = pick_free_port("127.0.0.1")
    env, key = apikey.server_launch("sg-key-0123456789", {"PATH": "/usr/bin:/bin"}, SGL, tmp_path)
    argv = SGL.server_argv(STAND_IN, str(FAKE_MODEL), ["--served-model-name", "tiny"], "127.0.0.1", port)
    srv = ServerProcess(argv + key.argv, probe_host="127.0.0.1", port=port, served_name="tiny",
                        log_path=tmp_path / "logs" / "server.log", env=env, api_key="sg-key-0123456789",
                        engine=SGL, key=key)
    srv.start()
    try:
        srv.wait_ready(30)
        assert srv.engine_version == "0.5.17"  # /server_info: SGLang has no /version
        assert "sg-key-0123456789" not in Path(f"/proc/{srv.pid}/cmdline").read_bytes().decode(errors="replace")
        assert not Path(key.files[0]).exists()  # the private key file goes once the server is up
        monkeypatch.setenv("SPECDEC_API_KEY", "sg-key-0123456789")
        assert engine_version(srv.url, SGL) == "0.5.17"
        assert engine_version(srv.url, VLLM) is None  # vLLM's /version: 404 on SGLang
        assert check_stream_usage(srv.url, "tiny") == [1, 3, 2, 2]  # max_tokens 8: the last chunk is cut
        monkeypatch.delenv("SPECDEC_API_KEY")
        assert engine_version(srv.url, SGL) is None  # /server_info wants the key
    finally:
        srv.stop(5)
    assert files_holding(tmp_path, "sg-key-0123456789") == []


def test_an_sglang_job_off_loopback_keeps_its_key_off_argv_and_out_of_the_run(tmp_path):
    """The whole node job (engine=sglang, bound to 0.0.0.0, the user's key): the server gets
    it through a private --config file removed once it is up, the client through SPECDEC_API_KEY."""
    job = tmp_path / "job"
    job.mkdir()
    spec = JobSpec(recipe="r", server_id="s", job_dir=str(job), model=str(FAKE_MODEL), served_name="tiny",
                   server_command=STAND_IN, server_flags=["--served-model-name", "tiny"], engine="sglang",
                   bind_host="0.0.0.0", bench_module="key_client", bench_args=["--save_dir", str(job / "out")],
                   python=sys.executable, ready_timeout_s=60)
    spec.write()
    env = job_env(job, SPECDEC_API_KEY=KEY)
    p = subprocess.Popen([sys.executable, "-m", "launcher.node.serve_and_bench", "--spec", str(job / "job.json")],
                         env={**env, "PYTHONPATH": f"{REPO}:{HERE}"}, cwd=str(job),
                         stdout=open(tmp_path / "node.out", "wb"), stderr=subprocess.STDOUT)
    try:
        check = wait_for(lambda: (job / "out" / "key_check.json").exists() and
                         json.loads((job / "out" / "key_check.json").read_text()), 60, what="the key check")
        ready = json.loads((job / "server_ready.json").read_text())
        cmdline = Path(f"/proc/{ready['pid']}/cmdline").read_bytes().decode(errors="replace").split("\0")
        assert "--config" in cmdline and not Path(cmdline[cmdline.index("--config") + 1]).exists()
        assert not any(KEY in a for a in cmdline)
        assert ready["engine_version"] == "0.5.17" and ready["engine"] == "sglang"
        (job / "out" / "release").write_text("")
        assert p.wait(60) == 0, (tmp_path / "node.out").read_text()[-2000:]
    finally:
        if p.poll() is None:
            p.kill()
    assert (check["with_key"], check["without_key"]) == (200, 401)
    assert check["has_key"] and "from the environment" in (job / "logs" / "job.log").read_text()
    assert files_holding(tmp_path, KEY) == []  # job.json, server_ready.json, the logs, ...
    key_dir = Path(cmdline[cmdline.index("--config") + 1]).parent
    assert not key_dir.exists()  # the private folder goes with the job
