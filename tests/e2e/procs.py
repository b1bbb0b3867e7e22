"""Find server processes left behind (Linux /proc, no psutil)."""
from __future__ import annotations

import os
from pathlib import Path


def processes_matching(*needles: str) -> list[tuple[int, str]]:
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":  # zombies are dead
            continue
        cmd = raw.replace(b"\0", b" ").decode(errors="replace")
        if all(n in cmd for n in needles):
            out.append((int(pid), cmd))
    return out


def parent_pid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def outermost(found: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Drop the matches whose parent also matches: a process forked to start another (the
    benchmark starting AIPerf) carries its parent's command line until it execs."""
    pids = {pid for pid, _ in found}
    return [(pid, cmd) for pid, cmd in found if parent_pid(pid) not in pids]
