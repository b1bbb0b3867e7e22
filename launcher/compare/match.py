"""Which point of run A is compared with which point of run B: by what they measured.

A point's workload key is (dataset, temperature, concurrency, k, forced acceptance), k the
number of speculative tokens (0 without speculation) and the forced level ("" when the
draft earned its acceptance), read by launcher.results.identity from the point's own
configuration.json (ours, or specdec_bench's ``draft_length``), else its job. Two forced
levels are two workloads: never paired, not even loosely. Folder
paths do not enter: specdec_bench writes one point at its output folder's root, this
project under ``<dataset>/t<T>_c<C>/``, and the two compare when they measured the
same workload. A key held by several points on a side (several jobs with the same k)
is paired by job name (server_id), else by server configuration (the run identity's
fingerprint): two configurations of one side are never paired with one point. Two servers
that differ in a setting are still paired when each side holds one (an A/B of one flag is
what compare is for), and the pair says what differs (``serving_difference``). Points left over are paired on (dataset,
temperature, concurrency, forced level) alone when that is unambiguous on both sides
(comparing k=3 with k=1 on purpose); the pair then carries a note.
"""
from __future__ import annotations

from typing import Optional

from launcher.results.identity import point_k, run_identity, workload
from launcher.results.job_dir import Job, Point

__all__ = ["label", "match_points", "point_k", "serving_difference", "workload_key"]


def workload_key(job: Job, p: Point) -> tuple:
    """(dataset, T, C, k, forced acceptance): launcher.results.identity, the one reader."""
    return workload(job, p)


def serving_difference(ja: Job, pa: Point, jb: Job, pb: Point) -> Optional[str]:
    """What B's server sets differently from A's ("+ --async-scheduling"), None when they agree."""
    diff = run_identity(jb, pb).differences(run_identity(ja, pa))
    return ", ".join(diff) or None


def label(ja: Job, jb: Job) -> str:
    return ja.name if ja.name == jb.name else f"{ja.name} vs {jb.name}"


def match_points(jobs_a: list[Job], jobs_b: list[Job]):
    """(pairs, only_a, only_b): pairs are (job A, point A, job B, point B, note or None);
    the leftovers are (job, point) of one side, in A's then B's order."""
    side_a = [(j, p) for j in jobs_a for p in j.points]
    side_b = [(j, p) for j in jobs_b for p in j.points]
    used_b: set[int] = set()
    pairs, left_a = [], []

    def index(side):
        out: dict[tuple, list[int]] = {}
        for i, (j, p) in enumerate(side):
            out.setdefault(workload_key(j, p), []).append(i)
        return out

    by_key_b = index(side_b)
    by_key_a = index(side_a)
    for i, (ja, pa) in enumerate(side_a):
        key = workload_key(ja, pa)
        cands = [x for x in by_key_b.get(key, []) if x not in used_b]
        if len(by_key_a[key]) > 1 or len(cands) > 1:
            named = [x for x in cands if side_b[x][0].name == ja.name]
            fp = run_identity(ja, pa).fingerprint
            cands = named if len(named) == 1 else [x for x in cands
                                                   if run_identity(*side_b[x]).fingerprint == fp]
        if len(cands) == 1:
            used_b.add(cands[0])
            jb, pb = side_b[cands[0]]
            pairs.append((ja, pa, jb, pb, None))
        else:
            left_a.append((ja, pa))
    # leftovers: pair on (dataset, T, C, forced) when that is unambiguous on both sides: k may differ,
    # the forced level may not (a forced AL is what was measured)
    loose = lambda j, p: (*workload_key(j, p)[:3], workload_key(j, p)[4])  # noqa: E731
    rest_b = [(x, side_b[x]) for x in range(len(side_b)) if x not in used_b]
    only_a = []
    for ja, pa in left_a:
        k3 = loose(ja, pa)
        a_same = [1 for j, p in left_a if loose(j, p) == k3]
        b_same = [x for x, (j, p) in rest_b if loose(j, p) == k3 and x not in used_b]
        if len(a_same) == 1 and len(b_same) == 1:
            used_b.add(b_same[0])
            jb, pb = side_b[b_same[0]]
            ka, kb = point_k(ja, pa), point_k(jb, pb)
            pairs.append((ja, pa, jb, pb, f"k differs ({ka} vs {kb}): paired on dataset, T and C"))
        else:
            only_a.append((ja, pa))
    only_b = [side_b[x] for x in range(len(side_b)) if x not in used_b]
    return pairs, only_a, only_b
