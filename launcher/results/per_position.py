"""Per-position acceptance, vLLM's definition: the share of verify steps
(drafts) whose draft token at position i was accepted,

    rate[i] = accepted at position i / number of drafts,   i = 1..k

so rate[1] >= rate[2] >= ... and 1 + sum(rates) is the server's AL
(1 + accepted / drafts). Position i is accepted in a step iff the step
accepted at least i drafts. specdec_bench's Conditional/Joint rates are over
chunk lengths instead (the prefill chunk included); these sit beside them,
in our extension.

Standard library only, pure. Sources:
  * the per-request stats: ``per_step_accepted`` (``detailed``) or the
    acceptance histogram (``summary``), which give the same counts;
  * vLLM's Prometheus counters ``vllm:spec_decode_num_drafts`` and
    ``vllm:spec_decode_num_accepted_tokens_per_pos{position="i"}`` (0-based
    labels) over a window.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Optional, Sequence


STEP_SOURCE = "per_step_accepted"  # the source of rates counted from each step's accepted drafts (capped at k)


def counts_from_steps(per_step_accepted: Iterable[int], k: int) -> tuple[int, list[int]]:
    """(drafts, accepted count per position 1..k) from each step's accepted drafts."""
    counts = [0] * k
    drafts = 0
    for a in per_step_accepted:
        drafts += 1
        for i in range(min(int(a), k)):
            counts[i] += 1
    return drafts, counts


def counts_from_histogram(histogram: Mapping[int, int], k: int) -> tuple[int, list[int]]:
    """The same from ``{accepted drafts j: steps}``: position i counts the steps with j >= i."""
    drafts = sum(int(n) for n in histogram.values())
    counts = [sum(int(n) for j, n in histogram.items() if int(j) >= i) for i in range(1, k + 1)]
    return drafts, counts


def per_position(drafts: float, counts: Sequence[float], source: str) -> Optional[dict]:
    """The extension object, or None without drafts (no rate is defined)."""
    if not drafts:
        return None
    rates = [c / drafts for c in counts]
    return {"source": source, "num_drafts": drafts, "accepted_per_position": list(counts),
            "rates": rates, "AL": 1.0 + sum(rates)}


def from_stats(stats: Iterable, k: Optional[int]) -> Optional[dict]:
    """Pooled over per-request stats (objects with ``per_step_accepted`` and
    ``histogram``, e.g. launcher.bench.metrics.SpecStats). ``k`` defaults to
    the largest ``num_spec_tokens`` seen."""
    stats = [s for s in stats if s is not None]
    if k is None:
        k = max((s.num_spec_tokens or 0 for s in stats), default=0) or \
            max((j for s in stats for j in s.histogram), default=0)
    if not stats or not k:
        return None
    drafts, counts = 0, [0] * k
    detailed = all(s.per_step_accepted is not None for s in stats)
    for s in stats:
        d, c = (counts_from_steps(s.per_step_accepted, k) if detailed
                else counts_from_histogram(s.histogram, k))
        drafts += d
        counts = [x + y for x, y in zip(counts, c)]
    return per_position(drafts, counts, STEP_SOURCE if detailed else "acceptance_histogram")


def counts_from_series(series: Iterable[Mapping], value_key=lambda s: s["stats"]["total"]) -> list[float]:
    """Accepted count per position (1..k) from the labelled series of the per-position
    counter (``labels.position`` 0-based; several engines are summed)."""
    by_pos: dict[int, float] = {}
    for s in series:
        pos = int((s.get("labels") or {})["position"])
        by_pos[pos] = by_pos.get(pos, 0.0) + float(value_key(s))
    return [by_pos.get(i, 0.0) for i in range(max(by_pos) + 1)] if by_pos else []
