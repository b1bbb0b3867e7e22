"""Run one server rank where Slurm placed it, and say where that is: the node's hostname
and its address resolved on the node itself, written to a JSON file on the shared
filesystem, then ``exec`` of the server (same pid). The engine's per-node environment
(the address its ranks announce, the interface its collectives use) is set from the same
resolution. Standard library only (it runs under the engine's Python on every node).

    python -m launcher.node.step_record --record FILE --rank N [--engine vllm] -- ARGV...
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path
from typing import Optional

from launcher.engines import get_engine
from launcher.node.net import node_address
from launcher.runtime.files import write_json_atomic


def placement(rank: int) -> dict:
    """Where this process runs: node (hostname), address, interface, pid."""
    address, iface = node_address()
    return {"rank": rank, "node": socket.gethostname(), "address": address, "interface": iface, "pid": os.getpid(),
            "slurm_step": os.environ.get("SLURM_STEP_ID"), "started_unix": round(time.time(), 3)}


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m launcher.node.step_record")
    ap.add_argument("--record", required=True, help="JSON file to write (the job folder: shared by every node)")
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--engine", default=None, help="the engine whose per-node environment to set")
    ap.add_argument("argv", nargs="+", metavar="-- COMMAND", help="the server's command, after --")
    a = ap.parse_args(argv)
    cmd = a.argv
    info = placement(a.rank)
    if a.engine:
        os.environ.update(get_engine(a.engine).node_env(info["address"], info["interface"], os.environ))
    path = Path(a.record)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, info, sort_keys=True)
    sys.stdout.flush()
    os.execvp(cmd[0], cmd)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
