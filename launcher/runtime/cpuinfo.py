"""The CPU's feature flags, as Linux reports them (/proc/cpuinfo)."""
from __future__ import annotations

from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


def parse_cpu_flags(text: str) -> frozenset[str]:
    """The flags of the first processor listed (x86 ``flags``; ARM ``Features``)."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def cpu_flags(path: Path = CPUINFO) -> frozenset[str]:
    try:
        return parse_cpu_flags(path.read_text())
    except OSError:
        return frozenset()
