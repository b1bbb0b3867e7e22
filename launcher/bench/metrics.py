"""Acceptance-length and timing math from AIPerf 0.13 ``profile_export.jsonl``
records, plus Prometheus counter deltas.

Pure functions: records in, specdec_bench's objects out (built by
:mod:`launcher.results`, docs/results-layout.md).

Definitions:
  * specdec_bench's (``Average_AL``, ``Request_AL``, histogram): per turn, the
    emitted tokens (the server's ``completion_tokens`` less a final EOS) in
    chunks: the prefill chunk, then 1 + accepted per verify step, cut where
    the output ends (:func:`launcher.results.chunks_from_server`);
  * vLLM's (``Server_AL``): 1 + sum(accepted) / sum(steps), which also counts
    drafts accepted past EOS or ``max_tokens``; ``al_gap`` splits the
    difference into a prefill, a truncation and an averaging part.

Only ``benchmark_phase == "profiling"`` records count. A record with an
``error`` or ``was_cancelled`` is a failed request: it is left out of every
AL and timing statistic and counted in ``failed_requests``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Optional, Sequence

from launcher.engines import MetricNames
from launcher.results import EXTENSION_KEY, Turn, acceptance_doc, chunks_from_server, timing_doc
from launcher.results import per_position, plausibility
from launcher.results.layout import dataset_kind
from launcher.results.records import (  # noqa: F401 (the record model, re-exported)
    PROFILING,
    RecordError,
    SpecStats,
    TurnRecord,
    _as_records,
    parse_record,
    parse_records,
    profiling_records,
    read_profile_export,
)
from launcher.bench.stream_chunks import stats_from_chunks


# ------------------------------------------------------------- acceptance

def emitted_tokens(r: TurnRecord) -> int | None:
    """The server's completion tokens (EOS included); AIPerf's own
    output_sequence_length re-tokenizes the text and can differ."""
    return r.output_tokens


def turn_chunks(r: TurnRecord, max_tokens: int | None, speculative: bool, acceptance_hint: str) -> list[int]:
    """specdec_bench's chunks of one successful turn. The turn ends with EOS
    when it stopped before ``max_tokens`` (stop_token_ids = [eos], as
    specdec_bench sends); a baseline emits one token a chunk. ``acceptance_hint``: how the
    serving engine reports per-request acceptance (``Engine.acceptance_hint()``), for the error."""
    n = emitted_tokens(r)
    if n is None:
        raise RecordError(f"{r.label}: no usage_completion_tokens or output_sequence_length; "
                          "stream with usage (AIPerf sets stream_options.include_usage)")
    eos = max_tokens is not None and n < max_tokens
    if not speculative:
        return chunks_from_server(n, eos, [0] * max(n - 1, 0))
    if r.spec is None:
        if n <= 1:
            return chunks_from_server(n, eos, [])  # no verify step ran
        raise RecordError(
            f"{r.label}: no spec_decode_acceptance on a speculative run ({n} tokens); "
            f"{acceptance_hint} and stream with usage, or mark the point speculative=False")
    return chunks_from_server(n, eos, r.spec.per_step_accepted,
                              None if r.spec.per_step_accepted is not None else r.spec.histogram)


def attach_stream_stats(records: Sequence, chunks: Mapping[tuple[str, int], list], k: int) -> list[TurnRecord]:
    """Records whose acceptance comes from their streamed chunks
    (:mod:`launcher.bench.stream_chunks`): each successful profiling record gets the
    stats its chunks imply, in vLLM's per-request shape; one without chunks keeps none."""
    out = []
    for r in _as_records(records):
        c = chunks.get((r.conversation_id, r.turn_index))
        if r.failed or r.phase != PROFILING or not c:
            out.append(r)
            continue
        st = stats_from_chunks(list(c), k)
        hist = {j: n for j, n in enumerate(st["acceptance_histogram"]) if n}
        spec = SpecStats(steps=st["num_spec_steps"], accepted=st["num_accepted_draft_tokens"],
                         drafted=st["num_draft_tokens"], histogram=hist, num_spec_tokens=k,
                         per_step_accepted=tuple(st["per_step_accepted"]))
        out.append(replace(r, spec=spec, completion_tokens=sum(c)))
    return out


def _turn_times(r: TurnRecord) -> tuple:
    """[request start, first chunk, then each later chunk] in seconds (SSE arrival times)."""
    if r.start_ns is None or r.ttft_ms is None:
        return ()
    t0 = r.start_ns / 1e9
    times = [t0, t0 + r.ttft_ms / 1e3]
    for g in r.chunk_gaps_ms:
        times.append(times[-1] + g / 1e3)
    return tuple(times)


def turns_from_records(ok: Sequence[TurnRecord], order: Mapping[str, int], max_tokens: int | None,
                       speculative: bool, acceptance_hint: str) -> list[Turn]:
    """Successful records as :class:`launcher.results.Turn` (request index from ``order``)."""
    out = []
    for r in ok:
        if r.conversation_id not in order:
            raise RecordError(f"{r.label}: conversation {r.conversation_id!r} is not a question of the dataset; "
                              "was the export made from another dataset file, or did AIPerf hand this phase lines "
                              "laid out for another (runtime.datasets.aiperf_phase_lines)?")
        out.append(Turn(order[r.conversation_id], r.turn_index,
                        tuple(turn_chunks(r, max_tokens, speculative, acceptance_hint)),
                        _turn_times(r)))
    return out


def acceptance_rate(records: Sequence, dataset: str, question_ids: Sequence, categories: Sequence[str],
                    *, max_tokens: int | None, acceptance_hint: str, speculative: bool = True,
                    prometheus_window: Mapping | None = None,
                    acceptance_source: str = "per_request_stats") -> dict:
    """``acceptance_rate.json``'s object: specdec_bench's keys for ``dataset``
    (requests in the order of ``question_ids``), our figures in the extension.
    ``acceptance_hint``: the serving engine's (``Engine.acceptance_hint()``), named when a
    speculative record lacks its acceptance.

    ``prometheus_window`` is what the server's /metrics counted over the point
    (``num_drafts``, ``num_accepted_tokens``). Prometheus_AL comes from it only when
    the window counted exactly the point's verify steps (its requests' own stats):
    a window that also holds other traffic (another client, a neighbouring phase's
    steps at a boundary scrape) gives None, and its counts stay in
    ``prometheus_window`` to show by how much it was off."""
    ok, failed = profiling_records(records)
    order = {str(q): i for i, q in enumerate(question_ids)}
    turns = turns_from_records(ok, order, max_tokens, speculative, acceptance_hint)
    if not turns:
        raise RecordError("no successful profiling request: nothing to compute acceptance from")
    steps = sum(r.spec.steps for r in ok if r.spec is not None)
    accepted = sum(r.spec.accepted for r in ok if r.spec is not None)
    drafted = sum(r.spec.drafted for r in ok if r.spec is not None)
    window = None
    prometheus_al = None
    by_request = False
    if prometheus_window is not None and speculative:
        drafts_w, acc_w = prometheus_window["num_drafts"], prometheus_window["num_accepted_tokens"]
        finished_w = prometheus_window.get("finished_requests")
        steps_match = bool(steps) and drafts_w == steps
        if finished_w is not None:
            # counters that move when a request finishes (SGLang): the window is the point's own
            # when it finished exactly the point's requests, whatever the stream's chunks say
            by_request = True
            own = bool(drafts_w) and not failed and finished_w == len(ok)
        else:
            own = steps_match
        window = {"num_drafts": drafts_w, "num_accepted_tokens": acc_w, "is_the_points_own": own,
                  "steps_match": steps_match}
        if finished_w is not None:
            window["finished_requests"] = finished_w
        prometheus_al = 1.0 + acc_w / drafts_w if own else None
        if own and prometheus_window.get("accepted_per_position"):
            window["per_position"] = per_position.per_position(
                drafts_w, prometheus_window["accepted_per_position"], "prometheus")
    stream_al = ((1.0 + accepted / steps) if steps else 1.0) if speculative else None
    # Counted from the stream, a step is a chunk, and a server may send several steps as one
    # chunk (SGLang holds text that ends inside a UTF-8 character): where the server's counters
    # finished exactly the point's requests, they are the server's AL (docs/sglang.md).
    from_counters = by_request and acceptance_source == "stream_chunks" and prometheus_al is not None
    ext = {
        "Server_AL": prometheus_al if from_counters else stream_al,
        "Prometheus_AL": prometheus_al,
        "prometheus_window": window,
        "speculative": speculative,
        "num_requests": len({t.request_index for t in turns}), "num_turns": len(turns),
        "failed_requests": len(failed),
        "num_spec_steps": steps, "num_accepted_draft_tokens": accepted, "num_draft_tokens": drafted,
        "per_step_order": all(r.spec is None or r.spec.per_step_accepted is not None for r in ok),
        "acceptance_source": acceptance_source if speculative else None,
        # vLLM's per-position acceptance (accepted at position i / drafts), pooled over the requests
        "per_position": per_position.from_stats([r.spec for r in ok], None) if speculative else None,
        "Server_AL_request_mean": request_mean_al(ok) if speculative else None,
    }
    k = max((r.spec.num_spec_tokens or 0 for r in ok if r.spec is not None), default=0)
    if speculative and acceptance_source == "stream_chunks":
        ext["chunks_over_k_plus_1"] = sum(1 for r in ok if r.spec is not None
                                          for a in (r.spec.per_step_accepted or ()) if a > k)
        ext["stream_AL"] = stream_al
        ext["Server_AL_source"] = "counters" if from_counters else "stream_chunks"
    kind = dataset_kind(dataset)
    doc = acceptance_doc(kind, turns, question_ids=list(question_ids), categories=list(categories))
    if speculative and steps:
        ext["al_gap"] = al_gap(ok, turns, doc["Average_AL"])
    if speculative:
        ext[plausibility.IMPOSSIBLE_FIELD] = plausibility.from_extension(ext, doc["Average_AL"], k or None)
    doc[EXTENSION_KEY] = ext
    return doc


def request_mean_al(ok: Sequence[TurnRecord]) -> float | None:
    """The mean over requests (conversations) of each one's 1 + accepted / steps (requests
    that ran a verify step): how vLLM's DFlash reference averages, one prompt at a time."""
    per: dict[str, list[int]] = {}
    for r in ok:
        if r.spec is not None:
            a = per.setdefault(r.conversation_id, [0, 0])
            a[0] += r.spec.steps
            a[1] += r.spec.accepted
    vals = [1.0 + acc / steps for steps, acc in per.values() if steps]
    return sum(vals) / len(vals) if vals else None


def al_gap(ok: Sequence[TurnRecord], turns: Sequence[Turn], average_al: float) -> dict:
    """Server_AL - Average_AL = prefill_effect + truncation_effect + averaging_effect:
    * prefill_effect = Server_AL - (T+S+A)/(T+S): the prefill chunks (T turns);
    * truncation_effect = (T+S+A)/(T+S) - pooled chunk AL: drafts accepted past
      EOS/max_tokens and the EOS token, which specdec_bench's chunks leave out;
    * averaging_effect = pooled chunk AL - Average_AL: per-request means."""
    T = len(ok)
    S = sum(r.spec.steps for r in ok if r.spec is not None)
    A = sum(r.spec.accepted for r in ok if r.spec is not None)
    server = 1 + A / S
    untruncated = (T + S + A) / (T + S)
    chunks = [c for t in turns for c in t.chunks]
    pooled = sum(chunks) / len(chunks)
    return {"Server_AL": server, "Average_AL": average_al, "prefill_effect": server - untruncated,
            "truncation_effect": untruncated - pooled, "averaging_effect": pooled - average_al,
            "tokens_counted_by_server": T + S + A, "tokens_in_chunks": sum(chunks)}


# ----------------------------------------------------------------- timing

def timing(records: Sequence, num_gpus: int = 1, *, acceptance_hint: str, question_ids: Sequence | None = None,
           max_tokens: int | None = None, speculative: bool = True) -> dict:
    """``timing.json``'s object (specdec_bench's Timing, seconds) from AIPerf
    records: times are the request start, then the arrival of each streamed
    chunk; tokens per turn are the emitted tokens without a final EOS.
    ``acceptance_hint``: as for :func:`acceptance_rate`."""
    if isinstance(num_gpus, bool) or not isinstance(num_gpus, int) or num_gpus < 1:
        raise ValueError(f"num_gpus must be a positive integer, got {num_gpus!r}")
    ok, failed = profiling_records(records)
    ids = question_ids if question_ids is not None else list(dict.fromkeys(r.conversation_id for r in ok))
    order = {str(q): i for i, q in enumerate(ids)}
    for r in ok:
        if r.start_ns is None or r.ttft_ms is None:
            raise RecordError(f"{r.label}: metadata.request_start_ns or time_to_first_token missing")
    turns = turns_from_records(ok, order, max_tokens, speculative, acceptance_hint)
    if not turns:
        raise RecordError("no successful profiling request: nothing to time")
    ext = {"num_gpus": num_gpus, "num_requests": len({t.request_index for t in turns}),
           "num_turns": len(turns), "failed_requests": len(failed),
           "total_output_tokens": sum(t.tokens for t in turns)}
    doc = timing_doc(turns, num_gpus, extension=ext)
    start = min(t.times[0] for t in turns)
    end = max(t.times[-1] for t in turns)
    doc[EXTENSION_KEY]["duration_s"] = end - start
    return doc


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


def counter_deltas(before: Mapping[str, float], after: Mapping[str, float],
                   names: MetricNames) -> Optional[tuple[float, float]]:
    """(delta drafts, delta accepted tokens) between two parsed scrapes, with the engine's
    counter names; None when the counters are absent (no speculative config)."""
    drafts = names.drafts + "_total"
    acc_after = names.accepted_from(lambda n: after.get(n + "_total"))
    if acc_after is None or drafts not in after:
        return None
    acc_before = names.accepted_from(lambda n: before.get(n + "_total", 0.0)) or 0.0
    return after[drafts] - before.get(drafts, 0.0), acc_after - acc_before


def prometheus_al(before: Mapping[str, float], after: Mapping[str, float],
                  names: MetricNames) -> float | None:
    """1 + delta(accepted tokens) / delta(drafts) between two parsed scrapes.

    None when the counters are absent (no speculative config) or no draft
    ran in the window; a counter that went down (server restart) is an error.
    """
    deltas = counter_deltas(before, after, names)
    if deltas is None:
        return None
    d_drafts, d_acc = deltas
    if d_acc < 0 or d_drafts < 0:
        raise ValueError("the server's spec-decode counters went down between the scrapes "
                         "(server restarted?); Prometheus_AL cannot be computed")
    if d_drafts == 0:
        return None
    return 1.0 + d_acc / d_drafts
