"""Golden acceptance references (``references.json``) and the check of a run
against one (``bench.golden=<id>``). Standard library only, pure: the node
side loads the table from this checkout and judges each matching point.

A verdict compares the run's AL (vLLM's definition: pooled 1 + accepted /
drafts over the per-request stats, or the mean of each request's when the
reference was made that way) and per-position rates (accepted at position i /
drafts) with the entry's, within its relative tolerance. docs/golden.md.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Optional, Sequence

TABLE = Path(__file__).with_name("references.json")

# What lowers a measured acceptance below a sound reference, most likely first.
LIKELY_CAUSES = (
    "chat template: the prompt is not formatted as the reference's (a missing or different template, "
    "thinking on/off)",
    "doubled BOS: the template and the tokenizer both add <s> (about 5% of acceptance)",
    "wrong draft revision: the draft checkpoint is not the one the reference used (pin draft.extra.revision)",
    "sampler defect: the engine's rejection sampler (try the target as its own draft: bench.known_answer=true)",
    "workload mismatch: prompts, turns, output tokens, temperature or k differ from the reference's",
)


def load_table(path: Path | str = TABLE) -> dict[str, dict]:
    return json.loads(Path(path).read_text())["entries"]


def known_ids(path: Path | str = TABLE) -> list[str]:
    return sorted(load_table(path))


def lookup(golden_id: str, path: Path | str = TABLE) -> Optional[dict]:
    e = load_table(path).get(golden_id)
    return None if e is None else {"id": golden_id, **e}


def _within(measured: float, expected: float, rtol: float, rule: str) -> bool:
    if rule == "at_least":
        return measured >= expected * (1 - rtol)
    return abs(measured - expected) <= rtol * expected


# A difference in these makes the comparison meaningless (verdict "not_comparable");
# concurrency is reported but judged harmless (the batch changes numerics, not the draft).
STRICT_KEYS = ("dataset", "num_prompts", "turns", "output_tokens", "temperature", "k")


def workload_differences(entry: Mapping, run: Mapping) -> list[str]:
    """Where the run's workload is not the entry's (keys of ``run`` that are absent are not judged)."""
    w = dict(entry.get("workload") or {})
    w["k"] = entry.get("k")
    w["dataset"] = entry.get("dataset")
    out = []
    for key in ("dataset", "num_prompts", "turns", "output_tokens", "temperature", "k", "concurrency"):
        if run.get(key) is None or w.get(key) is None:
            continue
        if (float(run[key]) != float(w[key])) if key not in ("dataset",) else run[key] != w[key]:
            out.append(f"{key} {run[key]} (reference {w[key]})")
    return out


def check(entry: Mapping, measured_al: Optional[float], measured_rates: Optional[Sequence[float]],
          run: Optional[Mapping] = None) -> dict:
    """The verdict of one measurement against ``entry`` (a table row with its ``id``)."""
    rtol = float(entry["rtol"])
    problems: list[str] = []
    al_ok = None
    if measured_al is None:
        problems.append("no acceptance length was measured")
    else:
        al_ok = _within(measured_al, entry["expected_al"], rtol, entry.get("al_check") or "within")
        if not al_ok:
            problems.append(f"AL {measured_al:.4f} vs expected {entry['expected_al']}")
    pos = []
    exp_rates = entry.get("expected_rates")
    if exp_rates:
        rule = entry.get("per_position_check") or "within"
        if not measured_rates or len(measured_rates) < len(exp_rates):
            problems.append(f"per-position rates missing (need {len(exp_rates)} positions)")
        else:
            for i, (m, e) in enumerate(zip(measured_rates, exp_rates), start=1):
                ok = e <= 0 or _within(m, e, rtol, rule)
                pos.append({"position": i, "measured": m, "expected": e, "ok": ok})
                if not ok:
                    problems.append(f"position {i} rate {m:.4f} vs expected {e}")
    diffs = workload_differences(entry, run or {})
    comparable = not [d for d in diffs if d.split(" ", 1)[0] in STRICT_KEYS]
    passed = not problems
    causes: list[str] = []
    if not passed:
        causes = list(LIKELY_CAUSES)
        if diffs:  # a known difference goes first
            causes = [f"workload mismatch: {'; '.join(diffs)}"] + [c for c in causes
                                                                  if not c.startswith("workload mismatch")]
        if measured_al is not None and measured_al > entry["expected_al"] * (1 + rtol):
            causes = ["above the reference: the workload differs (shorter outputs, other prompts) or the "
                      "reference is out of date"] + causes
    return {
        "id": entry.get("id"),
        "verdict": ("pass" if passed else "fail") if comparable else "not_comparable",
        "measured_al": measured_al, "expected_al": entry["expected_al"],
        "al_definition": entry.get("al_definition", "pooled"),
        "measured_rates": list(measured_rates) if measured_rates else None,
        "expected_rates": list(exp_rates) if exp_rates else None,
        "positions": pos, "rtol": rtol, "al_check": entry.get("al_check") or "within",
        "per_position_check": entry.get("per_position_check"),
        "problems": problems, "workload_differences": diffs, "likely_causes": causes,
        "source": entry.get("source"), "commit": entry.get("commit"),
    }


def verdict_line(v: Mapping) -> str:
    """One line for the launcher's table and logs."""
    rates = v.get("measured_rates")
    r = "" if not rates else " rates [" + ", ".join(f"{x:.4f}" for x in rates) + "]"
    exp = "" if not v.get("expected_rates") else " [" + ", ".join(f"{x:.4f}" for x in v["expected_rates"]) + "]"
    al = "-" if v.get("measured_al") is None else f"{v['measured_al']:.4f}"
    head = f"golden {v.get('id')} {v.get('point') or ''}".rstrip()
    line = (f"{head}: {v['verdict'].upper()} AL {al}{r} vs expected {v['expected_al']}{exp} "
            f"(rtol {v['rtol']:g}, {v['al_check']})")
    if v["verdict"] == "not_comparable":
        line += "; not comparable: " + "; ".join(v.get("workload_differences") or [])
    elif v["verdict"] != "pass" and v.get("likely_causes"):
        line += "; likely causes: " + " | ".join(c.split(":")[0] for c in v["likely_causes"])
    return line
