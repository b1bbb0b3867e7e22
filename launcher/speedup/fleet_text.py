"""The fleet comparison (launcher.speedup.fleet) in words: the console's lines and the report's
sentences share them. Pure."""
from __future__ import annotations

from typing import Callable, Optional

from launcher.results.identity import tag

KIND_WORDS = {"equal": "", "at least": "at least ", "at most": "at most "}


def fmt(iv: Optional[dict], f: Callable[[float], str]) -> str:
    """``mean [lo, hi]`` of an interval (fleet.interval), ``mean`` alone with one value, ``-`` without."""
    if not iv:
        return "-"
    return f(iv["mean"]) + (f" [{f(iv['lo'])}, {f(iv['hi'])}]" if iv.get("lo") is not None else "")


def tps(v: float) -> str:
    return f"{v:,.0f}"


def gain(v: float) -> str:
    return f"{v:.2f}"


def joules(v: float) -> str:
    return f"{v:.3f}"


def usd(v: float) -> str:
    return f"${v:.2f}" if v >= 1 else f"${v:.3f}"


def times(iv: Optional[dict]) -> str:
    """A gain: ``2.92x [2.84, 3.00]``."""
    if not iv:
        return "-"
    return f"{gain(iv['mean'])}x" + (f" [{gain(iv['lo'])}, {gain(iv['hi'])}]" if iv.get("lo") is not None else "")


def speed(v: float) -> str:
    return f"{v:,.1f}"


def title(c: dict) -> str:
    """``dflash (dflash k=15), forced AL 4 [label], mtbench T=0``."""
    return (f"{c['drafter']}" + (f", {c['forced']}" if c.get("forced") else "")
            + tag((c.get("configuration") or {}).get("label")) + f", {c['dataset']} T={c['temperature']:g}")


def where(a: dict) -> str:
    """Which speed a reading is at: ``the baseline's C=1``, ``the speculative server's C=64``, ``asked``."""
    an = a["anchor"]
    return "asked" if an["side"] == "asked" else \
        f"the {'baseline' if an['side'] == 'baseline' else 'speculative server'}'s C={an['concurrency']}"


def reading(a: dict) -> str:
    """One per-user speed: both throughputs per GPU and the gain, J and $ per token where known."""
    s, b = a["speculative"], a["baseline"]
    head = f"at {speed(a['per_user_tps'])} tok/s per user ({where(a)}): "
    if a["kind"] == "baseline cannot reach":
        return head + f"the baseline cannot reach it; speculative {fmt(s['tps_per_gpu'], tps)} tok/s per GPU"
    if a["kind"] == "speculative cannot reach":
        return head + "the speculative server cannot reach it"
    if a["kind"] == "not measured":
        return head + "neither server was measured this slow"
    text = (head + f"{KIND_WORDS[a['kind']]}{times(a['gain'])} the baseline's throughput per GPU "
            f"({fmt(s['tps_per_gpu'], tps)} vs {fmt(b['tps_per_gpu'], tps)} tok/s per GPU, n={a['gain']['n']})")
    if s["joules_per_token"] and b["joules_per_token"]:
        text += f"; {fmt(s['joules_per_token'], joules)} vs {fmt(b['joules_per_token'], joules)} J per token"
    if s["usd_per_million_tokens"] and b["usd_per_million_tokens"]:
        text += (f"; {fmt(s['usd_per_million_tokens'], usd)} vs {fmt(b['usd_per_million_tokens'], usd)} "
                 "per million tokens")
    return text


def per_point(side: str, rows: list[dict], energy: dict, price: Optional[float]) -> list[str]:
    """A side's J per token and $ per million tokens at each of its points."""
    out = []
    if energy["source"]:
        out.append(f"{side} J per output token ({energy['source']}): "
                   + ", ".join(f"C={r['concurrency']} {fmt(r['joules_per_token'], joules)}" for r in rows))
    else:
        out.append(f"{side}: no energy figures: {energy['absent']}")
    if price:
        out.append(f"{side} $ per million output tokens at ${price:.2f} per GPU-hour: "
                   + ", ".join(f"C={r['concurrency']} {fmt(r['usd_per_million_tokens'], usd)}" for r in rows))
    return out


def lines(fleet: Optional[dict]) -> list[str]:
    """The console's lines for speedup_summary.json's ``fleet``."""
    if not fleet:
        return []
    price = fleet.get("gpu_hour_price")
    out = []
    for c in fleet["comparisons"]:
        out.append(f"fleet: {title(c)} against {c['baseline_job']}, at equal per-user speed "
                   f"({c['repeat_pairs']} repeat pair(s)):")
        for a in c["at_speed"]:
            if a["kind"] != "baseline cannot reach" or a["anchor"]["side"] == "asked":
                out.append("  " + reading(a))
        above = c.get("only_speculative_above")
        if above is not None:
            fast = c["reach"]["speculative"]["fastest"]
            out.append(f"  above {speed(above)} tok/s per user only the speculative server serves (it reaches "
                       f"{speed(fast['per_user_tps'])} at C={fast['concurrency']})")
        out += ["  " + x for x in per_point("speculative", c["points"]["speculative"], c["energy"]["speculative"], price)]
        out += ["  " + x for x in per_point("baseline", c["points"]["baseline"], c["energy"]["baseline"], price)]
    for m in fleet.get("not_compared") or []:
        out.append(f"fleet: {m['job']} against {m['baseline_job']}, {m['dataset']} T={m['temperature']:g}: not compared: "
                   f"{m['why']}")
    if fleet["comparisons"] and not price:
        out.append("fleet: no dollar figures: give --gpu-hour-price USD (or the recipe's cluster.gpu_hour_price)")
    return out
