"""Which point of run A is compared with which point of run B: by what they measured.

A point's workload key is (dataset, temperature, concurrency, k), k the number of
speculative tokens (0 without speculation), read from the point's own
configuration.json (ours, or specdec_bench's ``draft_length``), else its job. Folder
paths do not enter: specdec_bench writes one point at its output folder's root, this
project under ``<dataset>/t<T>_c<C>/``, and the two compare when they measured the
same workload. A key held by several points on a side (several jobs with the same k)
is paired by job name (server_id). Points left over are paired on (dataset,
temperature, concurrency) alone when that is unambiguous on both sides (comparing
k=3 with k=1 on purpose); the pair then carries a note.
"""
from __future__ import annotations

from typing import Optional

from launcher.engines import num_speculative_tokens
from launcher.results.job_dir import Job, Point


def point_k(job: Job, p: Point) -> Optional[int]:
    cfg = p.configuration or {}
    sc = ((cfg.get("specdec_launcher") or {}).get("speculative_config")
          or (cfg.get("serving_config") or {}).get("speculative_config"))
    if isinstance(sc, dict) and sc:
        if sc.get("method") in (None, "none"):
            return 0
        k = sc.get("num_speculative_tokens")
        if isinstance(k, int):
            return k
    alg = cfg.get("speculative_algorithm")
    if isinstance(alg, str) and alg.upper() == "NONE":
        return 0
    if isinstance(cfg.get("draft_length"), int) and alg:
        return cfg["draft_length"]
    spec = job.spec
    if (spec and spec.method == "none") or job.summary.get("method") == "none":
        return 0
    k = num_speculative_tokens(spec.speculative_config if spec else None) or job.summary.get("num_speculative_tokens")
    return int(k) if isinstance(k, int) else None


def workload_key(job: Job, p: Point) -> tuple:
    return (p.dataset, round(float(p.temperature), 6), int(p.concurrency), point_k(job, p))


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
            cands = [x for x in cands if side_b[x][0].name == ja.name]
        if len(cands) == 1:
            used_b.add(cands[0])
            jb, pb = side_b[cands[0]]
            pairs.append((ja, pa, jb, pb, None))
        else:
            left_a.append((ja, pa))
    # leftovers: pair on (dataset, T, C) when that is unambiguous on both sides
    loose = lambda j, p: workload_key(j, p)[:3]  # noqa: E731
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
