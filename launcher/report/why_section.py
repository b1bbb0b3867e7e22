"""The report's "why" page (``why.html`` beside index.html): why each speculative point's speedup
is what it is. Per point the speedup = Server_AL / step cost split and its causes, each a word and
a sentence (launcher.speedup.why); the speedup against AL per drafter and concurrency
(launcher.report.why_plots); the measured speedup beside the prediction at its AL where a real
drafter ran beside forced runs; and the thresholds the causes were named at."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from launcher.report import html
from launcher.report.markup import esc as _e, figures, num as _num
from launcher.report.why_plots import speedup_vs_al
from launcher.speedup.at_al import comparison_line
from launcher.speedup.causes import legend
from launcher.speedup.decompose import cost_text, decode_cost_text, sentence

WHY_PAGE = "why.html"


def _table(head: list[str], rows: list[list[str]], cls: str, words: tuple = ()) -> str:
    """An HTML table; the columns ``words`` (indices) hold words, aligned left."""
    return (f'<table class="{cls}"><thead><tr>{"".join(f"<th>{_e(h)}</th>" for h in head)}</tr></thead><tbody>'
            + "".join("<tr>" + "".join(f'<td{" class=l" if i in words else ""}>{c}</td>' for i, c in enumerate(r))
                      + "</tr>" for r in rows) + "</tbody></table>")


def points_table(analysis: dict) -> str:
    """One row per point: its configuration, workload, the split, the cause words and sentences."""
    rows = []
    for r in sorted(analysis["points"], key=lambda r: (str(r.get("drafter")), r["dataset"], r["temperature"],
                                                       r["concurrency"])):
        d, cs = r.get("decomposition"), r.get("causes") or []
        rows.append([_e(r.get("drafter") or r["job"]), _e(r["dataset"]), f"{r['temperature']:g}",
                     str(r["concurrency"]), _num((d or {}).get("speedup")) + ("×" if d else ""),
                     _num((d or {}).get("al")), _e(cost_text(d)), _e(decode_cost_text(d)),
                     "<b>" + _e(" ".join(c["word"] for c in cs) or "–") + "</b>",
                     _e(sentence(d)) + "".join(f"<br>{_e(c['sentence'])}" for c in cs)])
    return _table(["configuration", "dataset", "T", "C", "speedup", "Server_AL", "step cost [95%]",
                   "decode step cost [95%]", "cause", "why"], rows, "why", words=(0, 1, 8, 9))


def comparison_table(analysis: dict) -> str:
    """The measured speedups of real drafters beside the forced runs' prediction at their AL."""
    ms = analysis.get("measured_vs_predicted") or []
    if not ms:
        return ('<p class="sub">No configuration here ran both forced and with its real drafter at the same load, '
                "so no measured speedup stands beside a prediction.</p>")
    return "<ul>" + "".join(f'<li{" class=warn" if m["gap"] else ""}>{_e(comparison_line(m))}</li>' for m in ms) \
        + "</ul>"


def why_page(analysis: Optional[dict], out: Path) -> Optional[Path]:
    """Write ``out/why.html`` (and its figure); None when no point has a decomposition."""
    if not analysis or not any(r.get("decomposition") for r in analysis.get("points") or []):
        return None
    fig = speedup_vs_al(analysis, out / "why_speedup_vs_al.png")
    figs = [(fig.relative_to(out).as_posix(),
             "Speedup against acceptance length per drafter (panel) and concurrency (colour): forced points with "
             "their 95% interval over repeats, the speedup the forced runs predict at every AL from each request's "
             "prefill and verify steps (band: its interval), the break-even (AL = step cost), stars where the real "
             "drafter ran.", True)] if fig else []
    t = analysis.get("cause_thresholds") or {}
    words = "".join(f"<li><b>{_e(w)}</b>: {_e(m)}</li>" for w, m in legend().items())
    body = (f'<section id="why"><h2>Why each speedup is what it is</h2>'
            '<p class="sub">speedup = Server_AL / step cost: a speculative step emits AL tokens and costs '
            "<i>step cost</i> baseline steps (docs/speedup.md).</p>"
            f"{figures(figs)}<h3>Per point</h3>{points_table(analysis)}"
            f"<h3>Measured beside predicted</h3>{comparison_table(analysis)}"
            f"<h3>The causes</h3><ul>{words}</ul>"
            f'<p class="sub">Thresholds: {_e(", ".join(f"{k} = {v:g}" for k, v in t.items()))} '
            "(launcher/speedup/causes.py).</p></section>")
    path = out / WHY_PAGE
    path.write_text(html.page("Why the speedup is what it is", "per speculative point of this results folder",
                              '<p><a href="index.html">back to the report</a></p>', [body]))
    return path


def why_link(page: Optional[Path]) -> str:
    """The index's link to the page ("" without one)."""
    return (f'<p><b><a href="{WHY_PAGE}">Why each speedup is what it is</a></b>: the speedup split into '
            "acceptance and step cost, and the cause of each point.</p>") if page else ""
