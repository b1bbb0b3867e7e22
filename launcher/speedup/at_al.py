"""The speedup at any acceptance length, from what the forced runs measured.

Forced acceptance sets what a verify step accepts, not what it computes, so a step costs the
same whatever it accepts. The prediction splits each request into its prefill and its verify
steps (launcher.speedup.al_model): fewer steps at a higher AL, the same prefill, so

    S(a) = S_L * T(a_L) / T(a),   T(a) = TTFT + (n - 1) / a * (a_L * TPOT)

from every forced level L of the configuration at the same (dataset, T, C, k), with a 95 %
interval that holds the model's own error (the levels' leave-one-out errors; with one level, the
prefill's spread and a step drift). Where the rows hold no prefill or step times (an earlier
analysis), the constant step cost stands in: AL / step_cost, 95 % interval [AL / hi, AL / lo],
``step_cost`` the break-even of the configuration's forced runs (launcher.speedup.break_even).
A configuration is one server (drafter, method, k and serving settings) whatever its forced
level; ``--at-al 2.7 4.25`` asks it for the AL a user's drafter reaches on their data, or a
published AL. Where the same configuration also ran with its real drafter (unforced), its
measured speedup stands beside the prediction at its own AL, and a gap beyond both intervals is
marked with the point's causes (launcher.speedup.causes). Pure.
"""
from __future__ import annotations

from typing import Optional

from launcher.speedup import al_model
from launcher.speedup.break_even import break_even, point_al

_AT = ("dataset", "temperature", "concurrency", "k")


def configuration_costs(rows: list[dict]) -> list[dict]:
    """Per configuration and (dataset, T, C, k): the forced runs' step cost with its interval
    (break_even over that configuration's forced rows only). Rows carry ``drafter`` (launcher.speedup.why: the configuration in words)."""
    out = []
    for conf in sorted({r["drafter"] for r in rows if r.get("forced_acceptance") and r.get("drafter")}):
        for b in break_even([r for r in rows if r.get("drafter") == conf]):
            if b.get("break_even_al") is not None:
                out.append({"drafter": conf, **{k: b[k] for k in _AT}, "step_cost": b["break_even_al"],
                            "lo": b["lo"], "hi": b["hi"], "n": b["n"],
                            "forced_als": [lv["al"] for lv in b["levels"]]})
    return out


def predict(cost: dict, al: float) -> dict:
    """The speedup ``cost``'s configuration would reach at ``al``, with its interval (None with one estimate)."""
    lo, hi = cost.get("lo"), cost.get("hi")
    return {"al": al, "speedup": al / cost["step_cost"],
            "lo": al / hi if hi else None, "hi": al / lo if lo and lo > 0 else None}


def _forced(rows: list[dict], at: dict) -> list[dict]:
    """The forced rows of ``at``'s configuration and (dataset, T, C, k)."""
    return [r for r in rows if r.get("forced_acceptance") and r.get("drafter") == at["drafter"]
            and all(r[k] == at[k] for k in _AT)]


def model_predict(rows: list[dict], cost: dict, al: float) -> dict:
    """The speedup at ``al`` from the configuration's forced levels split into prefill and steps
    (launcher.speedup.al_model, ``model`` "prefill + steps"), else AL / step cost (``model``
    "AL / step cost": the rows hold no prefill and step times)."""
    p = al_model.predict(_forced(rows, cost), al)
    if p is None:
        return {**predict(cost, al), "model": "AL / step cost", "levels": cost.get("forced_als") or []}
    return {"al": al, "speedup": p["speedup"], "lo": p["lo"], "hi": p["hi"], "model": "prefill + steps",
            "levels": p["levels"], "terms": p["terms"]}


def _interval(row: dict) -> tuple[float, Optional[float], Optional[float]]:
    rep = row.get("throughput_repeats") or {}
    return row["speedup"]["throughput"], rep.get("lo"), rep.get("hi")


def measured_vs_predicted(rows: list[dict], costs: list[dict]) -> list[dict]:
    """Each unforced point whose configuration has forced step costs at its (dataset, T, C, k):
    its measured speedup (with the repeats' interval) beside the prediction at its own AL;
    ``gap`` when the two intervals (a point where one has none) do not meet."""
    by = {(c["drafter"], *(c[k] for k in _AT)): c for c in costs}
    out = []
    for r in rows:
        cost = by.get((r.get("drafter"), *(r[k] for k in _AT)))
        al = point_al(r)
        if r.get("forced_acceptance") or cost is None or al is None or not r["speedup"].get("throughput"):
            continue
        pred = model_predict(rows, cost, al)
        m, mlo, mhi = _interval(r)
        plo, phi = pred["lo"] or pred["speedup"], pred["hi"] or pred["speedup"]
        gap = (mhi if mhi is not None else m) < plo or (mlo if mlo is not None else m) > phi
        out.append({"drafter": r["drafter"], **{k: r[k] for k in _AT}, "al": al,
                    "measured": m, "measured_lo": mlo, "measured_hi": mhi, "predicted": pred["speedup"],
                    "predicted_lo": pred["lo"], "predicted_hi": pred["hi"], "gap": gap,
                    "causes": r.get("causes") or []})
    return out


def _iv(lo: Optional[float], hi: Optional[float]) -> str:
    return f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else " (one repeat: no interval)"


def basis(p: dict) -> str:
    """What a prediction rests on, and what its interval is worth, in words."""
    levels = ", ".join(f"{a:.2f}" for a in p["levels"])
    if p["model"] != "prefill + steps":
        return (f"AL / step cost from forced AL(s) {levels}: no prefill and step times recorded; the interval "
                "holds the repeats only")
    if len(p["levels"]) > 1:
        return (f"from the forced levels at AL {levels}; the interval holds the repeats, the prefill's spread, a "
                f"{al_model.STEP_DRIFT:.1%} step drift and their leave-one-out error ({p['terms']['levels']:.1%})")
    return (f"one forced level only (AL {levels}): the interval holds the repeats, the prefill's spread and a "
            f"{al_model.STEP_DRIFT:.1%} step drift, not the model's error between levels, which a second forced "
            f"level measures")


def lines(costs: list[dict], als: list[float], rows: list[dict] = ()) -> list[str]:
    """``--at-al``'s answer, one line per configuration and (dataset, T, C, k): the step cost (the
    break-even) and the speedup at each AL (``model_predict`` over ``rows``, the analysis' points)."""
    if not costs:
        return ["--at-al: no forced runs with a matched baseline here, so no step cost to predict from"]
    out = []
    for c in costs:
        ps = [model_predict(list(rows), c, al) for al in als]
        preds = "; ".join(f"AL {p['al']:g}: {p['speedup']:.2f}x{_iv(p['lo'], p['hi'])}" for p in ps)
        out.append(f"{c['drafter']}: {c['dataset']} T={c['temperature']:g} C={c['concurrency']}: "
                   f"step cost {c['step_cost']:.2f}{_iv(c['lo'], c['hi'])} -> {preds} ({basis(ps[0])})")
    return out


def comparison_line(m: dict) -> str:
    """One measured-beside-predicted comparison in words."""
    return (f"{m['drafter']}: {m['dataset']} T={m['temperature']:g} C={m['concurrency']}: measured "
            f"{m['measured']:.2f}x{_iv(m['measured_lo'], m['measured_hi'])} at AL {m['al']:.2f}, predicted "
            f"{m['predicted']:.2f}x{_iv(m['predicted_lo'], m['predicted_hi'])}"
            + (" GAP beyond the intervals" + (": " + " ".join(c["word"] for c in m["causes"]) if m["causes"] else "")
               if m["gap"] else ""))
