"""Engine versions: read from a version string or a container image's tag. Pure."""
from __future__ import annotations

import re
from typing import Optional


def parse_version(text: Optional[str]) -> Optional[tuple[int, ...]]:
    """(major, minor, patch) of a version string such as "0.32.0", "v0.26.0+cu130",
    "0.27.2rc1.dev407"; None when there is none."""
    if not text:
        return None
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", str(text))
    if not m:
        return None
    return tuple(int(x or 0) for x in m.groups())


def version_from_image(image: Optional[str]) -> Optional[str]:
    """The engine version a container image's tag names (`vllm/vllm-openai:v0.32.0` -> "0.32.0"),
    None for a tag without one (`latest`, a digest)."""
    if not image or ":" not in image.rsplit("/", 1)[-1]:
        return None
    tag = image.rsplit(":", 1)[1]
    v = parse_version(tag)
    return ".".join(map(str, v)) if v and re.match(r"^v?\d+\.\d+", tag) else None
