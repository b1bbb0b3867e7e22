"""Parse a run's result files (its top-level *.json and *.jsonl).

Every problem is one line naming the file (and line) and the fix.  Files in
subfolders (AIPerf's artifact dir) are shipped as they are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from launcher.results.layout import CONFIGURATION_FILE, METRIC_FILES as LAYOUT_METRIC_FILES
from upload.discovery import LocalRun

# Result files whose top level must be a JSON object; metric files are
# specdec_bench's lists of objects (one per run into the folder).
OBJECT_FILES = (CONFIGURATION_FILE,)
METRIC_FILES = LAYOUT_METRIC_FILES


@dataclass
class ParsedRun:
    docs: dict[str, Any] = field(default_factory=dict)  # top-level *.json by name
    problems: list[str] = field(default_factory=list)


def _read_text(run: LocalRun, rel: str) -> str:
    f = run.file(rel)
    assert f is not None
    try:
        return f.path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{rel}: not UTF-8 text (byte {exc.start}); regenerate the file") from None
    except OSError as exc:
        raise ValueError(f"{rel}: cannot read ({exc.strerror}); fix its permissions") from None


def _parse_json(rel: str, text: str) -> Any:
    if not text.strip():
        raise ValueError(f"{rel}: file is empty; rerun the benchmark point that wrote it")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{rel}: invalid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg}); "
            "fix or regenerate the file"
        ) from None


def _check_jsonl(rel: str, text: str) -> None:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{rel}: line {number} is not valid JSON ({exc.msg} at column {exc.colno}); "
                "fix or regenerate the file"
            ) from None


def parse_result_files(run: LocalRun) -> ParsedRun:
    parsed = ParsedRun()
    for f in run.files:
        if "/" in f.rel or not f.rel.endswith((".json", ".jsonl")):
            continue
        try:
            text = _read_text(run, f.rel)
            if f.rel.endswith(".jsonl"):
                _check_jsonl(f.rel, text)
                continue
            doc = _parse_json(f.rel, text)
        except ValueError as exc:
            parsed.problems.append(str(exc))
            continue
        if f.rel in OBJECT_FILES and not isinstance(doc, dict):
            parsed.problems.append(
                f"{f.rel}: top level must be a JSON object, found {type(doc).__name__}; regenerate the file"
            )
            continue
        if f.rel in METRIC_FILES and not (isinstance(doc, dict) or (
                isinstance(doc, list) and doc and all(isinstance(x, dict) for x in doc))):
            parsed.problems.append(
                f"{f.rel}: top level must be a JSON list of objects, found "
                f"{'an empty list' if doc == [] else type(doc).__name__}; regenerate the file")
            continue
        parsed.docs[f.rel] = doc
    return parsed
