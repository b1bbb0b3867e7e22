"""The report's golden-reference section: summary.json's golden check as a table, in the
words of launcher.golden.text (the one writer of the verdict's texts)."""
from __future__ import annotations

from launcher.golden.text import figure_tolerance, recorded_on_text, tolerance_rule
from launcher.golden.verdict import FAIL, NOT_COMPARABLE, PASS, TOO_SMALL
from launcher.report.markup import esc, num

_HEAD = ("<table><thead><tr><th class=l>point</th><th class=l>verdict</th><th>AL</th><th>expected AL</th>"
         "<th class=l>per-position rates</th><th class=l>expected</th><th class=l>tolerance</th>"
         "<th>drafts</th><th class=l>recorded elsewhere</th><th class=l>likely causes</th></tr></thead>")


def _point_row(v: dict) -> str:
    rates = v.get("measured_rates") or []
    exp = v.get("expected_rates") or []
    causes = "" if v["verdict"] != FAIL else "<br>".join(esc(c) for c in (v.get("likely_causes") or []))
    if v["verdict"] == NOT_COMPARABLE:
        causes = esc("; ".join(v.get("workload_differences") or []))
    tol = [f"AL {figure_tolerance(v.get('al'))}"] + [f"position {p['position']} {figure_tolerance(p)}"
                                                     for p in v.get("positions") or []]
    drafts = v.get("num_drafts")
    return (f'<tr><td class="l">{esc(v.get("point"))}</td><td class="l">{esc(v["verdict"])}</td>'
            f'<td>{num(v.get("measured_al"), 4)}</td><td>{num(v.get("expected_al"), 4)}</td>'
            f'<td class="l">{esc(", ".join(f"{r:.4f}" for r in rates))}</td>'
            f'<td class="l">{esc(", ".join(f"{r:.4f}" for r in exp))}</td>'
            f'<td class="l">{"<br>".join(esc(t) for t in tol)}<br>{esc(tolerance_rule(v.get("rtol"), v.get("z")))}</td>'
            f'<td>{esc("-" if drafts is None else int(drafts))}</td>'
            f'<td class="l">{esc("; ".join(v.get("platform_differences") or []) or "-")}</td>'
            f'<td class="l">{causes}</td></tr>')


def golden_block(golden: dict | None) -> str:
    """summary.json's golden check (bench.golden): the verdict per judged point, each figure
    against expected with its tolerance (rtol or the sampling noise, the wider) or too small
    to judge, the drafts counted, what differs from where the reference was recorded, and
    the likely causes when it fails."""
    if not isinstance(golden, dict):
        return ('<div class="prov"><span class="sub">No golden check in summary.json '
                '(bench.golden=&lt;id&gt; runs it).</span></div>')
    entry = golden.get("entry") or {}
    word = str(golden.get("verdict"))
    cls = {PASS: "complete", TOO_SMALL: "skipped"}.get(word, "failed")
    head = (f'<p><b>{esc(golden.get("id"))}</b>: <span class="st-{cls}">'
            f'{esc(word.upper())}</span> &middot; reference {esc(entry.get("model"))} + '
            f'{esc(entry.get("draft"))}, k={esc(entry.get("k"))}, source {esc(entry.get("source"))} '
            f'@ {esc(str(entry.get("commit"))[:12])}; recorded on '
            f'{esc(recorded_on_text(entry.get("recorded_on")) or "not recorded")}, '
            f'{esc(entry.get("num_drafts") if entry.get("num_drafts") is not None else "unknown")} drafts</p>')
    rows = [_point_row(v) for v in golden.get("points") or []]
    problems = "" if golden.get("points") else f'<p class="warn">{esc("; ".join(golden.get("problems") or []))}</p>'
    table = f"{_HEAD}<tbody>{''.join(rows)}</tbody></table>" if rows else ""
    return head + problems + table
