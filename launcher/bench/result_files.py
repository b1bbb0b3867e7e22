"""One sweep point's result files (docs/results-layout.md), written through
:mod:`launcher.results`: acceptance_rate.json and timing.json (appended, as
specdec_bench does), the responses file named as specdec_bench names it,
configuration.json with specdec_bench's flat keys, and COMPLETE last.

Builders are pure (plain dicts in, dicts out).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import statistics
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from launcher.runtime.datasets import DatasetSpec, Question, question_key, question_of_session
from launcher.runtime.files import jsonl_lines

from launcher.results import (ACCEPTANCE_FILE, COMPLETE_FILE as COMPLETE, CONFIGURATION_FILE,  # noqa: F401
                              EXTENSION_KEY, TIMING_FILE, append_metric, is_complete, mark_complete,
                              write_json_atomic, write_jsonl_atomic)
from launcher.results.layout import SPECBENCH, dataset_kind, responses_file
from launcher.results.specbench_results import SPECBENCH_PLOT_FILE, write_specbench_results
from launcher.results.responses import response_rows
from launcher.results.store import utc_now
from launcher.bench.specbench_plot import draw

MASK = "***REDACTED***"  # what specdec_bench writes for a secret


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
        for lineno, line in jsonl_lines(f):
            try:
                rec = json.loads(line)
                meta = rec["metadata"]
                key = (question_of_session(meta["conversation_id"]), int(meta["turn_index"]))
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
    dataset: str = "mtbench",
) -> list[dict]:
    """The responses file's rows as specdec_bench writes them for ``dataset``:
    the assistant text of each turn from ``texts`` ((conversation_id,
    turn_index) -> text), an empty string where none was recorded."""
    texts = texts or {}
    answers = [[texts.get((question_key(q), i), "") for i in range(len(q.turns))] for q in questions]
    return response_rows(dataset_kind(dataset), [q.turns for q in questions], answers,
                         [_row_id(q.question_id) for q in questions], [q.category for q in questions])


def _row_id(qid: str):
    """A dataset row's question_id with its JSON type (Spec-Bench ids are integers)."""
    return int(qid) if isinstance(qid, str) and qid.isdigit() else qid


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
    """``{path, size_bytes, index_sha256, index_source}`` of a checkpoint folder.

    ``size_bytes`` sums the files below it (symlinks followed to files, as in
    the Hugging Face cache; symlinked folders not entered). ``index_sha256``
    hashes ``model.safetensors.index.json`` when present, else
    ``config.json`` (a single-file checkpoint has no index); ``index_source``
    says which. A path that is not a local folder (a hub id) gets nulls.
    """
    if path is None:
        return {"path": None, "size_bytes": None, "index_sha256": None, "index_source": None}
    p = Path(path)
    if not p.is_dir():
        return {"path": str(path), "size_bytes": None, "index_sha256": None, "index_source": None}
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
    return {"path": str(p), "size_bytes": size, "index_sha256": digest, "index_source": index_file}


# specdec_bench's run.py arguments, in its order (configuration.json's flat keys).
SPECDEC_ARGS = ("tokenizer", "mtbench", "specbench", "random_isl", "dataset", "dataset_path", "num_requests",
                "engine", "speculative_algorithm", "model_dir", "draft_model_dir", "runtime_params", "temperature",
                "max_seq_len", "output_length", "draft_length", "block_size", "tp_size", "ep_size", "concurrency",
                "trust_remote_code", "aa_timing", "ignore_eos", "show_progress", "completions", "postprocess",
                "save_dir")
_ALGORITHMS = {"eagle3": "EAGLE3", "eagle": "EAGLE", "draft_model": "DRAFT_TARGET", "ngram": "NGRAM",
               "mtp": "MTP", "dflash": "DFLASH", "none": "NONE"}


def speculative_algorithm(method: str | None) -> str:
    """specdec_bench's --speculative_algorithm name for a vLLM method."""
    if not method:
        return "NONE"
    return _ALGORITHMS.get(method, "MTP" if "mtp" in method else method.upper())


def build_configuration(
    *,
    run_args: Mapping,
    serving_config: Mapping,
    engine_version: str,
    argv: Sequence[str],
    gpu: str | None = None,
    checkpoint: Mapping | None = None,
    container_image: str | None = None,
    python_version: str | None = None,
    timestamp: str | None = None,
    extension: Mapping | None = None,
) -> dict:
    """``configuration.json`` as specdec_bench's ``dump_env`` lays it out:
    its flat run arguments (``run_args``; missing ones null), then
    ``serving_config`` and the provenance keys; ours under the extension key.
    Secrets are masked at any depth. ``container_image`` defaults to
    ``$CONTAINER_IMAGE`` (the uploader refuses a run without one, by design).
    """
    unknown = set(run_args) - set(SPECDEC_ARGS)
    if unknown:
        raise ValueError(f"run_args has keys specdec_bench does not have: {sorted(unknown)}; "
                         "put them in the extension")
    if container_image is None:
        container_image = os.environ.get("CONTAINER_IMAGE") or None
    config: dict = {k: run_args.get(k) for k in SPECDEC_ARGS}
    config["serving_config"] = dict(serving_config)
    config["engine_version"] = engine_version
    config["gpu"] = gpu
    config["python_version"] = python_version or platform.python_version()
    config["argv"] = mask_argv(argv)
    for k in ("specdec_bench_version", "specdec_bench_sha", "modelopt_version", "modelopt_sha"):
        config[k] = None
    config["container_image"] = container_image
    config["checkpoint"] = dict(checkpoint) if checkpoint is not None else checkpoint_info(None)
    config["timestamp"] = timestamp or utc_now()
    config["jira_ticket"] = os.environ.get("JIRA_TICKET") or None
    config["huggingface_model_id"] = os.environ.get("HUGGINGFACE_MODEL_ID") or None
    config[EXTENSION_KEY] = dict(extension or {})
    return mask_secrets(config)


# ------------------------------------------------------------ one point

def _specbench_plot(point_dir: Path, acceptance: Mapping, questions: Sequence[Question],
                    texts: Mapping[tuple[str, int], str]) -> None:
    ral = acceptance.get("Request_AL") or {}
    rows = [(q, ral.get(_row_id(q.question_id), ral.get(q.question_id))) for q in questions]
    rows = [(q, al) for q, al in rows if al is not None]
    chars = [statistics.mean([len(texts.get((question_key(q), i), "")) for i in range(len(q.turns))])
             for q, _ in rows]
    try:
        draw(point_dir / SPECBENCH_PLOT_FILE, [al for _, al in rows], [q.category for q, _ in rows], chars)
    except Exception as e:  # a figure never fails a point
        print(f"warning: {SPECBENCH_PLOT_FILE} not drawn: {e}")


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
    """Write a point's files (metric files appended, as specdec_bench does),
    then COMPLETE (if ``complete``)."""
    point_dir = Path(point_dir)
    point_dir.mkdir(parents=True, exist_ok=True)
    (point_dir / COMPLETE).unlink(missing_ok=True)
    append_metric(point_dir / ACCEPTANCE_FILE, dict(acceptance))
    append_metric(point_dir / TIMING_FILE, dict(timing))
    write_jsonl_atomic(point_dir / responses_file(dataset.name), responses_rows(questions, texts, dataset.name))
    write_json_atomic(point_dir / CONFIGURATION_FILE, configuration, indent=4)
    if dataset_kind(dataset.name) == SPECBENCH:  # specdec_bench's SpecBench also writes these two
        write_specbench_results(point_dir, acceptance)
        _specbench_plot(point_dir, acceptance, questions, texts or {})
    if complete:
        mark_complete(point_dir)
    return point_dir
