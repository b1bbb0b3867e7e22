"""The one atomic file writer of the tree: a temporary file in the same folder,
flushed and fsynced, then renamed over the target. A reader sees the old file or
the new one, never a half-written one, even after a crash of the node."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout: recipes/, common/ (run.sh), launcher/


def write_text_atomic(path, text: str, durable: bool = True) -> Path:
    """Write ``text`` to ``path`` atomically (parent folders made). ``durable=False``
    skips the fsync, for a status file rewritten many times a second (progress.json):
    an fsync per AIPerf progress line slowed the reader of AIPerf's output enough
    to change how the server's stream reached AIPerf."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def write_json_atomic(path, obj: object, indent: int = 2, **dumps) -> Path:
    """``obj`` as JSON (``json.dumps(obj, indent=indent, **dumps)`` and a newline)."""
    return write_text_atomic(path, json.dumps(obj, indent=indent, **dumps) + "\n")


def jsonl_lines(f) -> Iterator[tuple[int, str]]:
    """(line number, line) of each non-blank line of an open JSONL file, numbered from 1."""
    for lineno, line in enumerate(f, start=1):
        if line.strip():
            yield lineno, line
