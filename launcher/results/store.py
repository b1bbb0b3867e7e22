"""The one writer and the low-level reader of result files.

specdec_bench's metric files are JSON lists of objects: a run appends one
object to the file of its folder, a reader takes the last one.
"""
from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Iterable

from launcher.runtime.files import write_text_atomic as _write_atomic
from launcher.results.layout import COMPLETE_FILE


class ResultFileError(ValueError):
    """A result file that cannot be read; the message names the file and the fix."""


def write_json_atomic(path, obj: object, indent: int = 2) -> Path:
    """Write ``obj`` as JSON; NaN/Infinity are refused (ValueError)."""
    return _write_atomic(Path(path), json.dumps(obj, indent=indent, allow_nan=False) + "\n")


def write_jsonl_atomic(path, rows: Iterable[object]) -> Path:
    text = "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in rows)
    return _write_atomic(Path(path), text)


def load_json(path) -> object:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ResultFileError(f"{path}: cannot read ({e.strerror})") from None
    if not text.strip():
        raise ResultFileError(f"{path}: file is empty; re-run the point")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ResultFileError(f"{path}: invalid JSON at line {e.lineno} ({e.msg}); re-run the point") from None


def append_metric(path, obj: dict) -> Path:
    """Append ``obj`` to the JSON list in ``path`` (a new list if absent), as
    specdec_bench's ``Metric.write`` does; atomically."""
    path = Path(path)
    existing: list = []
    if path.exists():
        doc = load_json(path)
        if isinstance(doc, dict):  # a file of the pre-list layout: keep it as the first run
            doc = [doc]
        if not isinstance(doc, list):
            raise ResultFileError(f"{path}: top level must be a JSON list; move the file away and re-run")
        existing = doc
    existing.append(obj)
    return write_json_atomic(path, existing, indent=4)


def read_last(path) -> dict:
    """The last object of a metric file (a list); a bare object is read as is."""
    doc = load_json(path)
    if isinstance(doc, list):
        if not doc or not isinstance(doc[-1], dict):
            raise ResultFileError(f"{Path(path).name}: top level must be a list of JSON objects; re-run the point")
        return doc[-1]
    if isinstance(doc, dict):
        return doc
    raise ResultFileError(f"{Path(path).name}: top level must be a JSON list of objects, found {type(doc).__name__}")


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def mark_complete(point_dir) -> Path:
    """Write ``COMPLETE`` (the UTC time) atomically; call it after every other file."""
    return _write_atomic(Path(point_dir) / COMPLETE_FILE, utc_now() + "\n")


def is_complete(point_dir) -> bool:
    return (Path(point_dir) / COMPLETE_FILE).is_file()
