"""The golden check at the end of a sweep (``--golden ID``): each complete point on
the reference's dataset and temperature, judged by :func:`launcher.golden.verdict.check` with
the drafts it counted (the sample size of its figures) and where it ran."""
from __future__ import annotations

from pathlib import Path

from launcher.contracts.job import BenchSpec
from launcher.golden.table import known_ids, lookup
from launcher.golden.verdict import check, overall
from launcher.results import read_point
from launcher.results.summary import PointRow, point_rows


def point_run(p: PointRow, res, bench: BenchSpec) -> dict:
    """The workload one point ran, in the table's terms."""
    pp = res.acc_ext.get("per_position") or {}
    turns = bench.max_turns
    if turns is None and res.num_requests and isinstance(res.tim_ext.get("num_turns"), int):
        turns = -(-res.tim_ext["num_turns"] // res.num_requests)
    return {"dataset": p.dataset, "temperature": p.temperature, "concurrency": p.concurrency,
            "num_prompts": res.num_requests, "turns": turns, "output_tokens": bench.output_length,
            "k": len(pp.get("accepted_per_position") or []) or None}


def golden_verdict(golden_id: str, save_dir: Path, summary: dict, bench: BenchSpec) -> dict:
    entry = lookup(golden_id)
    if entry is None:
        return {"id": golden_id, "verdict": "error", "points": [],
                "problems": [f"unknown reference; known: {', '.join(known_ids())}"]}
    judged = []
    for p in point_rows(summary):
        if p.dataset != entry["dataset"] or float(p.temperature) != float(entry["workload"]["temperature"]):
            continue
        if not p.done:
            continue
        res = read_point(Path(save_dir) / p.dir)
        ext = res.acc_ext
        al = ext.get("Server_AL_request_mean") if entry.get("al_definition") == "mean_per_request" \
            else ext.get("Server_AL")
        drafts = (ext.get("per_position") or {}).get("num_drafts")
        v = check(entry, al, res.per_position_rates, point_run(p, res, bench), num_drafts=drafts,
                         recorded_on=res.conf_ext.get("recorded_on"))
        judged.append(v | {"point": p.dir})
    return {"id": golden_id, "verdict": overall([v["verdict"] for v in judged]), "entry": entry,
            "points": judged,
            "problems": [] if judged else [f"no complete point on {entry['dataset']} at "
                                           f"T={entry['workload']['temperature']:g}"]}
