"""Multi-node placement on the node side, without processes: the head's address resolved
where it runs (never a loopback one), each rank's record of where it ran (step_record),
the engine's per-node environment."""
from __future__ import annotations

import json
import socket
import subprocess
import sys

from launcher.engines import get_engine
from launcher.node import net, step_record


def test_node_address_prefers_the_hostnames_non_loopback_address(monkeypatch):
    monkeypatch.setattr(net, "_interface_addresses", lambda: [("lo", "127.0.0.1"), ("eth0", "10.231.77.11")])
    monkeypatch.setattr(socket, "getaddrinfo", lambda h, *a: [(0, 0, 0, "", ("10.231.77.11", 0))])
    assert net.node_address("specdec-n1") == ("10.231.77.11", "eth0")


def test_node_address_skips_a_loopback_hostname_for_the_first_real_interface(monkeypatch):
    """Debian maps the hostname to 127.0.1.1: other nodes cannot reach that."""
    monkeypatch.setattr(net, "_interface_addresses", lambda: [("lo", "127.0.0.1"), ("ib0", "10.0.0.7")])
    monkeypatch.setattr(socket, "getaddrinfo", lambda h, *a: [(0, 0, 0, "", ("127.0.1.1", 0))])
    assert net.node_address("gb-001") == ("10.0.0.7", "ib0")


def test_node_address_with_only_loopback_says_so(monkeypatch):
    monkeypatch.setattr(net, "_interface_addresses", lambda: [("lo", "127.0.0.1")])
    monkeypatch.setattr(socket, "getaddrinfo", lambda h, *a: (_ for _ in ()).throw(OSError("no name")))
    assert net.node_address("x") == ("127.0.0.1", "lo")


def test_interface_addresses_lists_this_hosts_loopback():
    assert ("lo", "127.0.0.1") in net._interface_addresses()


def test_vllm_rank_env_is_its_own_address_and_interface_unless_the_user_set_them():
    eng = get_engine("vllm")
    assert eng.node_env("10.231.77.12", "eth0", {}) == {"VLLM_HOST_IP": "10.231.77.12",
                                                        "GLOO_SOCKET_IFNAME": "eth0"}
    assert eng.node_env("10.0.0.7", "lo", {}) == {"VLLM_HOST_IP": "10.0.0.7"}
    assert eng.node_env("10.0.0.7", "ib0", {"VLLM_HOST_IP": "1.2.3.4", "GLOO_SOCKET_IFNAME": "eth1"}) == {}
    assert get_engine("sglang").node_env("10.0.0.7", "ib0", {}) == {}


def test_step_record_writes_where_the_rank_runs_then_execs_the_server(tmp_path):
    rec = tmp_path / "logs" / "rank1.json"
    out = tmp_path / "env.txt"
    p = subprocess.run([sys.executable, "-m", "launcher.node.step_record", "--record", str(rec), "--rank", "1",
                        "--engine", "vllm", "--", "sh", "-c", f'echo "$$ $VLLM_HOST_IP" > {out}'],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    r = json.loads(rec.read_text())
    pid, host_ip = out.read_text().split()
    assert r["rank"] == 1 and r["node"] == socket.gethostname()
    assert int(pid) == r["pid"]  # exec: the recorded pid is the server's
    assert host_ip == r["address"] == net.node_address()[0]


def test_step_record_without_a_command_is_a_usage_error(tmp_path):
    p = subprocess.run([sys.executable, "-m", "launcher.node.step_record", "--record", str(tmp_path / "r.json"),
                        "--rank", "0"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "COMMAND" in p.stderr
