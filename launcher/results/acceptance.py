"""``acceptance_rate.json``'s object, computed as specdec_bench's MTBench,
SpecBench and AcceptanceRate classes compute it (same arithmetic, in the
same order, so the floats are equal), plus our extension."""
from __future__ import annotations

import statistics
from typing import Mapping, Optional, Sequence

from launcher.results.chunks import Turn
from launcher.results.layout import EXTENSION_KEY, GENERIC, MTBENCH, MTBENCH_TOPICS, SPECBENCH


def _by_request(turns: Sequence[Turn]) -> dict[int, dict[int, list[int]]]:
    out: dict[int, dict[int, list[int]]] = {}
    for t in turns:
        out.setdefault(t.request_index, {})[t.turn_index] = list(t.chunks)
    return dict(sorted(out.items()))


def _count_lengths(chunks: Sequence[int], lengths: dict[int, int]) -> None:
    for j in chunks:
        lengths[j] = lengths.get(j, 0) + 1


def length_rates(lengths: Mapping[int, int]) -> tuple[dict, dict, dict]:
    """Histogram (present lengths, ascending), Conditional and Joint rates
    keyed by length: Conditional[k] = share of chunks >= k over the share of
    chunks >= the previous present length; Joint[k] = product up to k."""
    hist = dict(sorted(lengths.items()))
    total = sum(hist.values())
    running = total
    prev = 1
    cond: dict[int, float] = {}
    for k, v in hist.items():
        cond[k] = running / total / prev
        prev = running / total
        running -= v
    joint: dict[int, float] = {}
    acc = 1.0
    for k, c in cond.items():
        acc *= c
        joint[k] = acc
    return hist, cond, joint


def acceptance_doc(kind: str, turns: Sequence[Turn], *, question_ids: Optional[Sequence] = None,
                   categories: Optional[Sequence[str]] = None, extension: Optional[dict] = None) -> dict:
    """The object for one run. ``turns`` are the successful turns; for
    SpecBench, ``question_ids``/``categories`` give each request index's row
    values. Keys are Python ints where specdec_bench has ints (JSON writes
    them as strings, as specdec_bench's files have them)."""
    per = _by_request(turns)
    out: dict = {}
    lengths: dict[int, int] = {}
    if kind == MTBENCH:
        out["Request_AL"] = {}
        for rid, ts in per.items():
            pooled = [c for tix in sorted(ts) for c in ts[tix]]
            out["Request_AL"][rid] = sum(pooled) / len(pooled)
            for tix in sorted(ts):
                _count_lengths(ts[tix], lengths)
        groups: list[list[float]] = [[] for _ in MTBENCH_TOPICS]
        for rid, al in out["Request_AL"].items():
            groups[rid // 10].append(al)
        out["Category_AL"] = {MTBENCH_TOPICS[i]: sum(g) / len(g) for i, g in enumerate(groups) if g}
        out["Average_AL"] = sum(out["Request_AL"].values()) / len(out["Request_AL"])
    elif kind == SPECBENCH:
        if question_ids is None or categories is None:
            raise ValueError("SpecBench acceptance needs each request's question_id and category")
        out["Request_AL"] = {}
        for rid, ts in per.items():
            out["Request_AL"][question_ids[rid]] = statistics.mean([c for tix in ts for c in ts[tix]])
            for tix in ts:
                _count_lengths(ts[tix], lengths)
        groups_d: dict[str, list[float]] = {}
        for rid in per:
            groups_d.setdefault(categories[rid], []).append(out["Request_AL"][question_ids[rid]])
        out["Category_AL"] = {c: statistics.mean(v) for c, v in groups_d.items()}
        out["Average_AL"] = statistics.mean(out["Request_AL"].values())
    elif kind == GENERIC:
        out["Request_AL"] = {}
        all_al = []
        for rid, ts in per.items():
            out["Request_AL"][rid] = {}
            for tix, chunks in ts.items():
                al = sum(chunks) / len(chunks)
                out["Request_AL"][rid][tix] = al
                all_al.append(al)
                _count_lengths(chunks, lengths)
        out["Average_AL"] = sum(all_al) / len(all_al)
    else:
        raise ValueError(f"unknown dataset kind {kind!r}")
    hist, cond, joint = length_rates(lengths)
    out["Acceptance_Length_Histogram"] = hist
    out["Conditional_Acceptance_Rate"] = cond
    out["Joint_Acceptance_Rate"] = joint
    if extension is not None:
        out[EXTENSION_KEY] = extension
    return out
