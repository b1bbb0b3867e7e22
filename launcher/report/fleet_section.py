"""The report's "At equal per-user speed" section (docs/fleet.md): each speculative server against its
matched baseline at the same per-user decode speed, in output tokens/s per GPU, joules per output
token and dollars per million output tokens, with their 95 % intervals over the repeats. Reads
speedup_summary.json's ``fleet`` (launcher.speedup.fleet)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from launcher.report.fleet_plots import equal_speed_curves
from launcher.report.markup import esc as _e, figures
from launcher.speedup.fleet_points import SOURCE_WORDS
from launcher.speedup.fleet_text import KIND_WORDS, fmt, joules, speed, times, title, tps, usd, where


def _table(head: list[str], rows: list[list[str]]) -> str:
    return (f'<table class="fleet"><thead><tr>{"".join(f"<th>{_e(h)}</th>" for h in head)}</tr></thead><tbody>'
            + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows) + "</tbody></table>")


def _pair(a: dict, key: str, f) -> str:
    s, b = a["speculative"].get(key), a["baseline"].get(key)
    return _e(f"{fmt(s, f)} vs {fmt(b, f)}") if s or b else "–"


def readings_table(c: dict, priced: bool) -> str:
    """One row per per-user speed both curves were read at."""
    head = ["per-user tok/s", "where", "tok/s per GPU: speculative vs baseline", "gain [95%]",
            "J per output token"] + (["$ per million output tokens"] if priced else [])
    rows = []
    for a in c["at_speed"]:
        if a["kind"] == "baseline cannot reach":
            gain = "baseline cannot reach"
        elif a["gain"]:
            gain = f"<b>{_e(KIND_WORDS[a['kind']] + times(a['gain']))}</b> (n={a['gain']['n']})"
        else:
            gain = _e(a["kind"])
        row = [_e(speed(a["per_user_tps"])), _e(where(a)), _pair(a, "tps_per_gpu", tps), gain,
               _pair(a, "joules_per_token", joules)]
        rows.append(row + ([_pair(a, "usd_per_million_tokens", usd)] if priced else []))
    return _table(head, rows)


def points_table(c: dict, priced: bool) -> str:
    """Each measured point of both sides, over its repeats."""
    head = ["server", "C", "repeats", "per-user tok/s", "tok/s per GPU", "J per output token"] + \
        (["$ per million output tokens"] if priced else [])
    rows = []
    for side in ("speculative", "baseline"):
        for r in c["points"][side]:
            row = [side, str(r["concurrency"]), str(r["repeats"]), _e(fmt(r["per_user_tps"], speed)),
                   _e(fmt(r["tps_per_gpu"], tps)), _e(fmt(r["joules_per_token"], joules))]
            rows.append(row + ([_e(fmt(r["usd_per_million_tokens"], usd))] if priced else []))
    return _table(head, rows)


def _energy_note(c: dict) -> str:
    parts = []
    for side in ("speculative", "baseline"):
        e = c["energy"][side]
        parts.append(f"{side}: " + (f"{SOURCE_WORDS.get(e['source'], e['source'])}" if e["source"] else f"no energy figures ({e['absent']})"))
    return "Energy " + "; ".join(parts) + "."


def fleet_section(analysis: Optional[dict], out: Path) -> str:
    """The whole section; empty without a fleet comparison."""
    fleet = (analysis or {}).get("fleet") or {}
    comps = fleet.get("comparisons") or []
    missing = "".join(f"<p class=\"sub\">{_e(m['job'])} against {_e(m['baseline_job'])}, {_e(m['dataset'])} "
                      f"T={m['temperature']:g}: not compared: {_e(m['why'])}.</p>" for m in fleet.get("not_compared") or [])
    if not comps:
        return (f'<section id="fleet"><h2>At equal per-user speed</h2>{missing}</section>' if missing else "")
    p = equal_speed_curves(comps, out / "fleet_equal_speed.png")
    figs = [] if p is None else [(p.relative_to(out).as_posix(),
                                  "Output tok/s per GPU against per-user decode speed: each speculative server "
                                  "(solid) and its baseline (dashed), 95% intervals over the repeats; each arrow "
                                  "runs from the baseline up to the speculative server at one per-user speed, its "
                                  "gain beside it.", True)]
    price = fleet.get("gpu_hour_price")
    price_note = (f"Dollars at ${price:.2f} per GPU-hour ({_e(fleet.get('price_source'))})." if price else
                  "No GPU-hour price was given, so no dollar figures (give <code>--gpu-hour-price USD</code> to "
                  "<code>python -m launcher.speedup</code>, or set <code>cluster.gpu_hour_price</code>).")
    body = "".join(f"<h3>{_e(title(c))} against {_e(c['baseline_job'])}</h3>"
                   f"<p class=\"sub\">{_e(_energy_note(c))} {c['repeat_pairs']} repeat pair(s).</p>"
                   f"{readings_table(c, bool(price))}{points_table(c, bool(price))}" for c in comps)
    return (f'<section id="fleet"><h2>At equal per-user speed</h2>'
            f"<p>Each speculative server against its matched baseline at the same per-user decode speed: the "
            f"throughput each GPU gives while every user still sees that speed. Read off each server's measured "
            f"curve over concurrency by straight lines between its points, never past them: slower than a "
            f"server's slowest point its figure is a lower bound (\"at least\"). Gains are speculative / baseline "
            f"per repeat pair, with the 95% interval over the pairs (docs/fleet.md). {price_note}</p>"
            f"{figures(figs)}{body}{missing}</section>")
