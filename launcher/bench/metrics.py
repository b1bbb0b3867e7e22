"""Acceptance-length and timing math from AIPerf 0.13 ``profile_export.jsonl``
records, plus Prometheus counter deltas.

Pure functions: records in, dicts out (the dict shapes are
docs/results-layout.md's ``acceptance_rate.json`` and ``timing.json``).

Definitions (specdec_bench):
  * per turn, from vLLM's per-request stats (S steps, A accepted drafts):
    chunks = 1 + S (the prefill token, then one chunk a verify step),
    tokens = 1 + S + A;
  * ``Request_AL`` = sum(tokens) / sum(chunks) over one conversation's turns;
  * ``Average_AL`` = mean of ``Request_AL``;
  * ``Server_AL`` = 1 + sum(A) / sum(S) (token-weighted, no prefill chunks).

Only ``benchmark_phase == "profiling"`` records count. A record with an
``error`` or ``was_cancelled`` is a failed request: it is left out of every
AL and timing statistic and counted in ``failed_requests``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

PROFILING = "profiling"
ACCEPTED_COUNTER = "vllm:spec_decode_num_accepted_tokens_total"
DRAFTS_COUNTER = "vllm:spec_decode_num_drafts_total"

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

    @property
    def label(self) -> str:
        return f"{self.where} (conversation {self.conversation_id}, turn {self.turn_index})"

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
    return SpecStats(steps, accepted, drafted, hist, k)


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
        conversation_id=str(cid),
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
    )


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
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise RecordError(f"{path}:{lineno}: invalid JSON ({e.msg}); the export is "
                                  "truncated or corrupt, re-run the point") from None
            out.append(parse_record(obj, f"{path}:{lineno}"))
    return out


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


# ------------------------------------------------------------- acceptance

def _turn_steps(r: TurnRecord) -> tuple[int, int, dict[int, int]]:
    """(steps, accepted, histogram) of a successful turn, for a speculative run."""
    if r.spec is not None:
        return r.spec.steps, r.spec.accepted, r.spec.histogram
    if r.osl is not None and r.osl <= 1:
        # One token is the prefill token: no verify step ran, and vLLM may
        # leave the stats out (AIPerf drops an empty payload).
        return 0, 0, {}
    raise RecordError(
        f"{r.label}: no spec_decode_acceptance on a speculative run "
        f"(output_sequence_length {r.osl}); start vLLM with "
        "--per-request-spec-decode-metrics summary and stream with usage, "
        "or mark the point speculative=False"
    )


def _request_sums(records: list[TurnRecord]) -> dict[str, list[int]]:
    """conversation -> [turns, steps, accepted], in first-appearance order."""
    sums: dict[str, list[int]] = {}
    for r in records:
        s, a, _ = _turn_steps(r)
        t = sums.setdefault(r.conversation_id, [0, 0, 0])
        t[0] += 1
        t[1] += s
        t[2] += a
    return sums


def acceptance_rate(
    records: Sequence,
    categories: Mapping[str, str] | None = None,
    *,
    speculative: bool = True,
    prometheus_al: float | None = None,
) -> dict:
    """``acceptance_rate.json`` (docs/results-layout.md) from AIPerf records.

    ``categories`` maps a conversation id (the question id) to its category;
    ``None`` leaves ``Category_AL`` empty. A conversation missing from a
    given map is an error (the export is not from this dataset).
    For a baseline (``speculative=False``) every token is its own chunk:
    the ALs are 1.0 and the histogram, rates and ``Server_AL`` are null.
    """
    ok, _failed = profiling_records(records)
    conv_ids = list(dict.fromkeys(r.conversation_id for r in ok))
    if categories is not None:
        missing = [c for c in conv_ids if c not in categories]
        if missing:
            r = next(r for r in ok if r.conversation_id == missing[0])
            raise RecordError(
                f"{r.label}: conversation {missing[0]!r} is not a question of the dataset "
                f"({len(missing)} such); was the export made from another dataset file?"
            )

    def by_category(request_al: dict[str, float]) -> dict[str, float]:
        if categories is None:
            return {}
        groups: dict[str, list[float]] = {}
        for cid, al in request_al.items():
            groups.setdefault(categories[cid], []).append(al)
        return {cat: float(np.mean(v)) for cat, v in groups.items()}

    if not speculative:
        request_al = {c: 1.0 for c in conv_ids}
        return {
            "Average_AL": 1.0 if conv_ids else None,
            "Category_AL": by_category(request_al),
            "Request_AL": request_al,
            "Acceptance_Length_Histogram": None,
            "Conditional_Acceptance_Rate": None,
            "Joint_Acceptance_Rate": None,
            "Server_AL": None,
            "Prometheus_AL": prometheus_al,
            "num_requests": len(conv_ids),
            "num_turns": len(ok),
            "num_spec_steps": 0,
            "num_accepted_draft_tokens": 0,
            "num_draft_tokens": 0,
            "speculative": False,
        }

    sums = _request_sums(ok)
    request_al = {c: (t + s + a) / (t + s) for c, (t, s, a) in sums.items()}

    # Chunk lengths: each turn's prefill chunk (1 token), then 1 + j per step.
    lengths: dict[int, int] = {}
    steps = accepted = drafted = 0
    for r in ok:
        s, a, hist = _turn_steps(r)
        steps += s
        accepted += a
        drafted += r.spec.drafted if r.spec is not None else 0
        lengths[1] = lengths.get(1, 0) + 1
        for j, n in hist.items():
            lengths[j + 1] = lengths.get(j + 1, 0) + n
    histogram, conditional, joint = _length_distribution(lengths)

    return {
        "Average_AL": float(np.mean(list(request_al.values()))) if request_al else None,
        "Category_AL": by_category(request_al),
        "Request_AL": request_al,
        "Acceptance_Length_Histogram": histogram,
        "Conditional_Acceptance_Rate": conditional,
        "Joint_Acceptance_Rate": joint,
        "Server_AL": (1.0 + accepted / steps) if steps else (1.0 if ok else None),
        "Prometheus_AL": prometheus_al,
        "num_requests": len(request_al),
        "num_turns": len(ok),
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "speculative": True,
    }


def _length_distribution(lengths: dict[int, int]):
    """Histogram {"L": n} for L = 1..max (zeros kept), and for k = 2..max
    Joint[k] = P(L >= k), Conditional[k] = P(L >= k) / P(L >= k-1)."""
    if not lengths:
        return {}, {}, {}
    top = max(lengths)
    total = sum(lengths.values())
    histogram = {str(L): lengths.get(L, 0) for L in range(1, top + 1)}
    at_least = {}
    running = 0
    for L in range(top, 0, -1):
        running += lengths.get(L, 0)
        at_least[L] = running
    joint = {str(k): at_least[k] / total for k in range(2, top + 1)}
    conditional = {str(k): at_least[k] / at_least[k - 1] for k in range(2, top + 1)}
    return histogram, conditional, joint


def al_gap_prediction(records: Sequence, *, exact: bool = False) -> dict:
    """Why ``Server_AL`` and ``Average_AL`` differ, split in two exact parts.

    * ``pooled_chunk_al`` = sum(T+S+A) / sum(T+S) over all requests (T turns =
      prefill chunks), i.e. chunk AL before averaging per request;
    * ``prefill_effect`` = Server_AL - pooled_chunk_al (the prefill chunks of
      length 1 pull the chunk AL down);
    * ``averaging_effect`` = pooled_chunk_al - Average_AL (mean of per-request
      ratios vs the pooled ratio).
    ``total_gap`` = Server_AL - Average_AL = prefill_effect + averaging_effect.
    With ``exact=True`` the values are ``fractions.Fraction`` (the identity
    holds exactly); otherwise floats. Needs at least one verify step.
    """
    ok, _ = profiling_records(records)
    sums = _request_sums(ok)
    T = sum(v[0] for v in sums.values())
    S = sum(v[1] for v in sums.values())
    A = sum(v[2] for v in sums.values())
    if S == 0:
        raise RecordError("al_gap_prediction: no verify steps in the profiling records; "
                          "Server_AL is undefined")
    server = 1 + Fraction(A, S)
    pooled = Fraction(T + S + A, T + S)
    average = sum((Fraction(t + s + a, t + s) for t, s, a in sums.values()), Fraction(0)) / len(sums)
    out = {
        "Server_AL": server,
        "pooled_chunk_al": pooled,
        "Average_AL": average,
        "prefill_effect": server - pooled,
        "averaging_effect": pooled - average,
        "total_gap": server - average,
    }
    if not exact:
        out = {k: float(v) for k, v in out.items()}
    out.update(num_requests=len(sums), num_turns=T, num_spec_steps=S, num_accepted_draft_tokens=A)
    return out


# ----------------------------------------------------------------- timing

def stats(values: Sequence[float]) -> dict:
    """STATS: min, max, mean, std (population), p25, p50, p75 (linear), count."""
    if len(values) == 0:
        return {k: None for k in ("min", "max", "mean", "std", "p25", "p50", "p75")} | {"count": 0}
    a = np.asarray(values, dtype=float)
    p25, p50, p75 = np.percentile(a, [25, 50, 75])
    return {
        "min": float(a.min()), "max": float(a.max()), "mean": float(a.mean()),
        "std": float(a.std()), "p25": float(p25), "p50": float(p50), "p75": float(p75),
        "count": int(a.size),
    }


def generation_tps(r: TurnRecord) -> float | None:
    """(OSL - 1) / (request_latency - TTFT) in tokens/s; None when OSL < 2
    or when the whole stream arrived at once (latency == TTFT: AIPerf stamps
    every SSE event of one network read with the same time)."""
    if r.osl is None or r.osl < 2 or r.ttft_ms is None or r.latency_ms is None:
        return None
    decode_ms = r.latency_ms - r.ttft_ms
    if decode_ms <= 0:
        return None
    return (r.osl - 1) / (decode_ms / 1000.0)


def timing(records: Sequence, num_gpus: int = 1) -> dict:
    """``timing.json`` (docs/results-layout.md) from AIPerf records.

    Output TPS = sum of output_sequence_length over the successful profiling
    records / (last response - first request_start_ns) over those records,
    the last response being request_start_ns + request_latency. That window
    is AIPerf's ``benchmark_duration``; AIPerf's own ``output_token_throughput``
    divides by its profiling-phase window instead (phase start to end, which
    also spans failed requests and a few ms of overhead).
    """
    if isinstance(num_gpus, bool) or not isinstance(num_gpus, int) or num_gpus < 1:
        raise ValueError(f"num_gpus must be a positive integer, got {num_gpus!r}")
    ok, failed = profiling_records(records)
    for r in ok:
        if r.osl is None:
            raise RecordError(f"{r.label}: no metrics.output_sequence_length; "
                              "AIPerf needs a tokenizer to count output tokens")
        if r.start_ns is None or r.last_response_ns is None:
            raise RecordError(f"{r.label}: metadata.request_start_ns and "
                              "request_latency/request_end_ns missing")
    total = sum(r.osl for r in ok)
    duration_s = None
    tps = None
    if ok:
        duration_s = (max(r.last_response_ns for r in ok) - min(r.start_ns for r in ok)) / 1e9
        tps = total / duration_s if duration_s > 0 else None
    gen = [g for g in (generation_tps(r) for r in ok) if g is not None]
    return {
        "Output TPS": tps,
        "Output TPS/gpu": (tps / num_gpus) if tps is not None else None,
        "num_gpus": num_gpus,
        "TTFT Time": stats([r.ttft_ms for r in ok if r.ttft_ms is not None]),
        "E2E Request Time": stats([r.latency_ms for r in ok if r.latency_ms is not None]),
        "Request Generation Tokens Per Second": stats(gen),
        "total_output_tokens": total,
        "duration_s": duration_s,
        "num_requests": len(ok),
        "failed_requests": len(failed),
    }


# ------------------------------------------------------------- Prometheus

def _split_sample(line: str) -> tuple[str, str]:
    """'name{a="x y",b="}"} 1.5 123' -> ('name', '1.5 123')."""
    brace = line.find("{")
    space = line.find(" ")
    if brace == -1 or (space != -1 and space < brace):
        name, _, rest = line.partition(" ")
        return name, rest
    i, in_quotes = brace + 1, False
    while i < len(line):
        c = line[i]
        if in_quotes and c == "\\":
            i += 2
            continue
        if c == '"':
            in_quotes = not in_quotes
        elif c == "}" and not in_quotes:
            return line[:brace], line[i + 1:]
        i += 1
    raise ValueError(f"unterminated label set in {line!r:.80}")


def parse_prometheus_text(text: str) -> dict[str, float]:
    """Prometheus text exposition -> {metric name: value summed over label sets}."""
    out: dict[str, float] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            name, rest = _split_sample(line)
            value = float(rest.split()[0])
        except (ValueError, IndexError):
            raise ValueError(f"/metrics line {lineno}: cannot parse {line!r:.80}") from None
        name = name.strip()
        out[name] = out.get(name, 0.0) + value
    return out


def prometheus_al(before: Mapping[str, float], after: Mapping[str, float]) -> float | None:
    """1 + delta(accepted tokens) / delta(drafts) between two parsed scrapes.

    None when the counters are absent (no speculative config) or no draft
    ran in the window; a counter that went down (server restart) is an error.
    """
    if ACCEPTED_COUNTER not in after or DRAFTS_COUNTER not in after:
        return None
    d_acc = after[ACCEPTED_COUNTER] - before.get(ACCEPTED_COUNTER, 0.0)
    d_drafts = after[DRAFTS_COUNTER] - before.get(DRAFTS_COUNTER, 0.0)
    if d_acc < 0 or d_drafts < 0:
        raise ValueError("vLLM spec-decode counters went down between the scrapes "
                         "(server restarted?); Prometheus_AL cannot be computed")
    if d_drafts == 0:
        return None
    return 1.0 + d_acc / d_drafts
