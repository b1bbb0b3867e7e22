"""The best num_speculative_tokens per load, and the schedule for vLLM.

vLLM (0.32, ``SpeculativeConfig.num_speculative_tokens_per_batch_size``)
takes a list of ``[range_start, range_end, k]`` entries: inclusive batch-size
ranges, sorted and non-overlapping, the first starting at 1; batch sizes in a
gap or past the last range keep the previous entry's k, and each k is capped
at ``num_speculative_tokens``. A closed-loop client at concurrency C keeps
about C sequences in the decode batch, so the concurrency stands in for the
batch size. Pure functions over plain rows.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable, Optional


@dataclass(frozen=True)
class KChoice:
    dataset: str
    temperature: float
    concurrency: int
    k: int
    output_tps: float
    speedup: Optional[float]        # throughput vs the baseline
    beats_baseline: Optional[bool]  # beyond the noise (None: cannot tell)
    candidates: dict                # k -> Output TPS (the mean over repeats)
    score: Optional[float] = None   # median - MAD of the chosen k's Output TPS over its repeats
    repeats: int = 1                # repeats the chosen k's figure rests on
    noisy_excluded: tuple = ()      # k left out as noisy (relative MAD above bench.gates.noisy_rel_mad)
    all_noisy: bool = False         # every k was noisy: chosen among them all, not to be trusted
    draft: Optional[str] = None     # the draft the k were measured with (each draft has its own best k)
    suspect: Optional[str] = None   # "SUSPECT: <warning>": the known-answer probe failed at this temperature
    configuration: Optional[dict] = None  # the server configuration (fingerprint, label): each has its own best k

    @property
    def fingerprint(self) -> str:
        return str((self.configuration or {}).get("fingerprint") or "")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["candidates"] = {str(k): v for k, v in self.candidates.items()}
        d["noisy_excluded"] = list(self.noisy_excluded)
        return d


def _score(r: dict) -> float:
    """median − MAD of the row's Output TPS over its repeats (one repeat: the figure itself)."""
    rep = r.get("tps_repeats") or {}
    if rep.get("median") is not None and rep.get("mad") is not None:
        return float(rep["median"]) - float(rep["mad"])
    return float(r["output_tps"])


def best_k_per_load(rows: Iterable[dict]) -> list[KChoice]:
    """rows: {dataset, temperature, concurrency, k, output_tps, speedup, beats_baseline[, draft]}
    and, with repeats, ``tps_repeats`` (launcher.results.repeats' summary: median, mad, n, noisy).
    For each (draft, server configuration, dataset, temperature, concurrency), vLLM's tune_speculative_k rule: noisy
    points are left out (unless every k is noisy), each k is scored by median − MAD of
    its Output TPS, the highest score wins and a tie goes to the smaller k. Two drafts, or two
    server configurations (``configuration``: fingerprint and label), are never candidates of one choice. A row's ``suspect`` (the known-answer probe failed at its
    temperature) marks the choice it enters."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get("k") is None or r.get("output_tps") is None:
            continue
        key = (r.get("draft") or "", str((r.get("configuration") or {}).get("fingerprint") or ""), r["dataset"],
               float(r["temperature"]), int(r["concurrency"]))
        groups.setdefault(key, []).append(r)
    out = []
    for (draft, _fp, ds, t, c), rs in sorted(groups.items()):
        calm = [r for r in rs if not (r.get("tps_repeats") or {}).get("noisy")]
        pool = calm or rs
        best = max(pool, key=lambda r: (round(_score(r), 9), -r["k"]))
        rep = best.get("tps_repeats") or {}
        out.append(KChoice(ds, t, c, int(best["k"]), float(best["output_tps"]), best.get("speedup"),
                           best.get("beats_baseline"),
                           {int(r["k"]): r["output_tps"] for r in sorted(rs, key=lambda r: r["k"])},
                           score=_score(best), repeats=int(rep.get("n") or 1),
                           noisy_excluded=tuple(sorted(int(r["k"]) for r in rs if r not in pool)),
                           all_noisy=not calm, draft=draft or None, configuration=rs[0].get("configuration"),
                           suspect=next((f"SUSPECT: {r['suspect']}" for r in rs if r.get("suspect")), None)))
    return out


def vllm_schedule(choices: list[KChoice]) -> dict:
    """The choices of one (dataset, temperature) as vLLM speculative-config keys:
    ``num_speculative_tokens`` (the largest k used) and
    ``num_speculative_tokens_per_batch_size``: concurrency C_i covers batch sizes
    C_i .. C_{i+1}-1 (the first from 1, the last up to its own C; vLLM keeps the
    last k beyond it); neighbouring ranges with the same k are merged."""
    cs = sorted(choices, key=lambda ch: ch.concurrency)
    if not cs:
        return {}
    ranges: list[list[int]] = []
    for i, ch in enumerate(cs):
        start = 1 if i == 0 else ch.concurrency
        end = cs[i + 1].concurrency - 1 if i + 1 < len(cs) else ch.concurrency
        if ranges and ranges[-1][2] == ch.k:
            ranges[-1][1] = end
        else:
            ranges.append([start, end, ch.k])
    return {"num_speculative_tokens": max(ch.k for ch in cs), "num_speculative_tokens_per_batch_size": ranges}
