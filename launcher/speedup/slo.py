"""At your SLO (docs/slo.md): each server configuration's goodput against load, its max
load under the SLO, and the recommended configuration per load range. Pure functions
over plain rows; :func:`collect` reads a results folder into them.

A row: {dataset, temperature, concurrency, config, k (0: no speculation; None: a
dynamic schedule), goodput_rps, good_output_tps, meets_slo, verdict, goodput_repeats
(per-repeat goodput_rps), suspect (the point's engine warning: the known-answer probe
failed at its temperature)}. Every recommendation drawn from a suspect temperature
carries ``suspect`` ("SUSPECT: <the warning>"), printed on its line.

Recommendation at a concurrency every configuration measured (the sweep's points):
among the configurations whose verdict there is "met" (a schedule's point only where
the engine applied it), whose max load under the SLO reaches it, the highest goodput
(good requests/s); a configuration within the noise of the best (the larger of the
two's MAD of goodput over the repeats, and ``tie_rel`` of the best) is as good, and the
simplest of those wins: no speculation, then the smaller k, a dynamic schedule last.
Concurrency C_i covers C_i .. C_{i+1} − 1, but no further than the chosen one's max
load under the SLO (the search's probes place it): past it, the next best whose max
load reaches on, else none. Neighbouring ranges with the same answer merge.
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Iterable, Optional

from launcher.results.goodput import Slo, point_goodput, repeats_verdict
from launcher.results.identity import run_identity, tag
from launcher.results.schedule_check import k_for_batch
from launcher.results.slo_search import max_load

TIE_REL = 0.05  # goodput within 5 % of the best is a tie (with one repeat the noise is unknown)


def simplicity(row: dict) -> tuple:
    """Sort key: no speculation first, then the smaller k, a schedule last."""
    k = row.get("k")
    return (2, 0) if k is None else ((0, 0) if k == 0 else (1, int(k)))


def label(row: dict) -> str:
    """"baseline", "k=3", "schedule", with what its server configuration changes where a folder
    holds several ("k=3 [+ --async-scheduling]")."""
    k = row.get("k")
    return ("baseline" if k == 0 else ("schedule" if k is None else f"k={k}")) + tag(row.get("configuration_label"))


def spread(row: dict) -> float:
    reps = [x for x in (row.get("goodput_repeats") or []) if x is not None]
    if len(reps) < 2:
        return 0.0
    med = statistics.median(reps)
    return statistics.median(abs(x - med) for x in reps)


def _range(start: int, end: Optional[int], config: Optional[str], lab: Optional[str], judged_at: int) -> dict:
    """A load range [start, end] (end None: and above) and its recommended configuration,
    chosen on the goodputs measured at concurrency ``judged_at``."""
    return {"from": start, "to": end, "config": config, "label": lab or "none meets the SLO",
            "judged_at": [judged_at]}


def predicted(row: dict, rows: list[dict]) -> dict:
    """For a schedule's point: what the fixed k the schedule gives batch size C measured at
    concurrency C (its goodput and Output TPS), the schedule's prediction."""
    if not row.get("schedule"):
        return {}
    k = k_for_batch(row["schedule"], int(row["concurrency"]))
    fixed = next((r for r in rows if r.get("k") == k and r["concurrency"] == row["concurrency"]
                  and not r.get("schedule")), None)
    return {"predicted": {"k": k, "goodput_rps": None if fixed is None else fixed["goodput_rps"],
                          "output_tps": None if fixed is None else fixed.get("output_tps")}}


def recommend_at(rows: list[dict], tie_rel: float = TIE_REL) -> Optional[dict]:
    """The recommended row among ``rows`` (one concurrency), or None when none meets the SLO."""
    ok = [r for r in rows if r.get("verdict") == "met" and r.get("goodput_rps") is not None
          and (r.get("schedule_check") or {}).get("applied") is not False]  # not a measurement of the schedule
    if not ok:
        return None
    best = max(ok, key=lambda r: r["goodput_rps"])
    ties = [r for r in ok if best["goodput_rps"] - r["goodput_rps"]
            <= max(spread(best), spread(r), tie_rel * best["goodput_rps"])]
    return min(ties, key=simplicity)


def recommend(rows: Iterable[dict], tie_rel: float = TIE_REL) -> list[dict]:
    """Per (dataset, temperature): curves per configuration, max load, recommendation ranges."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["dataset"], float(r["temperature"])), []).append(r)
    out = []
    for (ds, t), rs in sorted(groups.items()):
        configs: dict[str, list[dict]] = {}
        for r in sorted(rs, key=lambda r: (simplicity(r), r["concurrency"])):
            configs.setdefault(r["config"], []).append(r)
        per_config = []
        for name, crs in configs.items():
            ml = max_load({r["concurrency"]: r.get("verdict") for r in crs})
            per_config.append({"config": name, "label": label(crs[0]), "k": crs[0].get("k"),
                               "points": [{k: r.get(k) for k in ("concurrency", "goodput_rps", "good_output_tps",
                                                                 "good_fraction", "verdict", "goodput_repeats",
                                                                 "search_probe", "schedule_check", "output_tps")}
                                          | predicted(r, rs) for r in sorted(crs, key=lambda r: r["concurrency"])],
                               "schedule_not_applied_at": [r["concurrency"] for r in crs if (r.get("schedule_check")
                                                                                             or {}).get("applied") is False],
                               "max_concurrency": ml["max_concurrency"], "first_not_met": ml["first_not_met"],
                               "max_load_status": ml["status"], "max_load_note": ml.get("note")})
        maxc = {c["config"]: c for c in per_config}
        # the recommendation at the concurrencies every configuration measured (the sweep's);
        # the search's probes place each one's max load, which bounds the ranges
        sets = [{r["concurrency"] for r in crs} for crs in configs.values()]
        concs = sorted(set.intersection(*sets)) or sorted(set.union(*sets))
        picks, ranges = [], []
        for i, c in enumerate(concs):
            end = concs[i + 1] - 1 if i + 1 < len(concs) else None
            at = [r for r in rs if r["concurrency"] == c]
            start, excluded, first = c, set(), len(ranges)
            while True:
                # a configuration whose max load under the SLO is below the range's start is no candidate
                excluded |= {n for n, m in maxc.items() if m["max_concurrency"] is not None
                             and m["max_concurrency"] < start}
                excluded |= {n for n, m in maxc.items() if m["max_concurrency"] is None}  # no load under the SLO
                rec = recommend_at([r for r in at if r["config"] not in excluded], tie_rel)
                if rec is None:
                    ranges.append(_range(start, end, None, None, c))
                    break
                m = maxc[rec["config"]]
                cap = m["max_concurrency"] if m["max_load_status"] != "unbounded" else None
                if cap is not None and (end is None or cap < end):
                    ranges.append(_range(start, cap, rec["config"], label(rec), c))
                    start, excluded = cap + 1, excluded | {rec["config"]}
                    if end is not None and start > end:
                        break
                    continue
                ranges.append(_range(start, end, rec["config"], label(rec), c))
                if end is None and m["max_load_status"] == "unbounded":
                    ranges[-1]["note"] = f"met up to {m['max_concurrency']}, the highest measured"
                break
            chosen = ranges[first]["config"]
            g = next((r["goodput_rps"] for r in at if r["config"] == chosen), None)
            picks.append((c, chosen, ranges[first]["label"] if chosen else None, g, len(at)))
        merged: list[dict] = []
        for r in ranges:
            if merged and merged[-1]["config"] == r["config"] and merged[-1]["to"] is not None \
                    and merged[-1]["to"] + 1 == r["from"]:
                merged[-1]["to"] = r["to"]
                if r.get("note"):
                    merged[-1]["note"] = r["note"]
                merged[-1]["judged_at"] += [x for x in r["judged_at"] if x not in merged[-1]["judged_at"]]
            else:
                merged.append(r)
        ranges = merged
        # an answer drawn from a suspect temperature (the known-answer probe failed there) says so on its line
        suspect = next((r["suspect"] for r in rs if r.get("suspect")), None)
        if suspect:
            for r in ranges:
                r["suspect"] = f"SUSPECT: {suspect}"
        out.append({"dataset": ds, "temperature": t, "suspect": suspect, "configs": per_config, "recommendation": ranges,
                    "per_concurrency": [{"concurrency": c, "config": cfg, "label": lab or "none meets the SLO",
                                         "goodput_rps": g, "configs_measured": n,
                                         **({"suspect": f"SUSPECT: {suspect}"} if suspect else {})}
                                        for c, cfg, lab, g, n in picks]})
    return out


# --------------------------------------------------------------------------- reading

def point_row(job, point, slo: Slo, k: Optional[int], configuration_label: str = "") -> Optional[dict]:
    """A point's row under ``slo``, recomputed from its AIPerf records (the held repeat's
    folder and every other repeat's); ``configuration_label``: what its server changes from the
    folder's others (launcher.results.identity)."""
    g = point_goodput(point.path / "aiperf", slo)
    if g is None:
        return None
    reps_dir = point.path / "aiperf_repeats"
    others = sorted(reps_dir.iterdir()) if reps_dir.is_dir() else []
    rep_goods = [g] + [x for x in (point_goodput(d, slo) for d in others) if x is not None]
    verdict = repeats_verdict([x["meets_slo"] for x in rep_goods])
    ext = ((point.timing or {}).get("specdec_launcher") or {}).get("goodput") or {}
    return {"dataset": point.dataset, "temperature": point.temperature, "concurrency": point.concurrency,
            "config": job.name, "configuration_label": configuration_label, "k": k, "goodput_rps": g["goodput_rps"], "good_output_tps": g["good_output_tps"],
            "good_fraction": g["good_fraction"], "meets_slo": g["meets_slo"], "verdict": verdict,
            "goodput_repeats": [x["goodput_rps"] for x in rep_goods] if len(rep_goods) > 1 else None,
            "output_tps": point.output_tps,
            "schedule": run_identity(job).schedule,
            "search_probe": bool(ext.get("search_probe") or point.row.search_probe),
            "schedule_check": point.row.schedule_check or ext.get("schedule_check"),
            "agrees_with_aiperf": g["agrees_with_aiperf"],
            "suspect": point.row.engine_warning or None}


def collect(jobs: list, slo: Slo, k_of, label_of=lambda job: "") -> list[dict]:
    """Every complete point's row; ``k_of(job)``: 0 without speculation, k, None for a schedule;
    ``label_of(job)``: what its server configuration changes from the folder's others."""
    rows = []
    for job in jobs:
        k, lab = k_of(job), label_of(job)
        for p in job.points:
            if p.status not in ("complete", "skipped") or not (Path(p.path) / "aiperf").is_dir():
                continue
            r = point_row(job, p, slo, k, lab)
            if r is not None:
                rows.append(r)
    return rows


def parse_slo_arg(text: str) -> dict:
    """`--slo ttft_ms=300,tpot_ms=40,percentile=90,good_share=0.9` -> the recipe's keys."""
    out: dict = {}
    for part in text.replace(" ", ",").split(","):
        if not part:
            continue
        key, sep, val = part.partition("=")
        if not sep:
            raise ValueError(f"--slo: '{part}' is not KEY=VALUE (e.g. ttft_ms=300)")
        key = key.strip()
        if key not in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "percentile", "good_share"):
            raise ValueError(f"--slo: unknown key '{key}' (use ttft_ms, itl_ms or tpot_ms, e2e_ms, percentile, "
                             "good_share)")
        try:
            out[key] = float(val)
        except ValueError:
            raise ValueError(f"--slo: {key}={val} is not a number") from None
    if not any(k in out for k in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")):
        raise ValueError("--slo: no limit given (set at least one of ttft_ms, itl_ms or tpot_ms, e2e_ms)")
    if "itl_ms" in out and "tpot_ms" in out:
        raise ValueError("--slo: give itl_ms or tpot_ms, not both (both are AIPerf's inter_token_latency)")
    return out
