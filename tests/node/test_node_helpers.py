"""Unit tests of the node job's pure helpers (no server)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.node import lifecycle
from launcher.engines.flags import flag_values, kv_cache_cap_bytes, parse_human_int, served_name
from launcher.node.run_sh import NodeConfig, UsageError, default_job_dir, split_args
from launcher.node.serve_and_bench import client_host, pick_free_port, port_is_free


# -- split at `--`

def test_split_args_basic():
    assert split_args(["--a", "1", "--", "--model", "m"]) == (["--a", "1"], ["--model", "m"])


def test_split_args_only_first_separator_counts():
    assert split_args(["x", "--", "y", "--", "z"]) == (["x"], ["y", "--", "z"])


def test_split_args_empty_sides():
    assert split_args(["--"]) == ([], [])
    assert split_args(["--", "b"]) == ([], ["b"])
    assert split_args(["a", "--"]) == (["a"], [])


def test_split_args_requires_separator():
    with pytest.raises(UsageError, match="missing `--`"):
        split_args(["--served-model-name", "x"])


# -- client host

@pytest.mark.parametrize("bind,client", [
    ("0.0.0.0", "127.0.0.1"), ("", "127.0.0.1"), ("*", "127.0.0.1"),
    ("127.0.0.1", "127.0.0.1"), ("10.1.2.3", "10.1.2.3"), ("node017", "node017"),
    ("::", "::1"), ("[::]", "::1"), ("fe80::1", "fe80::1"),
])
def test_client_host(bind, client):
    assert client_host(bind) == client


def test_url_host_brackets_ipv6():
    assert lifecycle.url_host("::1") == "[::1]"
    assert lifecycle.url_host("127.0.0.1") == "127.0.0.1"


# -- KV-cache cap (vLLM's human-readable ints)

@pytest.mark.parametrize("value,expected", [
    ("20G", 20 * 2**30), ("20g", 20 * 10**9), ("1K", 1024), ("1k", 1000), ("512M", 512 * 2**20),
    ("25.6k", 25600), ("2T", 2 * 2**40), ("1073741824", 2**30), (" 3G ", 3 * 2**30),
])
def test_parse_human_int(value, expected):
    assert parse_human_int(value) == expected


@pytest.mark.parametrize("value", ["1.5G", "abc", "", "10X"])
def test_parse_human_int_rejects(value):
    with pytest.raises(ValueError):
        parse_human_int(value)


@pytest.mark.parametrize("flags,cap", [
    (["--kv-cache-memory-bytes", "20G"], 20 * 2**30),
    (["--kv-cache-memory-bytes=8g"], 8 * 10**9),
    (["--kv_cache_memory_bytes", "1K"], 1024),
    (["--kv-cache-memory-bytes", "1G", "--max-model-len", "1024", "--kv-cache-memory-bytes", "2G"], 2 * 2**30),
    (["--gpu-memory-utilization", "0.9"], None),
    ([], None),
    (["--kv-cache-memory-bytes", "lots"], None),
    (["--kv-cache-memory-bytes"], None),
])
def test_kv_cache_cap_bytes(flags, cap):
    assert kv_cache_cap_bytes(flags) == cap


# -- flags

def test_flag_values_forms():
    args = ["--served-model-name", "a", "b", "--dtype", "bf16", "--enforce-eager"]
    assert flag_values(args, "--served-model-name") == ["a", "b"]
    assert flag_values(args, "--enforce-eager") == []
    assert flag_values(args, "--port") is None
    assert flag_values(["--served-model-name=x"], "--served-model-name") == ["x"]


def test_served_name():
    assert served_name(["--served-model-name", "llama", "alias"], "/m/llama") == "llama"
    assert served_name(["--served_model_name=q"], "/m") == "q"
    assert served_name(["--dtype", "bfloat16"], "/models/Llama-3") == "/models/Llama-3"


# -- ports

def test_pick_free_port_is_bindable_and_differs():
    a = pick_free_port("127.0.0.1")
    assert 0 < a < 65536 and port_is_free("127.0.0.1", a)
    with socket.socket() as s:  # hold a, the next pick must be different
        s.bind(("127.0.0.1", a))
        s.listen()
        b = pick_free_port("127.0.0.1")
        assert b != a
        assert not port_is_free("127.0.0.1", a)


def test_pick_free_port_any_host():
    assert pick_free_port("0.0.0.0") > 0


# -- configuration from the environment

def test_config_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = NodeConfig.from_env({"HF_MODEL_CKPT": "/m"})
    assert cfg.server_cmd == "vllm serve" and cfg.bind_host == "127.0.0.1" and cfg.port is None
    assert cfg.ready_timeout_s == 1800 and cfg.bench_module == "launcher.bench"
    assert cfg.python == sys.executable and cfg.stop_grace_s == 10
    assert cfg.job_dir.parent == tmp_path and cfg.job_dir.name.startswith("specdec_job_")


def test_config_from_env(tmp_path):
    cfg = NodeConfig.from_env({"HF_MODEL_CKPT": "/m", "SPECDEC_SERVER_CMD": "python -m x", "SPECDEC_HOST": "0.0.0.0",
                               "SPECDEC_PORT": "8123", "SPECDEC_READY_TIMEOUT": "60", "SPECDEC_JOB_DIR": str(tmp_path),
                               "SPECDEC_PYTHON": "/usr/bin/python3", "SPECDEC_BENCH_MODULE": "b"})
    assert (cfg.server_cmd, cfg.bind_host, cfg.port, cfg.ready_timeout_s) == ("python -m x", "0.0.0.0", 8123, 60)
    assert (cfg.job_dir, cfg.python, cfg.bench_module) == (tmp_path, "/usr/bin/python3", "b")


@pytest.mark.parametrize("env,msg", [
    ({}, "HF_MODEL_CKPT"),
    ({"HF_MODEL_CKPT": "/m", "SPECDEC_PORT": "http"}, "SPECDEC_PORT"),
    ({"HF_MODEL_CKPT": "/m", "SPECDEC_PORT": "70000"}, "SPECDEC_PORT"),
    ({"HF_MODEL_CKPT": "/m", "SPECDEC_READY_TIMEOUT": "-1"}, "SPECDEC_READY_TIMEOUT"),
])
def test_config_errors(env, msg):
    with pytest.raises(UsageError, match=msg):
        NodeConfig.from_env(env)


@pytest.mark.parametrize("name,value,msg", [
    ("SPECDEC_PORT", "0", "SPECDEC_PORT='0' is not a port number"),
    ("SPECDEC_PORT", "80.5", "SPECDEC_PORT='80.5' is not a port number"),
    ("SPECDEC_READY_TIMEOUT", "0", "SPECDEC_READY_TIMEOUT='0' is not a positive number of seconds"),
    ("SPECDEC_STOP_GRACE", "-1", "SPECDEC_STOP_GRACE='-1' is not a number of seconds >= 0"),
    ("SPECDEC_STOP_GRACE", "soon", "SPECDEC_STOP_GRACE='soon' is not a number of seconds >= 0"),
    ("SPECDEC_UNANSWERED_TIMEOUT", "0", "SPECDEC_UNANSWERED_TIMEOUT='0' is not a positive number of seconds"),
])
def test_config_error_texts(name, value, msg):
    """Each variable's own sentence, whole (run.sh prints it; the launcher's job reads it)."""
    with pytest.raises(UsageError) as e:
        NodeConfig.from_env({"HF_MODEL_CKPT": "/m", name: f" {value} "})
    assert str(e.value) == msg


def test_config_numbers_and_flags(tmp_path):
    cfg = NodeConfig.from_env({"HF_MODEL_CKPT": " /m ", "SPECDEC_JOB_DIR": str(tmp_path), "SPECDEC_STOP_GRACE": "0",
                               "SPECDEC_UNANSWERED_TIMEOUT": "2.5", "SPECDEC_KNOWN_ANSWER": "1",
                               "SPECDEC_KNOWN_ANSWER_ALLOW_FAIL": "yes", "SPECDEC_HOST": "  "})
    assert (cfg.model, cfg.stop_grace_s, cfg.unanswered_timeout_s, cfg.bind_host) == ("/m", 0, 2.5, "127.0.0.1")
    assert cfg.known_answer and not cfg.known_answer_allow_fail


def test_default_job_dir_avoids_existing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    now = time.time()
    first = default_job_dir(now)
    first.mkdir()
    assert default_job_dir(now) != first


# -- lifecycle helpers

def test_log_tail(tmp_path):
    p = tmp_path / "server.log"
    p.write_text("".join(f"old {i}\n" for i in range(10)))
    offset = p.stat().st_size
    with open(p, "a") as f:
        f.write("".join(f"line {i}\n" for i in range(100)))
    tail = lifecycle.log_tail(p, 50, offset)
    assert tail.splitlines() == [f"line {i}" for i in range(50, 100)]
    assert lifecycle.log_tail(p, 50, p.stat().st_size) == ""
    assert lifecycle.log_tail(tmp_path / "missing.log") == ""
    # only lines after the offset, even when there are fewer than asked for
    assert lifecycle.log_tail(p, 500, offset).splitlines()[0] == "line 0"


def test_describe_returncode():
    assert lifecycle.describe_returncode(3) == "3"
    assert lifecycle.describe_returncode(-9) == "-9 (SIGKILL)"


def test_terminate_trees_kills_a_child_that_ignores_sigterm():
    code = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)']); time.sleep(60)")
    p = lifecycle.spawn([sys.executable, "-c", code])
    deadline = time.monotonic() + 10
    while len(lifecycle.descendants(p.pid)) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    kids = lifecycle.descendants(p.pid)
    assert kids, "the child did not start"
    t0 = time.monotonic()
    left = lifecycle.terminate_trees([p], grace_s=1.0)
    assert left == set()
    assert time.monotonic() - t0 < 8
    assert p.returncode is not None
    assert not lifecycle.live_processes(p.pid, kids)


def test_terminate_trees_ends_a_tagged_orphan():
    """The benchmark is SIGKILLed; its AIPerf (a session of its own, slow to stop) is
    re-parented and no longer its descendant: the tag in its environment finds it."""
    from launcher.runtime.processes import ProcessTag
    code = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'], start_new_session=True); "
            "time.sleep(60)")
    tag, other = ProcessTag(), ProcessTag()
    p = lifecycle.spawn([sys.executable, "-c", code], env=tag.apply(None))
    bystander = lifecycle.spawn([sys.executable, "-c", "import time; time.sleep(60)"], env=other.apply(None))
    deadline = time.monotonic() + 10
    while len(tag.running()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(tag.running()) == 2, "the child and the grandchild did not start"
    (orphan,) = tag.running() - {p.pid}
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=5)
    assert orphan not in lifecycle.descendants(p.pid)
    assert tag.running() == {orphan}  # re-parented, still running
    left = lifecycle.terminate_trees([p], grace_s=0.5, tag=tag)
    assert left == set()
    assert tag.running() == set()
    assert other.running() == {bystander.pid}  # another tag's process is not touched
    lifecycle.terminate_trees([bystander], grace_s=0.5)


def test_spawn_reports_a_missing_command(tmp_path):
    log = tmp_path / "out.log"
    with open(log, "wb") as f:
        p = lifecycle.spawn(["/nonexistent/vllm", "serve"], stdout=f)
    assert p.wait(10) == 127
    assert "cannot execute" in log.read_text()


def test_pdeathsig_stops_the_child_when_the_parent_is_killed(tmp_path):
    """A SIGKILLed job (no cleanup possible) still takes its server down."""
    pidfile = tmp_path / "child.pid"
    code = (f"import sys, time; sys.path.insert(0, {str(Path(lifecycle.__file__).parents[2])!r}); "
            "from launcher.node.lifecycle import spawn; "
            f"p = spawn([sys.executable, '-c', 'import time; time.sleep(60)']); "
            f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 10
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pidfile.read_text())
    time.sleep(0.5)  # let the shim set PR_SET_PDEATHSIG and exec
    assert lifecycle.live_processes(child, [child])
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while lifecycle.live_processes(child, [child]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not lifecycle.live_processes(child, [child])
