"""The golden references table (``references.json``): read once per process, looked up by id."""
from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Optional

TABLE = Path(__file__).with_name("references.json")


@functools.cache
def _entries(path: str) -> dict[str, dict]:
    return json.loads(Path(path).read_text())["entries"]


def load_table(path: Path | str = TABLE) -> dict[str, dict]:
    """The table's entries by id (a copy: the table read once stays as the file says)."""
    return copy.deepcopy(_entries(str(path)))


def known_ids(path: Path | str = TABLE) -> list[str]:
    return sorted(_entries(str(path)))


def lookup(golden_id: str, path: Path | str = TABLE) -> Optional[dict]:
    """The entry ``golden_id`` with its ``id``, or None."""
    e = _entries(str(path)).get(golden_id)
    return None if e is None else {"id": golden_id, **copy.deepcopy(e)}
