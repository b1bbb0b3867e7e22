"""AIPerf 0.13's per-request records (``profile_export.jsonl``), read into
frozen ``TurnRecord``s: the one reader of the record exports a point folder
holds (the benchmark computes its metrics from them, speedup pairs them).

Only ``benchmark_phase == "profiling"`` records count. A record with an
``error`` or ``was_cancelled`` is a failed request. Errors name file:line.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

from launcher.runtime.datasets import question_of_session
from launcher.runtime.files import jsonl_lines

PROFILING = "profiling"

_TIME_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3, "sec": 1e3}


class RecordError(ValueError):
    """A malformed AIPerf record; the message names file:line, the conversation and the fix."""


@dataclass(frozen=True)
class SpecStats:
    steps: int
    accepted: int
    drafted: int
    histogram: dict[int, int]  # accepted drafts j -> verify steps; zero buckets dropped
    num_spec_tokens: int | None
    per_step_accepted: tuple | None = None  # in step order (vLLM "detailed" metrics)


@dataclass(frozen=True)
class TurnRecord:
    """One AIPerf record (one turn of one conversation), normalised."""

    where: str                # "file:line"
    conversation_id: str
    turn_index: int
    phase: str
    profiling_index: int | None  # which profiling phase (a --concurrency sweep has several)
    failed: bool              # error or cancelled
    start_ns: int | None
    end_ns: int | None
    osl: int | None           # output_sequence_length (tokens)
    ttft_ms: float | None
    latency_ms: float | None
    spec: SpecStats | None
    completion_tokens: int | None = None   # the server's usage figure (EOS included)
    chunk_gaps_ms: tuple = ()              # inter_chunk_latency: gaps between streamed chunks
    prompt_tokens: int | None = None       # the server's usage figure of the prompt (usage_prompt_tokens)

    @property
    def label(self) -> str:
        return f"{self.where} (conversation {self.conversation_id}, turn {self.turn_index})"

    @property
    def output_tokens(self) -> int | None:
        """The tokens the server generated: its usage figure (EOS included) where
        it sent one, else AIPerf's output_sequence_length, which re-tokenizes the
        returned text and can differ widely (on a random-weight model's text, 1261
        against the server's 256)."""
        return self.completion_tokens if self.completion_tokens is not None else self.osl

    @property
    def last_response_ns(self) -> int | None:
        """When the last response arrived: request_start_ns + request_latency
        (AIPerf's own end for benchmark_duration). ``request_end_ns`` can be
        later: it also covers the trailing usage chunk and ``[DONE]``."""
        if self.start_ns is not None and self.latency_ms is not None:
            return self.start_ns + round(self.latency_ms * 1e6)
        return self.end_ns


# ------------------------------------------------------------------ parsing

def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _count(x: object, name: str, label: str) -> int:
    """A non-negative integer count (integral floats accepted)."""
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    if not _is_int(x) or x < 0:
        raise RecordError(
            f"{label}: spec_decode_acceptance.{name} must be a non-negative integer, "
            f"got {x!r}; the export is corrupt, re-run the point"
        )
    return x


def _histogram(raw: object, label: str) -> dict[int, int]:
    """vLLM's dense list ``[n0, n1, ...]`` or AIPerf's sparse ``{"j": n}`` map."""
    if isinstance(raw, list):
        items = list(enumerate(raw))
    elif isinstance(raw, dict):
        items = []
        for k, v in raw.items():
            try:
                j = int(k)
            except (TypeError, ValueError):
                j = -1
            if j < 0 or (isinstance(k, str) and k.strip() != str(j)):
                raise RecordError(
                    f"{label}: acceptance_histogram key {k!r} is not a non-negative "
                    "integer; the export is corrupt, re-run the point"
                )
            items.append((j, v))
    else:
        raise RecordError(
            f"{label}: acceptance_histogram must be a list or a map, got {raw!r:.60}; "
            "the export is corrupt, re-run the point"
        )
    hist: dict[int, int] = {}
    for j, v in items:
        n = _count(v, f"acceptance_histogram[{j}]", label)
        if n:
            hist[j] = hist.get(j, 0) + n
    return hist


def _spec_stats(raw: object, label: str) -> SpecStats:
    if not isinstance(raw, dict):
        raise RecordError(f"{label}: spec_decode_acceptance must be an object, got {raw!r:.60}")
    for field in ("num_spec_steps", "num_accepted_draft_tokens", "num_draft_tokens",
                  "acceptance_histogram"):
        if field not in raw:
            raise RecordError(
                f"{label}: spec_decode_acceptance has no {field!r}; the export is corrupt "
                "or from another AIPerf version (0.13 expected)"
            )
    steps = _count(raw["num_spec_steps"], "num_spec_steps", label)
    accepted = _count(raw["num_accepted_draft_tokens"], "num_accepted_draft_tokens", label)
    drafted = _count(raw["num_draft_tokens"], "num_draft_tokens", label)
    k = raw.get("num_spec_tokens")
    k = None if k is None else _count(k, "num_spec_tokens", label)
    hist = _histogram(raw["acceptance_histogram"], label)
    problems = []
    if sum(hist.values()) != steps:
        problems.append(f"histogram counts sum to {sum(hist.values())} but num_spec_steps is {steps}")
    if sum(j * n for j, n in hist.items()) != accepted:
        problems.append(
            f"histogram implies {sum(j * n for j, n in hist.items())} accepted drafts "
            f"but num_accepted_draft_tokens is {accepted}")
    if accepted > drafted:
        problems.append(f"num_accepted_draft_tokens {accepted} > num_draft_tokens {drafted}")
    if k is not None:
        if hist and max(hist) > k:
            problems.append(f"a step accepted {max(hist)} drafts but num_spec_tokens is {k}")
        if drafted > steps * k:
            problems.append(f"num_draft_tokens {drafted} > num_spec_steps*num_spec_tokens {steps * k}")
    if problems:
        raise RecordError(f"{label}: inconsistent spec_decode_acceptance: " + "; ".join(problems)
                          + "; the export is corrupt, re-run the point")
    per_step = raw.get("per_step_accepted")
    if per_step is not None:
        if (not isinstance(per_step, list) or len(per_step) != steps
                or sum(_count(a, "per_step_accepted[]", label) for a in per_step) != accepted):
            raise RecordError(f"{label}: per_step_accepted does not match num_spec_steps/num_accepted_draft_tokens; "
                              "the export is corrupt, re-run the point")
        per_step = tuple(int(a) for a in per_step)
    return SpecStats(steps, accepted, drafted, hist, k, per_step)


def _metric_value(metrics: Mapping, name: str, label: str) -> float | None:
    m = metrics.get(name)
    if m is None:
        return None
    v = m.get("value") if isinstance(m, dict) else m
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise RecordError(f"{label}: metrics.{name}.value must be a finite number, got {v!r}")
    return v


def _time_ms(metrics: Mapping, name: str, label: str) -> float | None:
    v = _metric_value(metrics, name, label)
    if v is None:
        return None
    unit = metrics[name].get("unit", "ms") if isinstance(metrics[name], dict) else "ms"
    if unit not in _TIME_TO_MS:
        raise RecordError(f"{label}: metrics.{name}.unit {unit!r} is not a time unit (ns/us/ms/s)")
    return v * _TIME_TO_MS[unit]


def parse_record(obj: object, where: str) -> TurnRecord:
    """Normalise one AIPerf record; ``where`` is ``"file:line"``."""
    if not isinstance(obj, dict):
        raise RecordError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise RecordError(f"{where}: no 'metadata' object; is this an AIPerf 0.13 profile_export.jsonl?")
    cid = meta.get("conversation_id")
    tix = meta.get("turn_index")
    label = f"{where} (conversation {cid}, turn {tix})"
    if cid is None or (not isinstance(cid, (str, int)) or isinstance(cid, bool)):
        raise RecordError(f"{label}: metadata.conversation_id missing; run AIPerf with a "
                          "multi_turn dataset so each record names its session")
    if not _is_int(tix) or tix < 0:
        raise RecordError(f"{label}: metadata.turn_index must be a non-negative integer")
    metrics = obj.get("metrics") or {}
    if not isinstance(metrics, dict):
        raise RecordError(f"{label}: 'metrics' must be an object")
    failed = bool(obj.get("error")) or bool(meta.get("was_cancelled"))
    osl = _metric_value(metrics, "output_sequence_length", label)
    if osl is not None:
        if not float(osl).is_integer() or osl < 0:
            raise RecordError(f"{label}: output_sequence_length must be a non-negative integer, got {osl!r}")
        osl = int(osl)
    raw_spec = obj.get("spec_decode_acceptance")
    spec = None if (raw_spec is None or failed) else _spec_stats(raw_spec, label)
    start, end = meta.get("request_start_ns"), meta.get("request_end_ns")
    for name, v in (("request_start_ns", start), ("request_end_ns", end)):
        if v is not None and not _is_int(v):
            raise RecordError(f"{label}: metadata.{name} must be an integer, got {v!r}")
    return TurnRecord(
        where=where,
        conversation_id=question_of_session(cid),  # a phase's copy "81@phase3" is question "81"
        turn_index=tix,
        phase=str(meta.get("benchmark_phase", "")),
        profiling_index=meta.get("profiling_index"),
        failed=failed,
        start_ns=start,
        end_ns=end,
        osl=osl,
        ttft_ms=_time_ms(metrics, "time_to_first_token", label),
        latency_ms=_time_ms(metrics, "request_latency", label),
        spec=spec,
        completion_tokens=_completion_tokens(metrics, raw_spec, label),
        chunk_gaps_ms=_chunk_gaps(metrics, label),
        prompt_tokens=_whole(_metric_value(metrics, "usage_prompt_tokens", label)),
    )


def _whole(v) -> int | None:
    """A token count as an int (None when absent or not a whole number)."""
    return int(v) if v is not None and float(v).is_integer() and v >= 0 else None


def _completion_tokens(metrics: Mapping, raw_spec: object, label: str) -> int | None:
    v = _metric_value(metrics, "usage_completion_tokens", label)
    if v is None and isinstance(raw_spec, dict):
        v = raw_spec.get("completion_tokens")
    if v is None:
        return None
    if not float(v).is_integer() or v < 0:
        raise RecordError(f"{label}: usage_completion_tokens must be a non-negative integer, got {v!r}")
    return int(v)


def _chunk_gaps(metrics: Mapping, label: str) -> tuple:
    m = metrics.get("inter_chunk_latency")
    if not isinstance(m, dict) or not isinstance(m.get("value"), list):
        return ()
    f = _TIME_TO_MS.get(m.get("unit", "ms"))
    if f is None:
        raise RecordError(f"{label}: metrics.inter_chunk_latency.unit {m.get('unit')!r} is not a time unit")
    return tuple(float(x) * f for x in m["value"])


def parse_records(objs: Iterable[object], source: str = "<records>") -> list[TurnRecord]:
    """Normalise records given as parsed JSON objects (line = position, from 1)."""
    return [parse_record(o, f"{source}:{i}") for i, o in enumerate(objs, start=1)]


def read_profile_export(path: Path | str) -> list[TurnRecord]:
    """Read and normalise AIPerf's ``profile_export.jsonl``."""
    path = Path(path)
    if not path.is_file():
        raise RecordError(f"{path}: no such file; AIPerf writes it with --export-level records (default)")
    out = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in jsonl_lines(f):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise RecordError(f"{path}:{lineno}: invalid JSON ({e.msg}); the export is "
                                  "truncated or corrupt, re-run the point") from None
            out.append(parse_record(obj, f"{path}:{lineno}"))
    return out


def raw_turn_records(path: Path | str) -> Iterator[tuple[int, tuple[str, int], dict]]:
    """(line, (conversation_id, turn_index), record) of AIPerf's ``profile_export_raw.jsonl``
    (``--export-level raw``): profiling records without an error, the first record of a
    key only. A line that is not a raw record is a ValueError naming file:line."""
    path = Path(path)
    seen: set[tuple[str, int]] = set()
    with path.open(encoding="utf-8") as f:
        for lineno, line in jsonl_lines(f):
            try:
                rec = json.loads(line)
                meta = rec["metadata"]
                key = (question_of_session(meta["conversation_id"]), int(meta["turn_index"]))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                raise ValueError(f"{path}:{lineno}: not an AIPerf raw record "
                                 "(needs metadata.conversation_id and turn_index)") from None
            if meta.get("benchmark_phase") != PROFILING or rec.get("error") or key in seen:
                continue
            seen.add(key)
            yield lineno, key, rec


def _as_records(records: Sequence) -> list[TurnRecord]:
    if records and not isinstance(records[0], TurnRecord):
        return parse_records(records)
    return list(records)


def profiling_records(records: Sequence) -> tuple[list[TurnRecord], list[TurnRecord]]:
    """(successful, failed) records of the profiling phase; warmup is dropped.

    A (conversation, turn) seen twice is an error: AIPerf wrapped around the
    dataset (--num-conversations larger than the file) or the export holds
    several profiling phases (a --concurrency list), which must be split by
    ``TurnRecord.profiling_index`` before calling this.
    """
    recs = [r for r in _as_records(records) if r.phase == PROFILING]
    seen: dict[tuple[str, int], TurnRecord] = {}
    for r in recs:
        key = (r.conversation_id, r.turn_index)
        if key in seen:
            raise RecordError(
                f"{r.label}: this turn was already recorded at {seen[key].where}; pass "
                "--num-conversations equal to the number of questions, and split a "
                "concurrency sweep by metadata.profiling_index"
            )
        seen[key] = r
    return [r for r in recs if not r.failed], [r for r in recs if r.failed]
