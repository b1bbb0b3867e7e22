"""Chunks: the unit specdec_bench counts acceptance in.

Per turn specdec_bench records the length of every streamed engine step:
the prefill token (1), then 1 + accepted drafts per decode step (a step
without drafts is a 1-token chunk). A final EOS token is removed from the
last chunk; a chunk that held only EOS disappears. So the chunks sum to the
emitted tokens without EOS, and drafts the server accepted past EOS or
``max_tokens`` are not counted.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence


@dataclass(frozen=True)
class Turn:
    """One turn of one request: its chunk lengths and timestamps (seconds).

    ``request_index`` is the request's position in the dataset's run order;
    ``times`` is [request start, then one time a chunk] (may be shorter when a
    chunk's time is unknown); empty when the turn has no timing.
    """

    request_index: int
    turn_index: int
    chunks: tuple[int, ...]
    times: tuple[float, ...] = field(default_factory=tuple)

    @property
    def tokens(self) -> int:
        return sum(self.chunks)


def chunks_from_server(completion_tokens: int, ends_with_eos: bool,
                       per_step_accepted: Optional[Sequence[int]] = None,
                       histogram: Optional[dict] = None) -> list[int]:
    """A turn's chunk lengths from the server's per-request stats.

    ``completion_tokens`` counts the emitted tokens, EOS included (the usage
    figure). With ``per_step_accepted`` (vLLM ``--per-request-spec-decode-metrics
    detailed``, in step order) the chunks are exact: the prefill chunk, then
    1 + accepted per step, cut where the emitted tokens end, EOS removed.
    With only the ``histogram`` ({accepted j: steps}) the step order is
    unknown; the overshoot (tokens accepted past the end) is taken from the
    largest chunks, which is exact whenever no draft was accepted past the end
    or the last step was one of the largest.
    """
    if completion_tokens < 0:
        raise ValueError(f"completion_tokens must be >= 0, got {completion_tokens}")
    emitted = completion_tokens - (1 if ends_with_eos and completion_tokens > 0 else 0)
    if completion_tokens == 0:
        return []
    if per_step_accepted is not None:
        steps = [1] + [1 + int(a) for a in per_step_accepted]
    else:
        steps = [1] + sorted((1 + int(j) for j, n in (histogram or {}).items() for _ in range(int(n))))
    # The server emitted ``completion_tokens`` tokens; a step may have been cut
    # by EOS/max_tokens, and steps after the end never reached the output.
    out: list[int] = []
    left = completion_tokens
    for s in steps:
        if left <= 0:
            break
        take = min(s, left)
        out.append(take)
        left -= take
    while left > 0:  # the stats cover fewer tokens than were emitted: one token a step
        out.append(1)
        left -= 1
    if ends_with_eos:
        out[-1] -= 1
        if out[-1] == 0:
            out.pop()
    assert sum(out) == emitted
    return out


def strip_engine_trace(cumulative: Sequence[int], times: Sequence[float], tokens: Sequence[int],
                       end_id: int) -> tuple[list[int], list[float]]:
    """Chunks and times from an in-process engine trace, as specdec_bench's
    vLLM wrapper cuts them: ``cumulative`` is the output's token count after
    each engine step, ``times`` the start time then one time a step,
    ``tokens`` the final token ids. A step that emitted nothing is dropped; a
    final EOS is removed from the last chunk, and a last chunk that held only
    EOS is dropped. specdec_bench then drops the time at the *same index* as
    the step (its time list starts with the request start, so this is the
    time one before the step's own): reproduced here so timing files match.
    """
    chunks: list[int] = []
    strip: set[int] = set()
    start = 0
    for i, c in enumerate(cumulative):
        if c == start:
            strip.add(i)
            continue
        if i == len(cumulative) - 1 and tokens and tokens[-1] == end_id:
            if c - start == 1:
                strip.add(i)
            else:
                chunks.append(c - 1 - start)
            break
        chunks.append(c - start)
        start = c
    return chunks, [t for i, t in enumerate(times) if i not in strip]
