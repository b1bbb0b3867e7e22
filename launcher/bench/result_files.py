"""Writing one sweep point's result files (docs/results-layout.md):
acceptance_rate.json, timing.json, <dataset>_responses.jsonl,
configuration.json, and the COMPLETE marker written last.

Builders are pure (plain dicts in, dicts out); writers are atomic
(temporary file in the same folder, then ``os.replace``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import re
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from .datasets import DatasetSpec, Question, question_key

COMPLETE = "COMPLETE"
ACCEPTANCE_FILE = "acceptance_rate.json"
TIMING_FILE = "timing.json"
CONFIGURATION_FILE = "configuration.json"
MASK = "***"


# ------------------------------------------------------------ atomic writes

def _write_atomic(path: Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def write_json_atomic(path: Path | str, obj: object) -> Path:
    """Write ``obj`` as indented JSON; NaN/Infinity are refused (ValueError)."""
    return _write_atomic(Path(path), json.dumps(obj, indent=2, allow_nan=False) + "\n")


def write_jsonl_atomic(path: Path | str, rows: Iterable[object]) -> Path:
    text = "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in rows)
    return _write_atomic(Path(path), text)


def mark_complete(point_dir: Path | str) -> Path:
    """Write ``COMPLETE`` (the UTC time) atomically; call it after every other file."""
    return _write_atomic(Path(point_dir) / COMPLETE, utc_now() + "\n")


def is_complete(point_dir: Path | str) -> bool:
    return (Path(point_dir) / COMPLETE).is_file()


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# ------------------------------------------------------------ responses

def response_texts_from_raw(path: Path | str) -> dict[tuple[str, int], str]:
    """Assistant texts from AIPerf's ``profile_export_raw.jsonl``
    (``--export-level raw``): (conversation_id, turn_index) -> text.

    The streamed SSE ``choices[0].delta.content`` pieces are joined. Only
    profiling records without an error; the first record of a key wins.
    """
    path = Path(path)
    texts: dict[tuple[str, int], str] = {}
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                meta = rec["metadata"]
                key = (str(meta["conversation_id"]), int(meta["turn_index"]))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                raise ValueError(f"{path}:{lineno}: not an AIPerf raw record "
                                 "(needs metadata.conversation_id and turn_index)") from None
            if meta.get("benchmark_phase") != "profiling" or rec.get("error") or key in texts:
                continue
            pieces = []
            for resp in rec.get("responses") or []:
                for packet in resp.get("packets") or []:
                    pieces.append(_packet_text(packet))
            texts[key] = "".join(pieces)
    return texts


def _packet_text(packet: Mapping) -> str:
    if packet.get("name") != "data":
        return ""
    value = packet.get("value") or ""
    if value.strip() == "[DONE]":
        return ""
    try:
        obj = json.loads(value)
    except json.JSONDecodeError:
        return ""
    choices = obj.get("choices") or []
    if not choices:
        return ""
    delta = choices[0].get("delta") or choices[0].get("message") or {}
    return delta.get("content") or ""


def responses_rows(
    questions: Sequence[Question],
    texts: Mapping[tuple[str, int], str] | None = None,
) -> list[dict]:
    """``<dataset>_responses.jsonl`` rows: one per question, the assistant
    text of each turn from ``texts`` ((conversation_id, turn_index) -> text),
    an empty string where none was recorded."""
    texts = texts or {}
    rows = []
    for q in questions:
        key = question_key(q)
        rows.append({
            "question_id": q.question_id,
            "category": q.category,
            "turns": list(q.turns),
            "choices": [{"index": 0,
                         "turns": [texts.get((key, i), "") for i in range(len(q.turns))]}],
        })
    return rows


# ------------------------------------------------------------ configuration

# A key is secret when one of its words (split on non-alphanumerics and
# camelCase) ends with one of these, or is one of _SECRET_WORDS. Words ending
# in "tokens" (num_speculative_tokens, max_tokens) and "tokenizer*" fields are
# therefore kept.
_SECRET_SUFFIXES = ("token", "key", "secret", "password", "passwd")
_SECRET_WORDS = {"credentials", "credential", "authorization"}


def _key_words(key: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", key)
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]


def is_secret_key(key: object) -> bool:
    if not isinstance(key, str):
        return False
    return any(w.endswith(_SECRET_SUFFIXES) or w in _SECRET_WORDS for w in _key_words(key))


def mask_secrets(obj: object) -> object:
    """A copy of ``obj`` with the values of secret keys replaced by ``"***"``,
    at any depth (dicts, lists, tuples). Empty values (None, "") are kept."""
    if isinstance(obj, Mapping):
        return {k: (MASK if is_secret_key(k) and v not in (None, "") else mask_secrets(v))
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [mask_secrets(v) for v in obj]
    return obj


_URL_CREDENTIALS = re.compile(r"(://)[^/@\s:]+:[^/@\s]+@")


def mask_argv(argv: Sequence[str]) -> list[str]:
    """``--hf-token X``, ``--api-key=X`` and ``HF_TOKEN=X`` get their value
    masked; so do user:password@ parts of URLs. JSON values are masked inside."""
    out: list[str] = []
    mask_next = False
    for arg in argv:
        arg = str(arg)
        if mask_next:
            out.append(MASK)
            mask_next = False
            continue
        name, eq, value = arg.partition("=")
        if arg.startswith("-"):
            if is_secret_key(name.lstrip("-")):
                if eq:
                    out.append(f"{name}={MASK}")
                else:
                    out.append(arg)
                    mask_next = True
                continue
        elif eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and is_secret_key(name):
            out.append(f"{name}={MASK}")
            continue
        out.append(_mask_json_arg(_URL_CREDENTIALS.sub(r"\1***@", arg)))
    return out


def _mask_json_arg(arg: str) -> str:
    s = arg.strip()
    if not (s.startswith("{") and s.endswith("}")):
        return arg
    try:
        obj = json.loads(s)
    except json.JSONDecodeError:
        return arg
    masked = mask_secrets(obj)
    return arg if masked == obj else json.dumps(masked)


def checkpoint_info(path: str | os.PathLike | None) -> dict:
    """``{path, size_bytes, index_sha256, index_file}`` of a checkpoint folder.

    ``size_bytes`` sums the files below it (symlinks followed to files, as in
    the Hugging Face cache; symlinked folders not entered). ``index_sha256``
    hashes ``model.safetensors.index.json`` when present, else
    ``config.json`` (a single-file checkpoint has no index); ``index_file``
    says which. A path that is not a local folder (a hub id) gets nulls.
    """
    if path is None:
        return {"path": None, "size_bytes": None, "index_sha256": None, "index_file": None}
    p = Path(path)
    if not p.is_dir():
        return {"path": str(path), "size_bytes": None, "index_sha256": None, "index_file": None}
    size = 0
    for root, _dirs, files in os.walk(p):
        for name in files:
            try:
                size += os.stat(os.path.join(root, name)).st_size
            except OSError:  # a dangling symlink
                pass
    index_file = None
    for name in ("model.safetensors.index.json", "config.json"):
        if (p / name).is_file():
            index_file = name
            break
    digest = None
    if index_file is not None:
        digest = hashlib.sha256((p / index_file).read_bytes()).hexdigest()
    return {"path": str(p), "size_bytes": size, "index_sha256": digest, "index_file": index_file}


def build_configuration(
    *,
    run_args: Mapping,
    serving: Mapping,
    model: str,
    speculative_config: Mapping | None,
    engine: str,
    engine_version: str,
    argv: Sequence[str],
    tool_version: str,
    git_sha: str | None,
    gpu: str | None = None,
    checkpoint: Mapping | None = None,
    container_image: str | None = None,
    python_version: str | None = None,
    timestamp: str | None = None,
    extra: Mapping | None = None,
) -> dict:
    """``configuration.json`` from plain dicts, secrets masked at any depth.

    ``speculative_config`` None means a baseline (``{"method": "none"}``).
    ``container_image`` defaults to ``$CONTAINER_IMAGE`` (empty string if
    unset: the uploader refuses such a run, by design). ``checkpoint`` is
    :func:`checkpoint_info`'s dict. ``timestamp`` defaults to now (UTC ISO 8601).
    """
    if container_image is None:
        container_image = os.environ.get("CONTAINER_IMAGE", "")
    config = {
        "model": model,
        "speculative_config": dict(speculative_config) if speculative_config else {"method": "none"},
        "run_args": dict(run_args),
        "serving": dict(serving),
        "engine": engine,
        "engine_version": engine_version,
        "gpu": gpu,
        "python_version": python_version or platform.python_version(),
        "argv": mask_argv(argv),
        "tool_version": tool_version,
        "git_sha": git_sha,
        "container_image": container_image,
        "checkpoint": dict(checkpoint) if checkpoint is not None else checkpoint_info(None),
        "timestamp": timestamp or utc_now(),
    }
    if extra:
        for k, v in extra.items():
            if k in config:
                raise ValueError(f"extra key {k!r} would overwrite a configuration field")
            config[k] = v
    return mask_secrets(config)


# ------------------------------------------------------------ one point

def write_point(
    point_dir: Path | str,
    *,
    dataset: DatasetSpec,
    acceptance: Mapping,
    timing: Mapping,
    configuration: Mapping,
    questions: Sequence[Question],
    texts: Mapping[tuple[str, int], str] | None = None,
    complete: bool = True,
) -> Path:
    """Write the four result files of a point, then COMPLETE (if ``complete``)."""
    point_dir = Path(point_dir)
    write_json_atomic(point_dir / ACCEPTANCE_FILE, acceptance)
    write_json_atomic(point_dir / TIMING_FILE, timing)
    write_jsonl_atomic(point_dir / dataset.responses_file, responses_rows(questions, texts))
    write_json_atomic(point_dir / CONFIGURATION_FILE, configuration)
    if complete:
        mark_complete(point_dir)
    return point_dir
