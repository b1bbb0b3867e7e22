"""The report's "At your SLO" section (docs/slo.md): goodput against concurrency per
configuration with the SLO boundary marked, the max load under the SLO per
configuration, and the recommended configuration per load range. Reads
launcher.speedup.analysis.write_slo's slo_summary.json (or the same analysis in memory)."""
from __future__ import annotations

from pathlib import Path

from launcher.report.markup import esc as _e, figures, num as _num
from launcher.report.plots import _MARKERS, _save, concurrency_axes, panel_grid
from launcher.speedup.slo import TIE_REL


def goodput_vs_concurrency(groups: list[dict], path: Path, description: str) -> Path | None:
    """One panel per (dataset, temperature): good requests/s against concurrency, one curve
    per configuration (the baseline dashed); a filled marker met the SLO, an open one did
    not; the dotted vertical line is each configuration's max concurrency under the SLO."""
    groups = [g for g in groups if any(p["goodput_rps"] is not None for c in g["configs"] for p in c["points"])]
    if not groups:
        return None
    fig, axes = panel_grid(len(groups), 5.8, 4.0)
    for ax, g in zip(axes, groups):
        cs_all = set()
        for i, c in enumerate(g["configs"]):
            pts = [p for p in c["points"] if p["goodput_rps"] is not None]
            if not pts:
                continue
            xs = [p["concurrency"] for p in pts]
            cs_all |= set(xs)
            base = c["label"] == "baseline"
            line, = ax.plot(xs, [p["goodput_rps"] for p in pts], ls="--" if base else "-",
                            color="black" if base else None, lw=1.6,
                            label=f"{c['label']} (max C under SLO: {c['max_concurrency'] or '–'})")
            mk = _MARKERS[i % len(_MARKERS)]
            for p in pts:
                met = p["verdict"] == "met"
                ax.plot([p["concurrency"]], [p["goodput_rps"]], marker=mk, ms=7, color=line.get_color(),
                        mfc=line.get_color() if met else "white", ls="none")
            na = [p for p in pts if (p.get("schedule_check") or {}).get("applied") is False]
            if na:  # no measurement of the schedule: the engine did not apply it there
                ax.plot([p["concurrency"] for p in na], [p["goodput_rps"] for p in na], marker="x", ms=11,
                        color="red", ls="none", label="schedule not applied by the engine")
            if c["max_concurrency"]:
                ax.axvline(c["max_concurrency"], color=line.get_color(), ls=":", lw=1.2)
        concurrency_axes(ax, cs_all, f"{g['dataset']}, T={g['temperature']:g}",
                         "concurrency (dotted: max under the SLO; open marker: SLO not met)",
                         "goodput (good requests/s)")
    fig.suptitle(f"Goodput at the SLO: {description}", fontsize=10)
    return _save(fig, path)


def _span(r: dict) -> str:
    if r["to"] is None:
        return f"{r['from']} and above"
    return str(r["from"]) if r["to"] == r["from"] else f"{r['from']}–{r['to']}"


def tables(g: dict) -> str:
    concs = sorted({p["concurrency"] for c in g["configs"] for p in c["points"]})
    head = ["configuration", "max concurrency under the SLO", "how sure"] + [f"C={c}" for c in concs]
    rows = []
    for c in g["configs"]:
        by = {p["concurrency"]: p for p in c["points"]}
        na = c.get("schedule_not_applied_at") or []
        cells = [_e(c["label"]), str(c["max_concurrency"] if c["max_concurrency"] is not None else "none"),
                 _e(c.get("max_load_note") or "") + (f' <span class="warn">schedule not applied by the engine at '
                                                     f'C={", ".join(map(str, na))}</span>' if na else "")]
        for x in concs:
            p = by.get(x)
            if p is None or p["goodput_rps"] is None:
                cells.append("–")
                continue
            mark = {"met": "", "failed": " ✗", "noisy": " ~"}.get(p["verdict"] or "", " ?")
            sched = (p.get("schedule_check") or {}).get("note")
            pred = p.get("predicted") or {}
            pred_txt = (f' <span class="sub">(predicted by k={pred["k"]}: {_num(pred.get("goodput_rps"), 2)} req/s, '
                        f'{_num(pred.get("output_tps"), 1)} vs {_num(p.get("output_tps"), 1)} tok/s)</span>'
                        if pred else "")
            cells.append(_num(p["goodput_rps"], 2) + mark + (" probe" if p.get("search_probe") else "")
                         + pred_txt + (f' <span class="warn">{_e(sched)}</span>' if sched else ""))
        rows.append("<tr>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>")
    t1 = (f'<table class="slo"><thead><tr>{"".join(f"<th>{_e(h)}</th>" for h in head)}</tr></thead>'
          f'<tbody>{"".join(rows)}</tbody></table>'
          '<p class="sub">Goodput in good requests/s; ✗ the SLO not met, ~ the repeats disagree (within noise), '
          'probe: a concurrency the max-load search added.</p>')
    recs = "".join(f"<tr><td>{_e(_span(r))}</td><td><b>{_e(r['label'])}</b>"
                   + (f' <span class="sub">({_e(r["note"])})</span>' if r.get("note") else "")
                   + (f' <span class="warn">{_e(r["suspect"])}</span>' if r.get("suspect") else "") + "</td></tr>"
                   for r in g["recommendation"])
    t2 = (f'<table class="slo-rec"><thead><tr><th>load (concurrency)</th><th>recommended</th></tr></thead>'
          f"<tbody>{recs}</tbody></table>")
    return f"<h3>{_e(g['dataset'])}, T={g['temperature']:g}</h3>{t1}<p>Recommended per load range:</p>{t2}"


def slo_section(res: dict | None, out: Path) -> str:
    """The whole section; empty without an SLO."""
    if not res or not res.get("groups"):
        return ""
    p = goodput_vs_concurrency(res["groups"], out / "slo_goodput_vs_concurrency.png", res["description"])
    figs = [] if p is None else [(p.relative_to(out).as_posix(),
                                  "Goodput against concurrency, one curve per configuration (baseline dashed); "
                                  "open markers miss the SLO, dotted lines mark each one's max concurrency "
                                  "under it.", True)]
    ag = res.get("goodput_agrees_with_aiperf") or {}
    agree = (f"Goodput computed from the per-request records agrees with AIPerf's own on {ag['agree']} of "
             f"{ag['points_compared']} points." if ag.get("points_compared") else
             "AIPerf was not given this SLO: goodput computed from the per-request records only.")
    return (f'<section id="slo"><h2>At your SLO</h2>'
            f'<p>SLO: <b>{_e(res["description"])}</b> ({_e(res.get("source") or "")}). A request is good when '
            f"it meets every limit; a point meets the SLO when each limit holds at its percentile. {_e(agree)} "
            f"Ties within noise (or {res.get('tie_rel', TIE_REL):.0%}) go to the simpler configuration: no "
            f"speculation, then the smaller k (docs/slo.md).</p>"
            f"{figures(figs)}{''.join(tables(g) for g in res['groups'])}</section>")
