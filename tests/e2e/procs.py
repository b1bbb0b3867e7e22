"""Find server processes left behind (Linux /proc, no psutil)."""
from __future__ import annotations

import os
from pathlib import Path


def _stat_fields(pid: int | str) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state, parent pid, ...); None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return None


def processes_matching(*needles: str) -> list[tuple[int, str]]:
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        stat = _stat_fields(pid)
        if not stat or stat[0] == "Z":  # gone, or a zombie: dead
            continue
        cmd = raw.replace(b"\0", b" ").decode(errors="replace")
        if all(n in cmd for n in needles):
            out.append((int(pid), cmd))
    return out


def outermost(found: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Drop the matches whose parent also matches: a process forked to start another (the
    benchmark starting AIPerf) carries its parent's command line until it execs."""
    pids = {pid for pid, _ in found}
    return [(pid, cmd) for pid, cmd in found if int((_stat_fields(pid) or ["", "0"])[1]) not in pids]
