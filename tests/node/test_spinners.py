"""Threads that spin while their server is idle (launcher/node/spinners.py): the pure
selection, a real spinning thread of this process's own found and a sleeping one not, and a
server's processes found by its tag with their children."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from launcher.node import spinners
from launcher.node.spinners import Spinner, spinning
from launcher.runtime.processes import ProcessTag


def test_a_thread_that_used_a_good_part_of_a_core_is_a_spinner_and_the_main_thread_never_is():
    before = {(10, 10): 0.0, (10, 11): 1.0, (10, 12): 0.05, (20, 21): 0.0}
    after = {(10, 10): 1.0, (10, 11): 1.9, (10, 12): 0.1, (20, 21): 0.49, (20, 22): 1.0}
    # over 1 s: tid 11 used 90 % of a core, the main thread 100 % (excluded), 12 5 %,
    # 21 49 % (two spinners sharing a core), 22 appeared after the first sample (not judged)
    assert spinning(before, after, 1.0) == [Spinner(10, 11, 0.9), Spinner(20, 21, 0.49)]
    assert spinning(before, after, 1.0, min_share=0.5) == [Spinner(10, 11, 0.9)]
    assert spinning(before, after, 0.0) == []


def test_describe_names_each_thread_by_its_server():
    line = spinners.describe([Spinner(10, 11, 0.9)], {10: "decode0"}, 0)
    assert line.startswith("1 thread(s) spin while the servers are idle (the KV-transfer progress thread polls "
                           "without pause") and line.endswith("decode0 thread 11 (90% of a core)")
    assert spinners.describe([]) == "no thread spins while the servers are idle"
    assert "poll timeout: 1000 us" in spinners.describe([], {}, 1000)


def test_a_real_spinning_thread_is_found_and_a_sleeping_one_is_not():
    stop = threading.Event()
    tids = {}

    def spin():
        tids["spin"] = threading.get_native_id()
        while not stop.is_set():
            pass

    def sleep():
        tids["sleep"] = threading.get_native_id()
        stop.wait()

    threads = [threading.Thread(target=spin, daemon=True), threading.Thread(target=sleep, daemon=True)]
    for t in threads:
        t.start()
    try:
        while len(tids) < 2:
            time.sleep(0.01)
        found = spinners.idle_spinners([os.getpid()], sample_s=1.0, min_share=0.02)  # loaded CI: a share, not a core
        assert [s.tid for s in found] == [tids["spin"]]
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=5)


def test_a_servers_processes_are_found_by_its_tag_with_their_children():
    tag, other = ProcessTag(), ProcessTag()
    # the child clears its environment, as vLLM's workers start with one of their own
    code = ("import os, subprocess, sys, time; "
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], env={}); "
            "print(c.pid, flush=True); time.sleep(30)")
    p = subprocess.Popen([sys.executable, "-c", code], env=tag.apply(None), stdout=subprocess.PIPE, text=True)
    child = None
    try:
        child = int(p.stdout.readline())
        assert spinners.server_processes(tag) == sorted([p.pid, child])
        assert spinners.server_processes(other) == []
    finally:
        p.kill()
        p.wait()
        if child:
            os.kill(child, 9)
