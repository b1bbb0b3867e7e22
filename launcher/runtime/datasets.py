"""Benchmark datasets: readers for MT-Bench, Spec-Bench and SPEED-Bench, and
the AIPerf multi_turn input writer.

Every reader is a pure function ``(path, num_requests) -> list[Question]``.
A malformed line or row raises :class:`DatasetError` naming ``file:line``
(``file:row N`` for parquet) and what to fix.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

from launcher.runtime.files import jsonl_lines, write_text_atomic

MTBENCH_CATEGORIES = (
    "writing", "roleplay", "reasoning", "math",
    "coding", "extraction", "stem", "humanities",
)
MTBENCH_QUESTIONS_PER_CATEGORY = 10

# The splits registered by name; get_dataset() also accepts any other
# ``speed_<split>`` (the split list of SPEED-Bench may grow).
SPEED_SPLITS = (
    "qualitative", "throughput_1k", "throughput_2k", "throughput_4k",
    "throughput_8k", "throughput_16k", "throughput_32k",
)


class DatasetError(ValueError):
    """A dataset file that cannot be read; the message names file:line and the fix."""


@dataclass(frozen=True)
class Question:
    question_id: str
    category: str
    turns: list[str]


@dataclass(frozen=True)
class DatasetSpec:
    """One benchmark dataset.

    ``reader(path, num_requests)`` returns the questions (``num_requests``
    None = all). The responses file a point writes is named by
    launcher.results.layout.responses_file (specdec_bench's metric class: SPEED-Bench
    splits write ``specbench_responses.jsonl``), its one owner. ``request_key(question)`` is the key of the question in
    ``acceptance_rate.json``'s ``Request_AL`` and the AIPerf ``session_id``
    (AIPerf reports it back as ``metadata.conversation_id``).
    """

    name: str
    reader: Callable[[Path, int | None], list[Question]]
    request_key: Callable[[Question], str]


def question_key(question: Question) -> str:
    """Request_AL key: the question id as a string (``"81"``, ``"speed-0003"``)."""
    return str(question.question_id)


# A multi-phase AIPerf run holds one copy of a phase's questions per phase (AIPerf needs a
# session id once per file): the copy of question "81" for the 3rd phase is "81@phase3".
PHASE_COPY_SEP = "@phase"


def _phase_copy(session_id: object) -> tuple[str, Optional[int]]:
    """An AIPerf session id split into (question key, phase), phase None without a suffix."""
    sid = str(session_id)
    head, sep, tail = sid.rpartition(PHASE_COPY_SEP)
    return (head, int(tail)) if sep and tail.isdigit() else (sid, None)


def question_of_session(session_id: object) -> str:
    """The question key an AIPerf session id (``metadata.conversation_id``) stands for:
    ``"81@phase3"`` -> ``"81"``; an id without a phase suffix is the key itself."""
    return _phase_copy(session_id)[0]


def phase_of_session(session_id: object) -> Optional[int]:
    """The phase (1-based, in run order) whose copy a session id is (``"81@phase3"`` -> 3);
    None for an id laid out for no phase (a filler line between two phases, or a plain key)."""
    key, phase = _phase_copy(session_id)
    return phase if key else None


# ---------------------------------------------------------------- helpers

def _check_num_requests(num_requests: int | None) -> None:
    if num_requests is not None and (
        isinstance(num_requests, bool) or not isinstance(num_requests, int) or num_requests < 1
    ):
        raise DatasetError(
            f"num_requests must be a positive integer or None, got {num_requests!r}"
        )


def _clean_turns(turns: object, where: str) -> list[str]:
    if not isinstance(turns, (list, tuple)) or len(turns) == 0:
        raise DatasetError(
            f"{where}: 'turns' must be a non-empty list of strings, got {turns!r:.80}; "
            "fix or remove this entry"
        )
    out = []
    for i, t in enumerate(turns):
        if not isinstance(t, str) or not t.strip():
            raise DatasetError(
                f"{where}: turns[{i}] must be a non-empty string, got {t!r:.80}; "
                "fix or remove this entry"
            )
        out.append(t)
    return out


def _iter_jsonl(path: Path) -> Iterable[tuple[int, dict]]:
    """Yield (line number, object) for each non-blank line of a JSONL file."""
    if not path.is_file():
        raise DatasetError(f"{path}: no such file; pass the dataset's question file")
    with path.open(encoding="utf-8") as f:
        for lineno, line in jsonl_lines(f):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise DatasetError(
                    f"{path}:{lineno}: invalid JSON ({e.msg} at column {e.colno}); "
                    "each line must be one JSON object"
                ) from None
            if not isinstance(obj, dict):
                raise DatasetError(
                    f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}"
                )
            yield lineno, obj


def _question_id(obj: dict, where: str) -> str:
    qid = obj.get("question_id")
    if qid is None or isinstance(qid, bool) or not isinstance(qid, (int, str)) or str(qid) == "":
        raise DatasetError(
            f"{where}: missing or invalid 'question_id' ({qid!r}); "
            "each entry needs an int or string id"
        )
    return str(qid)


def _check_unique(questions: list[Question], path: Path) -> None:
    seen: set[str] = set()
    for q in questions:
        if q.question_id in seen:
            raise DatasetError(
                f"{path}: duplicate question_id {q.question_id!r}; ids must be unique "
                "(they name the AIPerf sessions and the Request_AL keys)"
            )
        seen.add(q.question_id)


# ---------------------------------------------------------------- readers

def read_mtbench(path: Path | str, num_requests: int | None = None) -> list[Question]:
    """FastChat MT-Bench ``question.jsonl``: 80 questions in file order.

    Category = MTBENCH_CATEGORIES[index // 10] (index = position in the file),
    which is the specdec_bench definition. A ``category`` field in the file
    that disagrees is reported with a warning (the index wins); questions past
    the 80th take the file's ``category`` field, or fail without one.
    """
    _check_num_requests(num_requests)
    path = Path(path)
    questions: list[Question] = []
    disagreements: list[str] = []
    for index, (lineno, obj) in enumerate(_iter_jsonl(path)):
        where = f"{path}:{lineno}"
        qid = _question_id(obj, where)
        turns = _clean_turns(obj.get("turns"), where)
        file_cat = obj.get("category")
        slot = index // MTBENCH_QUESTIONS_PER_CATEGORY
        if slot < len(MTBENCH_CATEGORIES):
            category = MTBENCH_CATEGORIES[slot]
            if isinstance(file_cat, str) and file_cat and file_cat != category:
                disagreements.append(f"line {lineno}: file {file_cat!r} vs index {category!r}")
        elif isinstance(file_cat, str) and file_cat:
            category = file_cat
        else:
            raise DatasetError(
                f"{where}: question #{index + 1} is past MT-Bench's 80 and has no "
                "'category'; add a category field or trim the file"
            )
        questions.append(Question(qid, category, turns))
        if num_requests is not None and len(questions) >= num_requests:
            break
    if disagreements:
        warnings.warn(
            f"{path}: {len(disagreements)} question(s) carry a category that disagrees "
            f"with MT-Bench's index//10 order (using the index): "
            + "; ".join(disagreements[:3]) + ("; ..." if len(disagreements) > 3 else ""),
            stacklevel=2,
        )
    _check_unique(questions, path)
    return questions


def read_specbench(path: Path | str, num_requests: int | None = None) -> list[Question]:
    """Spec-Bench ``question.jsonl``: ``question_id``, ``category``, ``turns``."""
    _check_num_requests(num_requests)
    path = Path(path)
    questions: list[Question] = []
    for lineno, obj in _iter_jsonl(path):
        where = f"{path}:{lineno}"
        qid = _question_id(obj, where)
        turns = _clean_turns(obj.get("turns"), where)
        category = obj.get("category")
        if not isinstance(category, str) or not category.strip():
            raise DatasetError(f"{where}: missing or empty 'category'; Spec-Bench rows need one")
        questions.append(Question(qid, category, turns))
        if num_requests is not None and len(questions) >= num_requests:
            break
    _check_unique(questions, path)
    return questions


def _speed_row_turns(row: dict, where: str) -> list[str]:
    if row.get("turns") is not None:
        return _clean_turns(row["turns"], where)
    if row.get("messages") is not None:
        msgs = row["messages"]
        if not isinstance(msgs, (list, tuple)):
            raise DatasetError(f"{where}: 'messages' must be a list of {{role, content}}")
        users = [m.get("content") for m in msgs
                 if isinstance(m, dict) and m.get("role") == "user"]
        return _clean_turns(users, where)
    for col in ("prompt", "question"):
        if row.get(col) is not None:
            return _clean_turns([row[col]], where)
    raise DatasetError(
        f"{where}: no prompt; SPEED-Bench rows need a 'turns' list, a 'messages' list, "
        "or a 'prompt'/'question' string column"
    )


def round_robin_by_category(questions: list[Question], n: int | None) -> list[Question]:
    """Stratified, deterministic selection of ``n`` questions.

    Categories are ordered by first appearance; each round takes the next
    unused question of every category in that order, until ``n`` are taken
    Selected questions keep the round-robin order; when ``n`` is None or
    covers every question, all are returned in file order.
    """
    if n is None or n >= len(questions):
        return list(questions)
    by_cat: dict[str, list[Question]] = {}
    for q in questions:
        by_cat.setdefault(q.category, []).append(q)
    queues = list(by_cat.values())
    out: list[Question] = []
    depth = 0
    while len(out) < n:
        for queue in queues:
            if depth < len(queue):
                out.append(queue[depth])
                if len(out) == n:
                    break
        depth += 1
    return out


def read_speed(path: Path | str, num_requests: int | None = None) -> list[Question]:
    """A SPEED-Bench split prepared offline as parquet (one row a question).

    Needs a ``category`` column; the prompt comes from ``turns`` (list),
    ``messages`` (user contents), ``prompt`` or ``question``. The id is the
    ``question_id`` column if present, else the row index. ``num_requests``
    takes a round-robin over categories (see :func:`round_robin_by_category`).
    """
    _check_num_requests(num_requests)
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: no such file; pass a SPEED-Bench split parquet")
    import pyarrow.parquet as pq  # lazy: pyarrow is optional and heavy; only SPEED-Bench parquet needs it

    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as e:  # pyarrow raises several types for a bad file
        raise DatasetError(f"{path}: not a readable parquet file ({e}); re-prepare the split") from None
    questions: list[Question] = []
    for i, row in enumerate(rows):
        where = f"{path}:row {i}"
        if "category" not in row:
            raise DatasetError(f"{path}: no 'category' column; SPEED-Bench splits need one")
        category = row["category"]
        if not isinstance(category, str) or not category.strip():
            raise DatasetError(f"{where}: empty 'category'")
        qid = _question_id(row, where) if row.get("question_id") is not None else str(i)
        questions.append(Question(qid, category, _speed_row_turns(row, where)))
    _check_unique(questions, path)
    return round_robin_by_category(questions, num_requests)


# ---------------------------------------------------------------- registry

SPEED_PREFIX = "speed_"


def speed_dataset(split: str) -> str:
    """The dataset name of a SPEED-Bench split (``throughput_4k`` -> ``speed_throughput_4k``)."""
    return f"{SPEED_PREFIX}{split}"


DATASETS: dict[str, DatasetSpec] = {
    "mtbench": DatasetSpec("mtbench", read_mtbench, question_key),
    "specbench": DatasetSpec("specbench", read_specbench, question_key),
}
for _split in SPEED_SPLITS:
    _name = speed_dataset(_split)
    DATASETS[_name] = DatasetSpec(_name, read_speed, question_key)
del _split, _name


def known_dataset(name: str) -> bool:
    """Whether ``name`` is a registered dataset: mtbench, specbench or a listed SPEED-Bench split
    (validation's rule; :func:`get_dataset` also serves an unlisted ``speed_<split>``)."""
    return name in DATASETS


def speed_split(name: str) -> str | None:
    """The SPEED-Bench split a dataset name stands for (``speed_throughput_4k`` -> ``throughput_4k``),
    None for a dataset that is not SPEED-Bench's."""
    return name[len(SPEED_PREFIX):] if name.startswith(SPEED_PREFIX) else None


def dataset_choices() -> str:
    """The registered datasets in words, for an error's fix."""
    return f"use mtbench, specbench or {SPEED_PREFIX}<split> (splits: {', '.join(SPEED_SPLITS)})"


def get_dataset(name: str) -> DatasetSpec:
    if name in DATASETS:
        return DATASETS[name]
    if re.fullmatch(r"speed_[A-Za-z0-9_]+", name):
        return DatasetSpec(name, read_speed, question_key)
    raise DatasetError(
        f"unknown dataset {name!r}; choose one of {', '.join(sorted(DATASETS))} "
        "(or speed_<split>)"
    )


# ---------------------------------------------------------------- AIPerf input

def aiperf_multi_turn_lines(questions: list[Question], output_length: int, *,
                            extra: Optional[dict] = None) -> list[dict]:
    """The AIPerf ``multi_turn`` objects: one session per question, every turn
    carrying ``output_length`` (AIPerf sends it as the turn's max tokens) and, when
    given, ``extra`` (request fields merged into the turn's body: a point's sampling)."""
    if isinstance(output_length, bool) or not isinstance(output_length, int) or output_length < 1:
        raise DatasetError(f"output_length must be a positive integer, got {output_length!r}")
    seen: set[str] = set()
    lines = []
    for q in questions:
        sid = question_key(q)
        if sid in seen:
            # AIPerf merges lines with the same session_id into one conversation.
            raise DatasetError(f"duplicate question_id {sid!r}: AIPerf would merge the sessions")
        seen.add(sid)
        turn = {"output_length": output_length} | ({"extra": dict(extra)} if extra else {})
        lines.append({
            "session_id": sid,
            "turns": [{"text": t, **turn} for t in q.turns],
        })
    return lines


def aiperf_phase_lines(questions: list[Question], phases: Sequence[tuple[int, int]], output_length: int, *,
                      extra: Optional[dict] = None) -> list[dict]:
    """The ``multi_turn`` objects of a multi-phase AIPerf run laid out so that each phase
    (``phases``: (sessions, concurrency) in run order) sends the FIRST ``sessions`` questions
    of the dataset, as specdec_bench's ``--num_requests N`` takes the first N rows. Pure.

    AIPerf 0.13 runs every phase from one sequential sampler (one cursor over the file, which
    wraps) and never resets it (timing/strategies/request_rate.py): a phase samples a first
    turn before its first request and again after each session it starts, unless that start
    was the phase's final request. So a concurrency phase of S sessions takes S lines when
    its last session start is its final request (that question has one turn), S + 1 when
    turns of it are still to come; the idle phase after a point (aiperf_runner.gap_phase, a
    constant rate that sends nothing) takes one line. The file holds, in run order, each
    phase's copy of its questions (session ids ``<key>@phase<i>``, read back by
    :func:`question_of_session`) and the lines taken between two phases (fillers, never
    sent: a record of one fails its point, metrics.turns). A phase of several concurrent
    sessions mixing one-turn and multi-turn questions sends a multi-turn one last, so that
    the count does not depend on timing."""
    base = aiperf_multi_turn_lines(questions, output_length, extra=extra)
    lines: list[dict] = []
    for i, (n, concurrency) in enumerate(phases, 1):
        n = int(n)
        if not 1 <= n <= len(base):
            raise DatasetError(f"phase {i} sends {n} sessions; the dataset has {len(base)}")
        order = _last_start_order(questions[:n], int(concurrency))
        lines += [base[k] | {"session_id": f"{base[k]['session_id']}{PHASE_COPY_SEP}{i}"} for k in order]
        if i < len(phases):  # the lines taken after the phase's sessions and by the idle phase, never sent
            taken = 1 + (len(questions[order[-1]].turns) > 1)
            lines += [{"session_id": f"not-sent-{i}-{t}", "turns": [{"text": "(not sent)", "output_length": 1}]}
                      for t in range(taken)]
    return lines


def _last_start_order(slice_: list[Question], concurrency: int) -> list[int]:
    """The order a phase sends its questions in: the dataset's, but with several sessions
    at once and one-turn and multi-turn questions mixed, the last multi-turn question moves
    to the end (whether a one-turn last start is the phase's final request would depend on
    timing)."""
    order = list(range(len(slice_)))
    multi = [k for k in order if len(slice_[k].turns) > 1]
    if concurrency > 1 and multi and len(slice_[-1].turns) == 1:
        order.remove(multi[-1])
        order.append(multi[-1])
    return order


def write_aiperf_multi_turn(questions: list[Question], path: Path | str, output_length: int,
                            extra: Optional[dict] = None, phases: Optional[Sequence[tuple[int, int]]] = None) -> Path:
    """Write the AIPerf ``--custom-dataset-type multi_turn`` input file (``extra``: request
    fields every turn carries; ``phases``: a multi-phase run's (sessions, concurrency) per
    phase, laid out by :func:`aiperf_phase_lines`)."""
    path = Path(path)
    lines = (aiperf_phase_lines(questions, phases, output_length, extra=extra) if phases is not None
             else aiperf_multi_turn_lines(questions, output_length, extra=extra))
    write_text_atomic(path, "".join(json.dumps(obj, ensure_ascii=False) + "\n" for obj in lines))
    return path


def category_map(questions: list[Question]) -> dict[str, str]:
    """Request key -> category, as :func:`metrics.acceptance_rate` wants it."""
    return {question_key(q): q.category for q in questions}
