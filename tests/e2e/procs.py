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
