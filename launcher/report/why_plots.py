"""The "why" page's figure: speedup against acceptance length, one panel per drafter
(configuration, launcher.speedup.why) and (dataset, T), one colour per concurrency.

Per concurrency: the forced points (the speedup over the repeats with its 95 % interval, at the
server's AL), the speedup the forced runs predict at every AL with its interval as a band (each
request's prefill and verify steps: launcher.speedup.at_al.model_predict), the break-even (the
step cost, where AL / step cost crosses 1) and the points measured with the real drafter (stars). Rows are launcher.speedup.analysis.analyse()'s.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from launcher.report.plots import _MARKERS, _save, legend_beside, panel_grid, plt
from launcher.speedup.at_al import model_predict
from launcher.speedup.break_even import point_al


def _err(r: dict) -> tuple[float, float]:
    rep, y = r.get("throughput_repeats") or {}, r["speedup"]["throughput"]
    return (y - rep["lo"], rep["hi"] - y) if rep.get("lo") is not None else (0.0, 0.0)


def speedup_vs_al(analysis: dict, path: Path) -> Path | None:
    """The figure, or None when no point has both an AL and a speedup."""
    rows = [r for r in analysis.get("points") or [] if point_al(r) and r["speedup"].get("throughput")]
    if not rows:
        return None
    panels: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        panels[(r.get("drafter") or r["job"], r["dataset"], r["temperature"])].append(r)
    costs = {(c["drafter"], c["dataset"], c["temperature"], c["concurrency"]): c
             for c in analysis.get("step_costs") or []}
    keys = sorted(panels, key=str)
    fig, axes = panel_grid(len(keys), 6.0, 4.2)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, key in zip(axes, keys):
        conf, ds, t = key
        cs = sorted({r["concurrency"] for r in panels[key]})
        top = max(2.5, 1.25 * max(point_al(r) for r in panels[key]))  # room past the measured ALs, not to k + 1
        for i, c in enumerate(cs):
            col = colours[i % len(colours)]
            mine = [r for r in panels[key] if r["concurrency"] == c]
            forced = [r for r in mine if r.get("forced_acceptance")]
            real = [r for r in mine if not r.get("forced_acceptance")]
            if forced:
                ax.errorbar([point_al(r) for r in forced], [r["speedup"]["throughput"] for r in forced],
                            yerr=list(zip(*[_err(r) for r in forced])), fmt=_MARKERS[0], color=col, capsize=3,
                            label=f"C={c} forced")
            if real:
                ax.errorbar([point_al(r) for r in real], [r["speedup"]["throughput"] for r in real],
                            yerr=list(zip(*[_err(r) for r in real])), fmt="*", ms=11, color=col, capsize=3,
                            label=f"C={c} measured (real drafter)")
            cost = costs.get((conf, ds, t, c))
            if cost:
                xs = [1.0 + j * (top - 1.0) / 40 for j in range(41)]
                preds = [model_predict(rows, cost, x) for x in xs]
                ax.plot(xs, [p["speedup"] for p in preds], color=col, lw=1.2, label=f"C={c} predicted")
                if preds[0]["lo"] is not None:
                    ax.fill_between(xs, [p["lo"] for p in preds], [p["hi"] for p in preds], color=col, alpha=0.15)
                ax.plot([cost["step_cost"]], [1.0], marker="|", ms=14, mew=2, color=col, ls="none",
                        label=f"C={c} break-even (AL = step cost)")
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        ax.set_xlim(left=1.0)
        ax.set_ylim(bottom=0.0)
        ax.set_title(f"{conf}\n{ds}, T={t:g}", fontsize=9)
        ax.set_xlabel("acceptance length (server AL)")
        ax.set_ylabel("throughput speedup over the baseline")
        ax.grid(alpha=0.3)
    legend_beside(fig, axes)
    fig.suptitle("Speedup vs acceptance length: forced points, the prediction across ALs, break-even at 1", fontsize=11)
    fig.tight_layout()
    return _save(fig, path)
