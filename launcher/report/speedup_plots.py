"""The report's speedup figures (sweep.baseline=true): speedup against
concurrency, one curve per k, and the predicted speedup beside the measured
one. Rows are launcher.speedup.analysis.analyse()'s ``points``."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path, PurePosixPath

from launcher.engines.forced_acceptance import label
from launcher.report.plots import _MARKERS, _save, concurrency_axes, panel_grid, plt
from launcher.results.identity import tag


def _g(d) -> float | None:
    return (d or {}).get("geomean")


def curves(rows: list[dict]) -> dict[tuple, dict[str, list[dict]]]:
    """Per (dataset, temperature) panel, one curve per configuration: k x forced level x server (two
    servers or two forced levels are never one curve), named ("k=3 forced AL 2 [+ --async-scheduling]",
    the draft's name first where a panel holds several), its rows in concurrency order."""
    panels: dict[tuple, dict[tuple, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["speedup"].get("throughput") is not None:
            key = (r["k"], (r.get("configuration") or {}).get("label") or "", label(r.get("forced_acceptance")),
                   str(r.get("draft") or ""), (r.get("forced_acceptance") or {}).get("length") or 0)
            panels[(r["dataset"], r["temperature"])][key].append(r)
    out: dict[tuple, dict[str, list[dict]]] = {}
    for panel, cs in panels.items():
        drafts = {c[3] for c in cs}
        out[panel] = {}
        for (k, server, forced, draft, _), rs in sorted(cs.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1], kv[0][4],
                                                                                      kv[0][2], kv[0][3])):
            name = (f"{PurePosixPath(draft).name} " if len(drafts) > 1 and draft else "") + f"k={k}" \
                + (f" {forced}" if forced else "") + tag(server)
            out[panel][name] = sorted(rs, key=lambda r: r["concurrency"])
    return out


def speedup_vs_concurrency(rows: list[dict], path: Path) -> Path | None:
    """One panel per (dataset, temperature); per configuration (``curves``) the throughput speedup
    (solid) and the per-request end-to-end speedup with its 95% interval (dotted); the baseline is
    the line at 1."""
    panels = curves(rows)
    if not panels:
        return None
    keys = sorted(panels)
    fig, axes = panel_grid(len(keys), 5.6, 3.9)
    for ax, key in zip(axes, keys):
        for i, (name, rs) in enumerate(panels[key].items()):
            cs = [r["concurrency"] for r in rs]
            line, = ax.plot(cs, [r["speedup"]["throughput"] for r in rs], marker=_MARKERS[i % len(_MARKERS)],
                            label=f"{name} throughput")
            e2e = [(r["concurrency"], r["speedup"].get("e2e_speedup")) for r in rs if _g(r["speedup"].get("e2e_speedup"))]
            if e2e:
                xs = [c for c, _ in e2e]
                ys = [s["geomean"] for _, s in e2e]
                lo = [y - (s["lo"] if s.get("lo") is not None else y) for y, (_, s) in zip(ys, e2e)]
                hi = [(s["hi"] if s.get("hi") is not None else y) - y for y, (_, s) in zip(ys, e2e)]
                ax.errorbar(xs, ys, yerr=[lo, hi], color=line.get_color(), ls=":", capsize=3, alpha=0.8,
                            label=f"{name} per-request e2e (95% CI)")
        ax.axhline(1.0, color="black", lw=1.0, ls="--", label="baseline = 1")
        concurrency_axes(ax, {r["concurrency"] for rs in panels[key].values() for r in rs},
                         f"{key[0]}, T={key[1]:g}", "concurrency", "speedup over no speculation", legend_size=7)
    fig.suptitle("Speedup vs concurrency (one curve per k and forced level; baseline = 1)", fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


def predicted_vs_measured(rows: list[dict], path: Path) -> Path | None:
    """Measured speedups (throughput; and what the step times measure, E / r)
    against the speedup the acceptance predicts (Leviathan et al. 2023), one
    colour per k; on the diagonal they agree, below it overheads eat the gain."""
    pts = [r for r in rows if (r.get("prediction") or {}).get("predicted_speedup") is not None]
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(6.2, 5.0))
    ks = sorted({r["k"] for r in pts})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    vals = [1.0]
    for ki, k in enumerate(ks):
        for key, label, marker, fill in (("measured_throughput_speedup", "throughput", "o", True),
                                         ("measured_step_speedup", "step times", "s", False)):
            sel = [r for r in pts if r["k"] == k and r["prediction"].get(key) is not None]
            xs = [r["prediction"]["predicted_speedup"] for r in sel]
            ys = [r["prediction"][key] for r in sel]
            vals += xs + ys
            col = colours[ki % len(colours)]
            ax.scatter(xs, ys, marker=marker, s=40, label=f"k={k} measured {label}",
                       facecolors=col if fill else "none", edgecolors=col)
    lo, hi = min(vals) * 0.9, max(vals) * 1.1
    ax.plot([lo, hi], [lo, hi], color="grey", ls="--", lw=1, label="measured = predicted")
    ax.axhline(1.0, color="black", lw=0.6)
    ax.axvline(1.0, color="black", lw=0.6)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("predicted speedup  E / (k c + 1)")
    ax.set_ylabel("measured speedup")
    ax.set_title("Predicted (from the acceptance) vs measured speedup, every point\n"
                 "below the diagonal: overheads, not the draft", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)
