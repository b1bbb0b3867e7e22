"""The history page: one static HTML file, inline CSS, inline SVG, a few lines of plain
JavaScript for the filters; nothing fetched from a network, so it opens offline and
publishes anywhere.

Sections: the filters (model, draft, engine version); the latest run of every series
with its change from the previous one; the regressions, each where it begins; one
card per series with Average_AL and Output TPS over its runs (the 95% interval
where the run had repeats; a red triangle where a regression begins) and its runs
labelled with engine version, container image and tool version.
"""
from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from html import escape
from typing import Callable, Optional

from launcher.history.series import History, Run, Series, short

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
main{max-width:1240px;margin:0 auto;padding:20px 28px 60px}
h1{font-size:1.6em;margin:.2em 0}
h2{font-size:1.25em;border-bottom:2px solid #d8dce3;padding-bottom:.2em;margin-top:1.8em}
.sub{color:#5b6475;font-size:.9em}
.filters{display:flex;flex-wrap:wrap;gap:12px 22px;align-items:center;background:#fff;border:1px solid #dde1e8;
  border-radius:8px;padding:10px 16px;position:sticky;top:0;z-index:2}
.filters label{font-size:.9em;color:#465064}
.filters select{margin-left:6px;max-width:340px}
table{border-collapse:collapse;width:100%;font-size:.84em;background:#fff}
th,td{border:1px solid #dde1e8;padding:4px 7px;text-align:right;vertical-align:top}
th{background:#eef1f5}
td.l,th.l{text-align:left}
td.reg{color:#b42318;font-weight:700}.imp{color:#17803d;font-weight:600}.ok{color:#5b6475}
.series{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:12px 16px;margin:14px 0}
.series h3{font-size:1em;margin:0 0 8px;word-break:break-word}
.charts{display:flex;flex-wrap:wrap;gap:12px}
.charts svg{flex:0 0 auto;background:#fff}
details summary{cursor:pointer;font-size:.88em;color:#465064;margin-top:6px}
ul.regs li{margin:4px 0}
.legend{font-size:.82em;color:#5b6475;margin:6px 0 0}
.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.92em;word-break:break-all}
"""

JS = """
(function(){
  function val(id){var e=document.getElementById(id);return e?e.value:'';}
  function apply(){
    var m=val('f-model'),d=val('f-draft'),e=val('f-engine'),shown=0;
    document.querySelectorAll('[data-model]').forEach(function(el){
      var ok=(!m||el.getAttribute('data-model')===m)&&(!d||el.getAttribute('data-draft')===d)&&
             (!e||el.getAttribute('data-engines').split('|').indexOf(e)>=0);
      el.style.display=ok?'':'none';
      if(ok&&el.classList.contains('series'))shown++;
    });
    var c=document.getElementById('shown');if(c)c.textContent=shown;
  }
  ['f-model','f-draft','f-engine'].forEach(function(id){
    var el=document.getElementById(id);if(el)el.addEventListener('change',apply);});
  apply();
})();
"""

W, H = 540, 230
LEFT, RIGHT, TOP, BOTTOM = 58, 16, 30, 50
COLOURS = {"specdec_launcher": "#2f6bb3", "specdec_bench": "#d9730d"}


def _e(v) -> str:
    return escape("" if v is None else str(v))


def _pct(v: Optional[float]) -> str:
    return "–" if v is None else f"{v:+.1%}"


def _n(v: Optional[float], fmt: str) -> str:
    return "–" if v is None else fmt.format(v)


def anchor(s: Series) -> str:
    return "s-" + "".join(ch if ch.isalnum() else "-" for ch in "-".join(str(x) for x in s.key))[:120] + (
        f"-{s.fingerprint}" if s.fingerprint else "")  # two server configurations: two series


def _ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    span = hi - lo
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 10) for i in range(n + 2) if first + i * step <= hi + 1e-12]


def chart(s: Series, title: str, value: Callable[[Run], Optional[float]], ci: Callable[[Run], Optional[tuple]],
          flag: Callable[[Run], Optional[str]], fmt: str, metric: str) -> str:
    """One metric of a series over its runs, as an SVG (x: the runs in time order); a red
    triangle where this metric's regression begins."""
    runs = [r for r in s.runs if value(r) is not None]
    if not runs:
        return ""
    vals = [value(r) for r in runs] + [x for r in runs if ci(r) for x in ci(r)]
    lo, hi = min(vals), max(vals)
    pad = (hi - lo) * 0.12 or abs(hi) * 0.05 or 1.0
    lo, hi = lo - pad, hi + pad
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    x = lambda i: LEFT + (i + 0.5) * pw / len(runs)  # noqa: E731
    y = lambda v: TOP + ph - (v - lo) / (hi - lo) * ph  # noqa: E731
    out = [f'<svg class="chart" data-metric="{metric}" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           f'role="img" aria-label="{_e(title)}">',
           f'<text class="title" x="{LEFT}" y="14" font-size="12" font-weight="600">{_e(title)}</text>',
           f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#c9ced8"/>']
    for t in _ticks(lo, hi):
        out.append(f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{y(t):.1f}" y2="{y(t):.1f}" stroke="#eef1f5"/>'
                   f'<text class="ytick" x="{LEFT - 6}" y="{y(t) + 3.5:.1f}" font-size="10" text-anchor="end">'
                   f'{fmt.format(t)}</text>')
    step = max(1, math.ceil(len(runs) / max(1, pw // 70)))
    for i, r in enumerate(runs):
        if i % step == 0:
            out.append(f'<text class="xtick" x="{x(i):.1f}" y="{TOP + ph + 15}" font-size="10" text-anchor="middle">'
                       f'{_e(r.time.strftime("%m-%d") if r.time else "?")}</text>'
                       f'<text class="xtick" x="{x(i):.1f}" y="{TOP + ph + 28}" font-size="9" fill="#5b6475" '
                       f'text-anchor="middle">{_e(r.engine_version[:10])}</text>')
    out.append(f'<text class="xlabel" x="{LEFT + pw / 2:.1f}" y="{H - 6}" font-size="10" fill="#5b6475" '
               f'text-anchor="middle">run (date · engine version)</text>')
    pts = " ".join(f"{x(i):.1f},{y(value(r)):.1f}" for i, r in enumerate(runs))
    out.append(f'<polyline points="{pts}" fill="none" stroke="#8a93a3" stroke-width="1.2"/>')
    last_label = -1e9
    for i, r in enumerate(runs):
        xi, yi = x(i), y(value(r))
        if ci(r):
            a, b = y(ci(r)[0]), y(ci(r)[1])
            out.append(f'<g class="interval" data-run="{_e(r.iso)}"><line x1="{xi:.1f}" x2="{xi:.1f}" y1="{a:.1f}" '
                       f'y2="{b:.1f}" stroke="#465064"/><line x1="{xi - 4:.1f}" x2="{xi + 4:.1f}" y1="{a:.1f}" '
                       f'y2="{a:.1f}" stroke="#465064"/><line x1="{xi - 4:.1f}" x2="{xi + 4:.1f}" y1="{b:.1f}" '
                       f'y2="{b:.1f}" stroke="#465064"/></g>')
        tip = (f"{r.stamp} · {metric} {fmt.format(value(r))}"
               + (f" [{fmt.format(ci(r)[0])}, {fmt.format(ci(r)[1])}] n={r.n}" if ci(r) else "")
               + f" · engine {r.engine_version} · image {r.image} · {r.tool} · {r.where}"
               + (f" · {r.verdict}: {r.why}" if r.verdict and r.why else ""))
        out.append(f'<circle class="point" data-run="{_e(r.iso)}" data-verdict="{_e(r.verdict or "first")}" '
                   f'cx="{xi:.1f}" cy="{yi:.1f}" r="4" fill="{COLOURS.get(r.origin, "#465064")}">'
                   f'<title>{_e(tip)}</title></circle>')
        if flag(r) == "regression" and r.verdict == "regression":
            out.append(f'<g class="regression-marker" data-run="{_e(r.iso)}"><path d="M{xi - 6:.1f},{TOP + 2} '
                       f'L{xi + 6:.1f},{TOP + 2} L{xi:.1f},{TOP + 12} Z" fill="#b42318"/>'
                       f'<circle cx="{xi:.1f}" cy="{yi:.1f}" r="8" fill="none" stroke="#b42318" stroke-width="2"/>')
            if xi - last_label > 80:
                out.append(f'<text class="reglabel" x="{xi:.1f}" y="{TOP - 4}" font-size="10" fill="#b42318" '
                           f'text-anchor="middle" font-weight="700">regression</text>')
                last_label = xi
            out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def _engines(s: Series) -> str:
    return "|".join(dict.fromkeys(r.engine_version for r in s.runs))


def _attrs(s: Series) -> str:
    model, draft = s.key[0], s.key[1]
    return f'data-model="{_e(model)}" data-draft="{_e(draft)}" data-engines="{_e(_engines(s))}"'


def _verdict_cell(r: Run) -> str:
    if r.verdict is None:
        return '<td class="l ok">first run</td>'
    cls = {"regression": "reg", "improvement": "imp"}.get(r.verdict, "ok")
    word = {"ok": "within noise"}.get(r.verdict, r.verdict)
    return f'<td class="l {cls}" title="{_e(r.why)}">{_e(word)}</td>'


def runs_table(s: Series) -> str:
    rows = []
    for r in reversed(s.runs):
        al = _n(r.al, "{:.3f}") + (f" [{r.al_ci[0]:.3f}, {r.al_ci[1]:.3f}]" if r.al_ci else "")
        tps = _n(r.tps, "{:.1f}") + (f" [{r.tps_ci[0]:.1f}, {r.tps_ci[1]:.1f}]" if r.tps_ci else "")
        rows.append(f'<tr data-run="{_e(r.iso)}"><td class="l">{_e(r.stamp)}</td><td class="l">{_e(r.engine_version)}</td>'
                    f'<td class="l mono">{_e(r.image)}</td><td class="l">{_e(r.tool)}</td><td>{al}</td>'
                    f'<td>{_pct(r.al_rel)}</td><td>{tps}</td><td>{_pct(r.tps_rel)}</td>{_verdict_cell(r)}'
                    f'<td class="l mono">{_e(r.where)}</td></tr>')
    head = "".join(f'<th class="{c}">{n}</th>' for n, c in [
        ("run (UTC)", "l"), ("engine", "l"), ("image", "l"), ("tool", "l"), ("Average_AL", ""), ("Δ", ""),
        ("Output TPS", ""), ("Δ", ""), ("vs previous", "l"), ("where", "l")])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def series_card(s: Series) -> str:
    charts = (chart(s, "Average_AL", lambda r: r.al, lambda r: r.al_ci, lambda r: r.al_flag, "{:.2f}", "Average_AL")
              + chart(s, "Output TPS", lambda r: r.tps, lambda r: r.tps_ci, lambda r: r.tps_flag, "{:.0f}",
                      "Output TPS"))
    opened = " open" if len(s.runs) <= 8 else ""
    return (f'<section class="series" id="{anchor(s)}" {_attrs(s)} data-key="{_e(json.dumps(s.key))}">'
            f"<h3>{_e(s.label)}</h3><div class=\"charts\">{charts}</div>"
            f"<details{opened}><summary>{len(s.runs)} run(s): engine version, image, tool version</summary>"
            f"{runs_table(s)}</details></section>")


def latest_table(h: History) -> str:
    rows = []
    for s in h.series:
        r = s.runs[-1]
        model, draft, method, k, forced, ds, t, c = s.key
        rows.append(f'<tr {_attrs(s)}><td class="l"><a href="#{anchor(s)}">{_e(short(model))}</a></td>'
                    f'<td class="l">{_e(short(draft))}</td><td class="l">{_e(method)}</td>'
                    f'<td>{_e(k)}{"" if not forced else " · " + _e(forced)}</td>'
                    f'<td class="l">{_e(ds)}</td><td>{t:g}</td><td>{c}</td><td>{len(s.runs)}</td>'
                    f'<td class="l">{_e(r.stamp)}</td><td class="l">{_e(r.engine_version)}</td>'
                    f'<td>{_n(r.al, "{:.3f}")}</td><td>{_pct(r.al_rel)}</td><td>{_n(r.tps, "{:.1f}")}</td>'
                    f'<td>{_pct(r.tps_rel)}</td>{_verdict_cell(r)}</tr>')
    head = "".join(f'<th class="{c}">{n}</th>' for n, c in [
        ("model", "l"), ("draft", "l"), ("method", "l"), ("k", ""), ("dataset", "l"), ("T", ""), ("C", ""),
        ("runs", ""), ("latest (UTC)", "l"), ("engine", "l"), ("Average_AL", ""), ("Δ AL", ""),
        ("Output TPS", ""), ("Δ TPS", ""), ("vs previous", "l")])
    return f'<table id="latest"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def regressions_list(h: History) -> str:
    items = [f'<li {_attrs(s)} data-run="{_e(r.iso)}"><a href="#{anchor(s)}">{_e(s.label)}</a>: begins at the run of '
             f'{_e(r.stamp)} (engine {_e(r.engine_version)}, {_e(r.tool)}): {_e(r.why)}</li>'
             for s in h.series for r in s.regressions]
    if not items:
        return '<p class="sub">No regression between consecutive runs.</p>'
    return f'<ul class="regs">{"".join(items)}</ul>'


def _select(id_: str, label: str, values: list[str], show=lambda v: v) -> str:
    opts = "".join(f'<option value="{_e(v)}">{_e(show(v))}</option>' for v in values)
    return f'<label for="{id_}">{label}<select id="{id_}"><option value="">all</option>{opts}</select></label>'


def render(h: History, source: str, note: str = "") -> str:
    models = sorted({s.key[0] for s in h.series})
    drafts = sorted({s.key[1] for s in h.series})
    engines = sorted({r.engine_version for s in h.series for r in s.runs})
    n_runs = sum(len(s.runs) for s in h.series)
    n_reg = sum(len(s.regressions) for s in h.series)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    left = "".join(f"<li><span class=mono>{_e(w)}</span>: {_e(why)}</li>" for w, why in h.left_out)
    filters = (f'<div class="filters">{_select("f-model", "model", models, short)}'
               f'{_select("f-draft", "draft", drafts, short)}{_select("f-engine", "engine version", engines)}'
               f'<span class="sub"><span id="shown">{len(h.series)}</span> of {len(h.series)} series shown</span></div>')
    legend = ('<p class="legend">Each point is a run (its tooltip: time, value, engine version, image, tool version); '
              'bars: the 95% interval over the run\'s repeats; blue: this project\'s runs, orange: specdec_bench\'s; '
              '<b style="color:#b42318">▼ regression</b>: where a regression begins, judged against the previous run '
              'by launcher.compare (Average_AL: paired per-request interval and threshold; Output TPS: against the '
              'repeats, or beyond the single-run threshold).</p>')
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
            '<meta name=viewport content="width=device-width,initial-scale=1">'
            f"<title>Speculative decoding history</title><style>{CSS}</style></head><body><main>"
            f"<h1>Speculative decoding history</h1>"
            f'<p class="sub">{_e(source)} · {n_runs} run(s) in {len(h.series)} series · {n_reg} regression(s) · '
            f"generated {stamp}{(' · ' + _e(note)) if note else ''}</p>"
            f"{filters}<h2>Latest run per configuration</h2>{latest_table(h)}"
            f"<h2>Regressions</h2>{regressions_list(h)}"
            f"<h2>Series</h2>{legend}{''.join(series_card(s) for s in h.series)}"
            + (f"<h2>Left out ({len(h.left_out)})</h2><ul>{left}</ul>" if left else "")
            + f"<script>{JS}</script></main></body></html>\n")
