"""The report's check of the prediction across ALs (launcher.speedup.held_out): wherever a
configuration ran two or more forced levels at one load, each level predicted from the others beside
what it measured, one row per configuration (k x forced level) and load."""
from __future__ import annotations

from launcher.report.markup import esc as _e, num as _num
from launcher.results.identity import tag
from launcher.speedup import held_out
from launcher.speedup.al_model import STEP_DRIFT

WHY_PAGE = "why.html"


def _verdict(h: dict) -> str:
    if h["predicted"] is None:
        return f'<span class="sub">{_e(h["why"][0])}</span>'
    if h["inside"] and h.get("beyond_target"):
        return (f'<span class="st-complete">inside</span>, beyond {held_out.TARGET_REL:.0%}: ' + _e("; ".join(h["why"] + h["causes"])))
    if h["inside"]:
        return '<span class="st-complete">inside</span>'
    return '<span class="st-failed">outside</span>: ' + _e("; ".join(h["why"] + h["causes"]))


def table(analysis: dict) -> str:
    """The held-out rows as a table with how to read it, or one line saying why there are none."""
    checks = analysis.get("held_out") or []
    if not checks:
        return ('<p class="sub">No configuration here ran two forced levels at one load, so no level is predicted '
                f'from another (<a href="{WHY_PAGE}">why each speedup is what it is</a>).</p>')
    head = ["configuration", "dataset", "T", "C", "level (AL)", "predicted from", "predicted [95%]", "measured",
            "prediction off by", "verdict"]
    rows = []
    for h in checks:
        cells = [_e(h["drafter"]) + _e(tag((h.get("configuration") or {}).get("label"))), _e(h["dataset"]),
                 f"{h['temperature']:g}", str(h["concurrency"]),
                 _e(h["level"]) + (f" ({h['al']:.2f})" if h.get("al") else ""), _e(", ".join(h["from_levels"])),
                 (f"{h['predicted']:.2f}× [{h['lo']:.2f}, {h['hi']:.2f}]" if h["predicted"] is not None else "–"),
                 _num(h.get("measured")) + ("×" if h.get("measured") is not None else ""),
                 held_out.signed(h["error"]) if h.get("error") is not None else "–", _verdict(h)]
        rows.append("<tr>" + "".join(f'<td{" class=l" if i in (0, 9) else ""}>{c}</td>' for i, c in enumerate(cells))
                    + "</tr>")
    return (f'<p>{_e(held_out.summary(checks))}.</p>'
            f'<table class="heldout"><thead><tr>{"".join(f"<th>{_e(x)}</th>" for x in head)}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>'
            '<p class="sub">Each forced level predicted from the configuration\'s other levels alone: a request '
            "is its prefill (TTFT) and (tokens − 1) / AL verify steps (AL × TPOT each), both held from the other "
            "levels, so the speedup moves as the request time does. The interval holds the repeats, the prefill's "
            f"spread between runs and a {STEP_DRIFT:.1%} step drift; a level outside it names the part that moved "
            f'(docs/speedup.md, "At any acceptance length"; <a href="{WHY_PAGE}">why each speedup is what it is</a>).'
            "</p>")
