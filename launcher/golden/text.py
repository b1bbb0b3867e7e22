"""A golden verdict in words: the launcher's line per point, the job's few words, and the
pieces the report's table shows (a figure's tolerance, the tolerance rule, where a reference
was recorded). The one writer of these texts (launcher.report uses them). Pure."""
from __future__ import annotations

from typing import Mapping, Optional

from launcher.stats.acceptance_noise import Z
from launcher.golden.verdict import FAIL, NOT_COMPARABLE, PASS, PLATFORM_KEYS, TOO_SMALL


def _g(x) -> str:
    return "-" if x is None else f"{x:g}"


def tolerance_rule(rtol, z=Z) -> str:
    """How a figure's tolerance is chosen: "rtol 0.05 or 4.5 standard errors, the wider"."""
    return f"rtol {_g(rtol)} or {_g(z)} standard errors, the wider"


def figure_tolerance(f: Optional[Mapping]) -> str:
    """One judged figure's tolerance and status, for a table cell: "±0.0123 pass", or
    "too small to judge (noise ±0.0456)"."""
    if not f:
        return ""
    if f.get("status") == TOO_SMALL:
        return f"too small to judge (noise ±{f['tolerance']:.4f})"
    return f"±{f['tolerance']:.4f} {f.get('status', '')}".rstrip()


def recorded_on_text(where: Optional[Mapping]) -> str:
    """Where a reference was recorded, in PLATFORM_KEYS order: "engine vllm, version 0.32.0, ..."
    ("" when nothing was recorded)."""
    where = where or {}
    return ", ".join(f"{k} {where[k]}" for k in PLATFORM_KEYS if where.get(k) is not None)


def _tol(f: Optional[Mapping]) -> str:
    if not f:
        return ""
    if f["status"] == TOO_SMALL:
        return f" (too small to judge: noise ±{f['tolerance']:.4f})"
    return f" ±{f['tolerance']:.4f}"


def verdict_line(v: Mapping) -> str:
    """One line for the launcher's table and logs: each figure against the reference with
    its tolerance, the sample sizes, what was too small to judge, and what differs in
    where the run and the reference were recorded."""
    al = "-" if v.get("measured_al") is None else f"{v['measured_al']:.4f}"
    head = f"golden {v.get('id')} {v.get('point') or ''}".rstrip()
    line = f"{head}: {v['verdict'].upper()} AL {al} vs expected {v['expected_al']}{_tol(v.get('al'))}"
    if v.get("positions"):
        line += "; rates " + ", ".join(f"{p['measured']:.4f} vs {p['expected']:.4f}{_tol(p)}"
                                        for p in v["positions"])
    elif v.get("measured_rates"):
        line += " rates [" + ", ".join(f"{x:.4f}" for x in v["measured_rates"]) + "]"
    n, n_ref = v.get("num_drafts"), v.get("reference_num_drafts")
    if n is not None:
        line += f"; {int(n)} drafts (reference {'unknown' if n_ref is None else int(n_ref)}), " \
                f"tolerance: {tolerance_rule(v['rtol'], v.get('z', Z))}"
    else:
        line += f" (rtol {v['rtol']:g}, {v['al_check']}; sample size unknown)"
    if v.get("platform_differences"):
        line += "; recorded elsewhere: " + "; ".join(v["platform_differences"])
    if v["verdict"] == NOT_COMPARABLE:
        line += "; not comparable: " + "; ".join(v.get("workload_differences") or [])
    elif v["verdict"] == FAIL and v.get("likely_causes"):
        line += "; likely causes: " + " | ".join(c.split(":")[0] for c in v["likely_causes"])
    return line


def summary_line(golden: Optional[Mapping]) -> Optional[str]:
    """The job's golden verdict in a few words, for the launcher's line:
    'golden ID: pass (mtbench/t0_c1; too small to judge: position 3)'."""
    if not golden:
        return None
    parts = []
    for v in golden.get("points") or []:
        what = v.get("point") or ""
        if v.get("verdict") == FAIL:
            what += ": " + "; ".join(v.get("problems") or [])
        elif v.get("not_judged") and v.get("verdict") == PASS:
            what += "; too small to judge: " + ", ".join(v["not_judged"])
        elif v.get("verdict") != PASS:
            what += f": {v.get('verdict')}"
        parts.append(what)
    if not parts:
        parts = list(golden.get("problems") or [])
    return f"golden {golden.get('id')}: {golden.get('verdict')}" + (f" ({'; '.join(parts)})" if parts else "")
