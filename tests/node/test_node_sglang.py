"""engine=sglang on the node, against a stand-in that replays the replies of a real
SGLang 0.5.17 server (tests/node/fake_sglang.py, recorded in
tests/data/h100_sglang0517_capture/; no SGLang runs here): readiness and the version
through the engine's endpoints, the API key off every command line and out of every
file of the run, the benchmark's preflight probes; and that the stand-in answers in the
recorded shapes, with counters that move as the real server's do."""
from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import urllib.request
from pathlib import Path

from launcher.bench.metrics import counter_deltas, parse_prometheus_text, prometheus_al
from launcher.bench.preflight import check_stream_usage, engine_version
from launcher.bench.stream_chunks import stats_from_chunks, stream_chat_chunks
from launcher.runtime import apikey
from launcher.engines import get_engine
from launcher.node.lifecycle import ServerProcess
from launcher.node.net import pick_free_port
from launcher.contracts.job import JobSpec
from tests.node.node_testlib import FAKE_MODEL, HERE, REPO, job_env, wait_for

SGL, VLLM = get_engine("sglang"), get_engine("vllm")
STAND_IN = f"{sys.executable} {HERE / 'fake_sglang.py'}"
KEY = "user-sg-key-0123456789"
DATA = REPO / "tests" / "data"
CAPTURE = DATA / "h100_sglang0517_capture"
FORCED_RAW = DATA / "h100_sglang0517_forced" / "mtbench" / "t0_c1" / "aiperf" / "profile_export_raw.jsonl"
FORCED_STEPS = "1," + ",".join(["3"] * 21)  # 64 tokens: the prefill token, then 21 verify steps of 3


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


# ------------------------------------------------------------------------------------------ the replay
@contextlib.contextmanager
def stand_in(*args: str):
    port = pick_free_port("127.0.0.1")
    p = subprocess.Popen([sys.executable, str(HERE / "fake_sglang.py"), "--model-path", str(FAKE_MODEL),
                          "--served-model-name", "tiny", "--port", str(port), "--startup_s", "0", *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: get(url, "/health")[0] == 200, 30, what="the stand-in")
        yield url
    finally:
        p.terminate()
        p.wait(10)


def get(url: str, path: str) -> tuple[int | None, bytes]:
    try:
        with urllib.request.urlopen(url + path, timeout=5) as r:
            return r.status, r.read()
    except OSError:
        return None, b""


def post(url: str, body: dict) -> bytes:
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read()


def shape(o):
    """The structure of a JSON value: keys in order, value types (a list by its first item)."""
    if isinstance(o, dict):
        return [(k, shape(v)) for k, v in o.items()]
    if isinstance(o, list):
        return [shape(x) for x in o[:1]]
    return type(o).__name__


def events(sse: bytes) -> list[str]:
    return [ln[len("data: "):] for ln in sse.decode().splitlines() if ln.startswith("data: ")]


def metric_labels(text: str) -> set[tuple[str, tuple[str, ...]]]:
    out = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, rest = line.partition("{")
            labels = tuple(sorted(kv.split("=", 1)[0] for kv in rest.rsplit("}", 1)[0].split('",') if "=" in kv))
            out.add((name.split()[0], labels))
    return out


def test_the_stand_in_answers_in_the_recorded_shapes():
    recorded = json.loads(FORCED_RAW.read_text().splitlines()[0])
    want = [json.loads(v) if v != "[DONE]" else v
            for r in recorded["responses"] for pk in r["packets"] if pk["name"] == "data" for v in [pk["value"]]]
    with stand_in("--chunk_sizes", FORCED_STEPS, "--merge_after", "1") as url:
        info = json.loads(get(url, "/server_info")[1])
        models = json.loads(get(url, "/v1/models")[1])
        metrics = get(url, "/metrics")[1].decode()
        got = [json.loads(v) if v != "[DONE]" else v for v in events(post(url, dict(recorded["payload"])))]
        reply = json.loads(post(url, {"model": "tiny", "messages": [{"role": "user", "content": "Say hello."}],
                                      "max_tokens": 48}))
    rec_info = json.loads((CAPTURE / "server_info.json").read_text())
    assert list(info) == list(rec_info) and info["version"] == rec_info["version"] == "0.5.17"
    assert (info["served_model_name"], info["model_path"]) == ("tiny", str(FAKE_MODEL))
    assert shape(models) == shape(json.loads((CAPTURE / "models.json").read_text()))
    assert models["data"][0]["id"] == models["data"][0]["root"] == "tiny"  # root: the served name, as recorded
    assert metric_labels(metrics) == metric_labels((CAPTURE / "metrics.txt").read_text())
    # the stream of AIPerf's own request, event by event, as the real server's under SGLANG_SIMULATE_ACC_LEN
    assert [shape(e) for e in got] == [shape(e) for e in want]
    assert [e["choices"][0]["delta"].get("content") for e in got[:-2] if isinstance(e, dict)][0] == ""
    assert [e["usage"]["completion_tokens"] for e in got if isinstance(e, dict) and "usage" in e] == \
        [e["usage"]["completion_tokens"] for e in want if isinstance(e, dict) and "usage" in e] == [1, 64, 64]
    assert shape(reply) == shape(json.loads((CAPTURE / "nonstream.json").read_text()))
    assert reply["usage"]["completion_tokens"] == 48 and SGL.request_stats(reply) is None


def test_the_stand_ins_counters_count_verify_steps_that_its_merged_stream_hides():
    with stand_in("--chunk_sizes", FORCED_STEPS, "--merge_after", "1") as url:
        before = parse_prometheus_text(get(url, "/metrics")[1].decode())
        chunks, finish = stream_chat_chunks(url, "tiny", "Say hello.", 64)
        after = parse_prometheus_text(get(url, "/metrics")[1].decode())
        short = stream_chat_chunks(url, "tiny", "Say hello.", 10)[0]
    # the server's warm-up request is counted before any client's (as recorded: 8 tokens, non-streamed)
    assert (before["sglang:num_requests_total"], before["sglang:generation_tokens_total"]) == (1, 8)
    assert chunks == [1, 63] and finish == "length"
    assert stats_from_chunks(chunks, 3)["chunks_over_k_plus_1"] == 1  # the stream alone says AL 64
    d = {n: after[n] - before[n] for n in after if n.endswith("_total") and n in before}
    assert (d["sglang:spec_verify_calls_total"], d["sglang:generation_tokens_total"],
            d["sglang:num_requests_total"]) == (21, 64, 1)
    assert counter_deltas(before, after, SGL.metrics) == (21, 42)
    assert prometheus_al(before, after, SGL.metrics) == 3.0  # the counters: every step accepted 2 drafts
    assert short == [1, 9]  # steps 3, 3, 3 after the first chunk: one chunk
