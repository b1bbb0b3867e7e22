"""The report's speedup section (sweep.baseline=true): the figures, the best-k
table with the vLLM schedule, and predicted vs measured per point. Each part shows what
applies to the folder, or one line saying why it does not: forced points are never best-k
candidates, and the E / (k c + 1) model needs the drafter's own acceptance, so forced levels
are checked against the prediction from their configuration's other levels instead
(launcher.report.held_out_section)."""
from __future__ import annotations

import json
from pathlib import Path

from launcher.contracts.job import point_dir_name
from launcher.report import held_out_section
from launcher.report.markup import esc as _e, figures, num as _num
from launcher.results.identity import tag
from launcher.report.speedup_plots import predicted_vs_measured, speedup_vs_concurrency
from launcher.speedup.predict import DraftCost, unresolved_cost


def _g(d) -> float | None:
    return (d or {}).get("geomean")


def _ci(d) -> str:
    if not d or d.get("geomean") is None:
        return "–"
    if d.get("lo") is None:
        return f"{d['geomean']:.2f}" + ("" if d.get("paired", True) else " (unpaired)")
    return f"{d['geomean']:.2f} [{d['lo']:.2f}, {d['hi']:.2f}]"


def _server(row: dict) -> str:
    """What the row's server changes from the folder's others (" [+ --async-scheduling]"), "" when alone."""
    return _e(tag((row.get("configuration") or {}).get("label")))


def _beats(v) -> str:
    return {True: '<span class="st-complete">yes</span>', False: '<span class="st-failed">no</span>'}.get(
        v, '<span class="sub">cannot tell</span>')


def _forced_only(analysis: dict) -> bool:
    return all(r.get("forced_acceptance") for r in analysis["points"])


def best_k_table(analysis: dict) -> str:
    if not analysis["best_k"]:
        why = ("every point here ran at a forced acceptance, which measures the serving system, not a drafter"
               if _forced_only(analysis) else "no point ran with its drafter's own acceptance")
        return (f'<p class="sub">No best k: {_e(why)}; forced points are never candidates '
                f'(<a href="{held_out_section.WHY_PAGE}">why each speedup is what it is</a>).</p>')
    ks = sorted({int(k) for c in analysis["best_k"] for k in c["candidates"]})
    head = ["dataset", "T", "concurrency", "best k"] + [f"Output TPS k={k}" for k in ks] + \
           ["speedup", "beats baseline (beyond noise)"]
    rows = []
    for c in analysis["best_k"]:
        excluded = set(c.get("noisy_excluded") or [])
        note = " ~ all noisy" if c.get("all_noisy") else ""
        n = c.get("repeats") or 1
        cells = [_e(c["dataset"]) + _server(c), f"{c['temperature']:g}", str(c["concurrency"]),
                 f"<b>{c['k']}</b>{note}" + (f" (median − MAD over {n} repeats)" if n > 1 else " (one repeat)")
                 + (f' <span class="warn">{_e(c["suspect"])}</span>' if c.get("suspect") else "")]
        cells += [_num(c["candidates"].get(str(k)), 1) + (" ~ noisy, excluded" if k in excluded else "") for k in ks]
        cells += [_num(c["speedup"], 2) + ("×" if c["speedup"] is not None else ""), _beats(c["beats_baseline"])]
        rows.append("<tr>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>")
    table = (f'<table class="bestk"><thead><tr>{"".join(f"<th>{_e(h)}</th>" for h in head)}</tr></thead>'
             f'<tbody>{"".join(rows)}</tbody></table>')
    scheds = "".join(
        f"<p><b>{_e(s['dataset'])}, T={s['temperature']:g}</b>{_server(s)} (vLLM <code>--speculative-config</code> keys):</p>"
        f"<pre>{_e(json.dumps(s['speculative_config']))}</pre>" for s in analysis["schedules"])
    return table + scheds


def prediction_table(analysis: dict) -> str:
    head = ["point", "k", "E tokens/step", "step cost (target steps)", "draft cost c", "verify cost v",
            "predicted", "measured (step times)", "measured decode [95% CI]", "measured throughput",
            "TTFT ratio", "e2e latency ratio [95% CI]", "paired requests", "diagnosis"]
    rows = []
    mine = [r for r in analysis["points"] if not r.get("forced_acceptance")]  # forced: the held-out check below
    if not mine:
        return ""
    for r in sorted(mine, key=lambda r: (r["dataset"], r["temperature"], r["concurrency"], r["k"] or 0)):
        pr, sp = r["prediction"], r["speedup"]
        cost = pr.get("draft_cost") or {}
        cells = [_e(point_dir_name(r["dataset"], r["temperature"], r["concurrency"])) + _server(r), str(r["k"]),
                 _num(r["acceptance"]["expected_tokens_per_step"], 3), _num(r["step_time"]["ratio"], 3),
                 _num(cost.get("c"), 3), _num(cost.get("v"), 3), _num(pr.get("predicted_speedup"), 2),
                 _num(pr.get("measured_step_speedup"), 2), _ci(sp.get("decode")), _num(sp.get("throughput"), 2),
                 _ci(sp.get("ttft_ratio")), _ci(sp.get("e2e_ratio")), str(sp.get("paired_requests")),
                 _e(pr.get("diagnosis") or "")]
        rows.append("<tr>" + "".join(f'<td{" class=l" if i in (0, len(cells) - 1) else ""}>{x}</td>'
                                     for i, x in enumerate(cells)) + "</tr>")
    methods = sorted({(r["prediction"].get("draft_cost") or {}).get("method", "") for r in mine} - {""})
    return (f'<table class="pvm"><thead><tr>{"".join(f"<th>{_e(h)}</th>" for h in head)}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>'
            f'<p class="sub">Predicted = E / (k c + 1), the expected-tokens-per-step over cost-per-step model of '
            f"Leviathan et al. 2023, with E from the measured per-position acceptance and c from the measured "
            f"step times ({_e('; '.join(methods))}). Ratios are speculative / baseline, geometric means over "
            f"requests paired by question; see docs/speedup.md.</p>")


def no_prediction(points: list[dict]) -> str:
    """Why no point has a predicted speedup: each draft-cost fit's reason (``unresolved_cost``)."""
    costs = [(r.get("prediction") or {}).get("draft_cost") for r in points]
    why = sorted({unresolved_cost(DraftCost(**c)) for c in costs if c} - {None})
    return "; ".join(why) or "no point has both an acceptance histogram and a draft cost"


def speedup_section(analysis: dict | None, out: Path) -> str:
    """The whole section; empty when the results hold no baseline."""
    if not analysis or not analysis.get("points"):
        return ""
    predicted = predicted_vs_measured(analysis["points"], out / "speedup_predicted_vs_measured.png")
    made = [(speedup_vs_concurrency(analysis["points"], out / "speedup_vs_concurrency.png"),
             "Throughput speedup (solid) and per-request end-to-end speedup with its 95% interval (dotted) "
             "against concurrency, one curve per k and forced level; the dashed line at 1 is the matched baseline.",
             True),
            (predicted, "Measured speedup against the speedup the measured acceptance predicts.", False)]
    figs = [(p.relative_to(out).as_posix(), cap, wide) for p, cap, wide in made if p is not None]
    forced = sum(1 for r in analysis["points"] if r.get("forced_acceptance"))
    missing = "" if predicted is not None or _forced_only(analysis) else \
        f'<p class="warn">No predicted-vs-measured figure: {_e(no_prediction(analysis["points"]))}</p>'
    forced_note = (f'<p class="sub">{forced} forced point(s): forced acceptance sets what a step accepts, so the '
                   "E / (k c + 1) model, which needs the drafter's own per-position acceptance, does not apply to "
                   "them; each forced level is predicted from its configuration's other levels instead.</p>"
                   + held_out_section.table(analysis)) if forced else ""
    return (f'<section id="speedup"><h2>Speedup over the matched baseline</h2>'
            f'<p class="sub">Baseline job(s): {_e(", ".join(analysis["baseline_jobs"]))}: the same server '
            f"without speculation, the same client points.</p>"
            + "".join(f'<p class="warn">No speedup for {_e(x)}</p>' for x in analysis.get("skipped") or [])
            + f"{figures(figs)}{missing}"
            f"<h3>Best k per load</h3>{best_k_table(analysis)}"
            f"<h3>Predicted vs measured</h3>{prediction_table(analysis)}{forced_note}</section>")
