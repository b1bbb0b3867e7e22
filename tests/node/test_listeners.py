"""Every listening socket of a job, found in the processes' own socket tables and classified
(launcher/node/listeners.py, launcher/runtime/processes.py), and recorded in server_ready.json."""
from __future__ import annotations

import os
import socket

from launcher.contracts.server_ready import Listener, ServerReady, read_server_ready, write_server_ready
from launcher.node.listeners import Owner, classify
from launcher.runtime.processes import ListeningSocket, listening_sockets, parse_listening

TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:9C40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0
   1: 0B4DE70A:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0 100 0 0 10 0
   2: 0100007F:9C40 0100007F:E459 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0 100 0 0 10 0
"""
TCP6 = """  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:15E0 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 444 1 0 100 0 0 10 0
   1: 00000000000000000000000001000000:15E1 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 555 1 0 100 0 0 10 0
"""


def test_proc_net_tables_give_each_listening_socket_its_address_and_port():
    assert parse_listening(TCP) == {111: ("127.0.0.1", 40000), 222: ("10.231.77.11", 8080)}  # not the connection
    assert parse_listening(TCP6) == {444: ("::", 5600), 555: ("::1", 5601)}


def test_a_process_s_listening_sockets_are_found_on_the_machine():
    with socket.socket() as a, socket.socket(socket.AF_INET6) as b, socket.socket() as c:
        a.bind(("127.0.0.1", 0)), a.listen()
        b.bind(("::", 0)), b.listen()
        c.bind(("127.0.0.1", 0))  # bound, not listening
        found = {(s.address, s.port) for s in listening_sockets([os.getpid()])}
        assert ("127.0.0.1", a.getsockname()[1]) in found and ("::", b.getsockname()[1]) in found
        assert ("127.0.0.1", c.getsockname()[1]) not in found
    assert listening_sockets([2 ** 22 + 17]) == []  # a process that is not there


def test_each_socket_is_named_by_what_it_is_and_whether_it_checks_the_key():
    found = [ListeningSocket(10, "python3", "0.0.0.0", 8000), ListeningSocket(11, "VLLM::EngineCore", "10.0.0.1", 5600),
             ListeningSocket(11, "VLLM::EngineCore", "127.0.0.1", 41000), ListeningSocket(9, "srun", "0.0.0.0", 35000),
             ListeningSocket(99, "other", "0.0.0.0", 1)]  # not the server's
    server = Owner("decode0", frozenset({9, 10, 11}), 8000, True, "n2", side_channel_port=5600, launcher_node="n1")
    got = {(x.kind, x.port, x.checks_key, x.node) for x in classify(found, server)}
    assert got == {("api", 8000, True, "n2"), ("kv_side_channel", 5600, False, "n2"), ("internal", 41000, False, "n2"),
                   ("slurm_step", 35000, False, "n1")}  # the step's srun client runs on the job's node
    router = Owner("router", frozenset({20}), 9000, False, "n1", metrics_port=9001)
    got = classify([ListeningSocket(20, "vllm-router", "127.0.0.1", 9000),
                    ListeningSocket(20, "vllm-router", "127.0.0.1", 9001)], router)
    assert [(x.kind, x.checks_key, x.loopback_only) for x in got] == [("api", False, True), ("metrics", False, True)]


def test_listeners_round_trip_through_server_ready(tmp_path):
    x = Listener(owner="decode0", kind="api", address="0.0.0.0", port=8000, pid=1, process="python3", node="n2",
                 checks_key=True)
    p = write_server_ready(tmp_path, ServerReady(port=9000, listeners=[x]))
    assert read_server_ready(p).listeners == [x]
    assert "listeners" not in ServerReady(port=1).to_dict()
