"""Acceptance from the stream itself, for engines without per-request stats.

specdec_bench counts acceptance in streamed chunks: per turn, the prefill
chunk (1 token), then one chunk per decode step of 1 + accepted drafts. The
benchmark asks the server for usage on every chunk (vLLM's
``stream_options.continuous_usage_stats``), so a chunk's tokens are the
difference of two cumulative ``completion_tokens``; no re-tokenisation.

The HTTP server may merge several steps into one chunk when the client lags;
a merged chunk can look like an ordinary one (two 1-token steps make a 2), so
the per-run Prometheus counters are the check: the decode chunks of a run
must equal the server's verify steps (``num_drafts``), or the run's points are
marked as not exact. Pure functions, plus one streaming client for probes.
"""
from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Iterable, Optional

from launcher.runtime.datasets import question_of_session
from launcher.runtime.files import jsonl_lines


def chunks_from_usage(cumulative: Iterable[Optional[int]]) -> list[int]:
    """Chunk sizes from the cumulative completion tokens of each streamed event
    (events without usage, and events that add no token, are skipped)."""
    out, last = [], 0
    for c in cumulative:
        if c is None:
            continue
        c = int(c)
        if c < last:
            raise ValueError(f"completion_tokens went down ({last} -> {c}): not a cumulative usage stream")
        if c > last:
            out.append(c - last)
            last = c
    return out


def stats_from_chunks(chunks: list[int], k: int) -> dict:
    """One turn's acceptance in the shape of vLLM's per-request stats, from its
    chunks (the first is the prefill token): each later chunk is one verify step
    that accepted (size - 1) drafts. A chunk above k + 1 can only be merged steps:
    it is counted as one step and reported in ``chunks_over_k_plus_1``."""
    decode = chunks[1:]
    per_step = [c - 1 for c in decode]
    top = max([k, *per_step]) if per_step else k
    hist = [0] * (top + 1)
    for a in per_step:
        hist[a] += 1
    steps = len(per_step)
    accepted = sum(per_step)
    return {"num_spec_steps": steps, "num_accepted_draft_tokens": accepted, "num_draft_tokens": steps * k,
            "num_spec_tokens": k, "acceptance_histogram": hist, "per_step_accepted": per_step,
            "mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
            "chunks_over_k_plus_1": sum(1 for a in per_step if a > k)}


def _event_usage(value: str) -> tuple[Optional[int], bool, Optional[str]]:
    """(cumulative completion tokens, has choices, finish reason) of one SSE data value."""
    if not value or value.strip() == "[DONE]":
        return None, False, None
    try:
        obj = json.loads(value)
    except json.JSONDecodeError:
        return None, False, None
    usage = obj.get("usage") or {}
    choices = obj.get("choices") or []
    finish = next((c.get("finish_reason") for c in choices if c.get("finish_reason")), None)
    return usage.get("completion_tokens"), bool(choices), finish


def record_chunks(record: dict) -> tuple[list[int], Optional[str], bool]:
    """(chunks, finish reason, usage seen on a content event) of one AIPerf raw record."""
    cumulative, finish, usage_on_content = [], None, False
    for resp in record.get("responses") or []:
        for packet in resp.get("packets") or []:
            if packet.get("name") != "data":
                continue
            tokens, has_choices, fin = _event_usage(packet.get("value") or "")
            if has_choices and tokens is not None:
                usage_on_content = True
            finish = fin or finish
            cumulative.append(tokens)
    return chunks_from_usage(cumulative), finish, usage_on_content


def read_raw_chunks(path: Path | str) -> dict[tuple[str, int], list[int]]:
    """(conversation_id, turn_index) -> chunks, from AIPerf's ``profile_export_raw.jsonl``
    (profiling records without an error; the first record of a key wins). Raises
    ValueError when the stream carried no usage on its content events (the server
    ignored ``continuous_usage_stats``)."""
    path = Path(path)
    out: dict[tuple[str, int], list[int]] = {}
    with path.open(encoding="utf-8") as f:
        for lineno, line in jsonl_lines(f):
            try:
                rec = json.loads(line)
                meta = rec["metadata"]
                key = (question_of_session(meta["conversation_id"]), int(meta["turn_index"]))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                raise ValueError(f"{path}:{lineno}: not an AIPerf raw record") from None
            if meta.get("benchmark_phase") != "profiling" or rec.get("error") or key in out:
                continue
            chunks, _, usage_seen = record_chunks(rec)
            if chunks and not usage_seen:
                raise ValueError(f"{path}:{lineno}: the stream has no usage on its chunks; the server ignored "
                                 "stream_options.continuous_usage_stats (fix: bench.acceptance_source="
                                 "per_request_stats on an engine with per-request stats)")
            out[key] = chunks
    return out


def stream_chat_chunks(base_url: str, model: str, prompt: str, max_tokens: int, extra: Optional[dict] = None,
                       headers: Optional[dict] = None, timeout: float = 120.0) -> tuple[list[int], Optional[str]]:
    """One streamed chat request with usage on every chunk: (chunks, finish reason)."""
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            **(extra or {})}
    req = urllib.request.Request(f"{base_url}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", **(headers or {})})
    cumulative, finish, usage_seen = [], None, False
    with urllib.request.urlopen(req, timeout=timeout) as r:
        for raw in r:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            tokens, has_choices, fin = _event_usage(line[5:].strip())
            usage_seen |= has_choices and tokens is not None
            finish = fin or finish
            cumulative.append(tokens)
    if not usage_seen:
        raise ValueError("the server's stream carries no usage on its chunks (stream_options."
                         "continuous_usage_stats ignored): acceptance cannot be counted from the stream")
    return chunks_from_usage(cumulative), finish
