"""The speedup at any acceptance length from the parts a forced run measured: each request's
prefill and its verify steps.

At concurrency C a closed-loop client keeps C requests in flight, so the throughput moves as the
time one request takes. A request of n output tokens at acceptance length a takes

    T(a) = P + (n - 1) / a * s

with P its prefill (the time to its first token, TTFT) and s the time of one verify step (a step
emits a tokens, so s = a * TPOT, the time per output token after the first). Forced acceptance
changes what a step accepts, not what it computes, so P and s hold at every AL, and a level
measured at AL a_L with throughput speedup S_L predicts

    S(a) = S_L * T(a_L) / T(a).

The baseline enters through S_L (each repeat over the baseline's same repeat). Holding the step
cost AL / S constant instead (launcher.speedup.at_al's first model) spreads the prefill over the
steps, so it overshot at a higher AL by 1.7 to 7.9 % on the recorded H100 runs (docs/speedup.md).

Each kept repeat gives one prediction; several levels pool their repeats. The 95 % interval
(relative half-width h, S(a) x (1 -/+ h)) adds in quadrature what can move the figure:

* ``repeats``: the repeats' spread, t x sd / sqrt of (1 / the repeats kept + 1 / the repeats the
  figure at ``al`` will be measured over);
* ``prefill``: the prefill of another run, t x the kept repeats' TTFT sd x sqrt(1 + 1 / N), over T(a)
  (the TTFT moves more between runs than any other part);
* ``step``: a verify step another level may cost more or less, ``STEP_DRIFT`` of the decode time
  (the largest gap between two levels' decode-only step costs on the recorded H100 runs where
  the GPU stayed busy: 1.1 %, Llama EAGLE3 at C = 16);
* ``levels``: with two or more levels kept, the root mean square of their leave-one-out errors
  (each level predicted from the others against what it measured): the model's own error.

Rows are launcher.speedup point rows with ``request_parts`` (launcher.speedup.why). Pure.
"""
from __future__ import annotations

import math
from statistics import mean, stdev
from typing import Optional, Sequence

from launcher.stats.repeats import t_critical

STEP_DRIFT = 0.011


def parts(row: dict) -> list[dict]:
    """The row's repeats that hold every part: ``speedup``, ``ttft_s``, ``tpot_s``, ``al``."""
    rp = row.get("request_parts") or {}
    return [r for r in rp.get("repeats") or []
            if all(isinstance(r.get(k), (int, float)) and r[k] > 0 for k in ("speedup", "ttft_s", "tpot_s", "al"))]


def tokens(row: dict) -> Optional[float]:
    n = (row.get("request_parts") or {}).get("output_tokens")
    return float(n) if isinstance(n, (int, float)) and n > 1 else None


def request_time(rep: dict, n: float, al: float) -> float:
    """T(al) of one repeat, in seconds: its prefill and (n - 1) / al of its verify steps."""
    return rep["ttft_s"] + (n - 1) / al * rep["al"] * rep["tpot_s"]


def repeat_predictions(row: dict, al: float) -> list[float]:
    """One prediction of the speedup at ``al`` per repeat of ``row`` (a level of the configuration)."""
    n = tokens(row)
    return [r["speedup"] * request_time(r, n, r["al"]) / request_time(r, n, al) for r in parts(row)] if n else []


def usable(rows: Sequence[dict]) -> list[dict]:
    """The rows the model can use: their output length and at least one repeat with every part."""
    return [r for r in rows if tokens(r) and parts(r)]


def leave_one_out(rows: Sequence[dict]) -> list[dict]:
    """Each level predicted from the others' repeats alone (the mean of their predictions):
    ``{"row", "predicted", "measured", "error"}`` with error = predicted / measured - 1."""
    rows = usable(rows)
    out = []
    for i, r in enumerate(rows):
        others = [x for j, x in enumerate(rows) if j != i]
        preds = [p for o in others for p in repeat_predictions(o, level_al(r))]
        measured = mean(x["speedup"] for x in parts(r))
        if preds:
            out.append({"row": r, "predicted": mean(preds), "measured": measured,
                        "error": mean(preds) / measured - 1})
    return out


def level_al(row: dict) -> float:
    """The AL a level measured: the mean over its repeats."""
    return mean(x["al"] for x in parts(row))


def predict(rows: Sequence[dict], al: float, n_new: Optional[int] = None) -> Optional[dict]:
    """The speedup at ``al`` from the levels ``rows`` (one configuration at one load), with its 95 %
    interval and the terms it is made of; None when no row holds the parts. ``n_new``: the repeats
    the figure at ``al`` is measured over (default: the kept levels' mean)."""
    rows = usable(rows)
    preds = [(p, r) for r in rows for p in repeat_predictions(r, al)]
    if not preds:
        return None
    ps = [p for p, _ in preds]
    s, big_n = mean(ps), len(ps)
    n_new = n_new or max(1, round(big_n / len(rows)))
    reps = [(x, r) for r in rows for x in parts(r)]
    times = [request_time(x, tokens(r), al) for x, r in reps]
    decode = mean(t - x["ttft_s"] for t, (x, _) in zip(times, reps)) / mean(times)
    terms = {"repeats": None, "prefill": None, "step": STEP_DRIFT * decode, "levels": None}
    if big_n > 1:
        t = t_critical(big_n - 1)
        terms["repeats"] = t * stdev(ps) / s * math.sqrt(1 / big_n + 1 / n_new)
        terms["prefill"] = t * stdev(x["ttft_s"] for x, _ in reps) * math.sqrt(1 + 1 / big_n) / mean(times)
    if len(rows) > 1:
        terms["levels"] = math.sqrt(mean(e["error"] ** 2 for e in leave_one_out(rows)))
    h = math.sqrt(sum(v ** 2 for v in terms.values() if v is not None))
    return {"al": al, "speedup": s, "lo": s * (1 - h), "hi": s * (1 + h), "half_rel": h, "n": big_n,
            "levels": sorted(round(level_al(r), 3) for r in rows), "terms": terms}
