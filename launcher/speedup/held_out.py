"""The prediction checked on what the run measured: wherever a configuration ran two or more forced
levels at one load, each level is predicted from the others alone (launcher.speedup.al_model) and
set beside what it measured, with the interval the prediction carries.

Beside each, how far the two parts the model holds constant moved between the levels (``moved``:
the prefill, TTFT, and a verify step, AL x TPOT, each relative to the other levels' and as a share
of the predicted request time, i.e. what that move alone does to the prediction). A level outside
its interval, or one at C <= 16 that misses by more than 2 % (``beyond_target``), is marked with its
cause: the parts whose move accounts for at least a third of the miss (with none, the rest: the throughput moved apart from the request time), and the machine causes
the held-out level has and the others lack (launcher.speedup.causes: host-bound, ...). Pure.
"""
from __future__ import annotations

from statistics import mean
from typing import Optional

from launcher.engines.forced_acceptance import label
from launcher.speedup import al_model

_AT = ("dataset", "temperature", "concurrency", "k")
# What a prediction should land within at C <= TARGET_MAX_C (issue 61): a level inside its interval
# that misses by more is marked too, with the parts that moved (``beyond_target``)
TARGET_REL = 0.02
TARGET_MAX_C = 16


def _group(r: dict) -> tuple:
    return (str(r.get("drafter") or r.get("job")), str((r.get("configuration") or {}).get("fingerprint") or ""),
            *(r[k] for k in _AT))


def moved(kept: list[dict], held: dict) -> dict:
    """The prefill and the verify step of ``held`` against the ``kept`` levels': each part's mean over
    the repeats (seconds), its relative move and that move's share of the request time at held's AL."""
    kp = [(x, r) for r in kept for x in al_model.parts(r)]
    hp, a = al_model.parts(held), al_model.level_al(held)
    time = mean(al_model.request_time(x, al_model.tokens(r), a) for x, r in kp)
    p_k, p_h = mean(x["ttft_s"] for x, _ in kp), mean(x["ttft_s"] for x in hp)
    s_k, s_h = mean(x["al"] * x["tpot_s"] for x, _ in kp), mean(x["al"] * x["tpot_s"] for x in hp)
    return {"prefill": {"kept_s": p_k, "held_s": p_h, "rel": p_h / p_k - 1, "share": (p_h - p_k) / time},
            "step": {"kept_s": s_k, "held_s": s_h, "rel": s_h / s_k - 1,
                     "share": (s_h / s_k - 1) * (time - p_k) / time}}


def _more(rel: float) -> str:
    return f"{abs(rel):.0%} " + ("longer" if rel >= 0 else "less")


def _why(m: dict, al: float, error: float) -> list[str]:
    """The parts whose move accounts for a third of the miss or more, largest first, in words."""
    p, s = m["prefill"], m["step"]
    found = [(abs(s["share"]), f"a verify step took {_more(s['rel'])} at AL {al:.2f} than at the other level(s) "
                               f"({1e3 * s['kept_s']:.1f} -> {1e3 * s['held_s']:.1f} ms)"),
             (abs(p["share"]), f"the prefill took {_more(p['rel'])} (TTFT {1e3 * p['kept_s']:.1f} -> "
                               f"{1e3 * p['held_s']:.1f} ms)")]
    named = [text for share, text in sorted(found, reverse=True) if share >= abs(error) / 3]
    return named or ["the rest: the throughput moved apart from the request time (the client's gaps, the load's ramp)"]


def _new_causes(kept: list[dict], held: dict) -> list[str]:
    had = {c.get("word") for r in kept for c in r.get("causes") or []}
    return [c["word"] for c in held.get("causes") or [] if c.get("word") not in had]


def check(rows: list[dict]) -> list[dict]:
    """One entry per forced level of a configuration with two or more levels at the same (dataset,
    T, C, k): the level predicted from the others beside what it measured, ``inside`` its interval or
    not (then ``why``: the parts that moved, and ``causes``: the words the level has and the others
    lack). A level the model cannot use (no prefill or step times recorded) has ``predicted`` None."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get("forced_acceptance"):
            groups.setdefault(_group(r), []).append(r)
    out = []
    for _, rs in sorted(groups.items(), key=lambda kv: (kv[0][:3], float(kv[0][3]), int(kv[0][4]), kv[0][5] or 0)):
        if len(rs) < 2:
            continue
        for held in sorted(rs, key=lambda r: r["forced_acceptance"].get("length") or 0):
            out.append(_one(held, [r for r in rs if r is not held]))
    return out


def _one(held: dict, kept: list[dict]) -> dict:
    base = {"drafter": held.get("drafter"), **{k: held[k] for k in _AT},
            "configuration": held.get("configuration"), "level": label(held["forced_acceptance"]),
            "from_levels": [label(r["forced_acceptance"]) for r in kept]}
    usable = al_model.usable(kept)
    if not usable or not al_model.usable([held]):
        return {**base, "al": None, "predicted": None, "inside": None,
                "why": ["no prefill and step times recorded (TTFT, TPOT): nothing to predict from"], "causes": []}
    hp = al_model.parts(held)
    pred = al_model.predict(usable, al_model.level_al(held), len(hp))
    measured = mean(x["speedup"] for x in hp)
    inside = pred["lo"] <= measured <= pred["hi"]
    error = pred["speedup"] / measured - 1
    m = moved(usable, held)
    beyond = int(held["concurrency"]) <= TARGET_MAX_C and abs(error) > TARGET_REL
    marked = beyond or not inside
    return {**base, "al": pred["al"], "predicted": pred["speedup"], "lo": pred["lo"], "hi": pred["hi"],
            "terms": pred["terms"], "measured": measured, "measured_n": len(hp), "error": error, "inside": inside,
            "beyond_target": beyond, "moved": m, "why": _why(m, pred["al"], error) if marked else [],
            "causes": _new_causes(usable, held) if marked else []}


def signed(rel: float) -> str:
    """A relative error as "+3.4%" ("+0.0%", never "-0.0%")."""
    return f"{round(rel, 3) + 0.0:+.1%}"


def line(h: dict) -> str:
    """One held-out level in words."""
    who = (f"{h['drafter']}: {h['dataset']} T={h['temperature']:g} C={h['concurrency']}: {h['level']}"
           f" from {', '.join(h['from_levels'])}")
    if h["predicted"] is None:
        return f"{who}: {h['why'][0]}"
    verdict = ("OUTSIDE: " + "; ".join(h["why"] + h["causes"]) if not h["inside"] else
               f"inside, beyond {TARGET_REL:.0%}: " + "; ".join(h["why"] + h["causes"]) if h.get("beyond_target")
               else "inside")
    m = h["moved"]
    return (f"{who} (AL {h['al']:.2f}): predicted {h['predicted']:.2f}x [{h['lo']:.2f}, {h['hi']:.2f}] vs measured "
            f"{h['measured']:.2f}x (prediction {signed(h['error'])}; prefill {signed(m['prefill']['rel'])}, "
            f"step {signed(m['step']['rel'])} against the other level(s)): {verdict}")


def summary(checks: list[dict]) -> Optional[str]:
    """How many held-out levels fell inside their interval (None without any)."""
    done = [h for h in checks if h["predicted"] is not None]
    if not checks:
        return None
    worst = max((abs(h["error"]) for h in done), default=None)
    beyond = sum(bool(h.get("beyond_target")) for h in done)
    return (f"{sum(h['inside'] for h in done)} of {len(done)} level(s) predicted from the others fell inside "
            f"their interval" + (f"; largest miss {worst:.1%}" if worst is not None else "")
            + (f"; {beyond} beyond {TARGET_REL:.0%} at C <= {TARGET_MAX_C} (each with the part that moved)"
               if beyond else "")
            + (f"; {len(checks) - len(done)} without the parts to predict from" if len(done) < len(checks) else ""))
