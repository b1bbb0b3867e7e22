"""The tests' process finder: a process forked to start another carries its parent's command
line until it execs, so a test that kills "the benchmark" must not see two of it."""
from __future__ import annotations

import subprocess
import sys
import time
import uuid

from tests.e2e.procs import outermost, processes_matching

FORK_AND_WAIT = "import os, sys, time\nif os.fork() == 0:\n    time.sleep(30)\n    os._exit(0)\nprint('forked', flush=True)\ntime.sleep(30)\n"


def test_a_forked_child_with_its_parents_command_line_is_not_counted_twice():
    marker = f"marker-{uuid.uuid4().hex}"
    p = subprocess.Popen([sys.executable, "-c", FORK_AND_WAIT, marker], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "forked"
        deadline = time.time() + 10
        while len(found := processes_matching(marker)) < 2 and time.time() < deadline:
            time.sleep(0.05)
        assert len(found) == 2, found  # parent and child: one command line
        assert [pid for pid, _ in outermost(found)] == [p.pid]
    finally:
        subprocess.run(["pkill", "-KILL", "-f", marker], check=False)
        p.wait(timeout=10)
