"""The report's fleet figure (docs/fleet.md): per speculative server and (dataset, T), its curve and
its baseline's, output tokens/s per GPU against per-user decode speed, with the gain at equal
per-user speed marked where both were read. Rows are launcher.speedup.fleet.compare's comparisons."""
from __future__ import annotations

from pathlib import Path

from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from launcher.report.plots import _save, panel_grid
from launcher.speedup.fleet_text import KIND_WORDS, title

READ = ("equal", "at least", "at most")  # the kinds that carry a gain


def _curve(ax, rows: list[dict], style: dict, name: str, label_dx: int = 4) -> None:
    rows = sorted(rows, key=lambda r: r["concurrency"])
    xs = [r["per_user_tps"]["mean"] for r in rows]
    ys = [r["tps_per_gpu"]["mean"] for r in rows]
    lo = [y - (r["tps_per_gpu"]["lo"] if r["tps_per_gpu"].get("lo") is not None else y) for y, r in zip(ys, rows)]
    hi = [(r["tps_per_gpu"]["hi"] if r["tps_per_gpu"].get("hi") is not None else y) - y for y, r in zip(ys, rows)]
    ax.errorbar(xs, ys, yerr=[lo, hi], capsize=3, label=name, **style)
    for r, x, y in zip(rows, xs, ys):
        ax.annotate(f"c{r['concurrency']}", (x, y), textcoords="offset points", xytext=(label_dx, 4), fontsize=7,
                    color=style.get("color"), ha="left" if label_dx > 0 else "right")


def marked(c: dict, min_gap: float = 0.04) -> list[dict]:
    """The readings whose gain the figure marks: the baseline's points first, then the asked speeds,
    then the speculative server's, each only where no marked one lies within ``min_gap`` of the
    x range (two marks that close would print over each other)."""
    order = {"baseline": 0, "asked": 1, "speculative": 2}
    cands = sorted((a for a in c["at_speed"] if a["kind"] in READ and a["gain"]),
                   key=lambda a: order[a["anchor"]["side"]])
    xs = [a["per_user_tps"] for a in c["at_speed"]] + [r["per_user_tps"]["mean"] for side in c["points"].values()
                                                       for r in side]
    gap = min_gap * (max(xs) - min(xs)) if xs else 0
    kept: list[dict] = []
    for a in cands:
        if all(abs(a["per_user_tps"] - k["per_user_tps"]) > gap for k in kept):
            kept.append(a)
    return kept


def equal_speed_curves(comparisons: list[dict], path: Path) -> Path | None:
    """One panel per comparison: the speculative curve (solid) and the baseline's (dashed, black),
    the 95 % interval of each point's throughput over its repeats, an arrow from the baseline up to
    the speculative server at a few per-user speeds both were read at (:func:`marked`) with the gain
    written beside it (dotted from the speculative server's slowest point where that is a lower
    bound), and the speeds only the speculative server reaches shaded."""
    comps = [c for c in comparisons if c["points"]["speculative"] and c["points"]["baseline"]]
    if not comps:
        return None
    fig, axes = panel_grid(len(comps), 6.0, 4.4)
    for ax, c in zip(axes, comps):
        _curve(ax, c["points"]["speculative"], {"color": "tab:blue", "marker": "o", "ls": "-"}, "speculative")
        _curve(ax, c["points"]["baseline"], {"color": "black", "marker": "s", "ls": "--"}, "baseline", label_dx=-5)
        for a in marked(c):  # the gain: an arrow from the baseline's throughput up to the speculative one
            x, ys, yb = a["per_user_tps"], a["speculative"]["tps_per_gpu"]["mean"], a["baseline"]["tps_per_gpu"]["mean"]
            ax.annotate("", xy=(x, ys), xytext=(x, yb), arrowprops={"arrowstyle": "->", "color": "tab:green"})
            if a["speculative"]["at_least"]:  # its slowest point keeps any slower promise: a lower bound
                slow = c["reach"]["speculative"]["slowest"]["per_user_tps"]
                ax.hlines(ys, x, slow, colors="tab:blue", linestyles=":", lw=1)
            ax.annotate(f"{KIND_WORDS[a['kind']]}{a['gain']['mean']:.2f}x", (x, (ys * yb) ** 0.5),
                        textcoords="offset points", xytext=(3, 0), fontsize=7, color="tab:green", va="center")
        above = c.get("only_speculative_above")
        if above is not None:
            fast = c["reach"]["speculative"]["fastest"]["per_user_tps"]
            ax.axvspan(above, fast, color="tab:blue", alpha=0.07, label="only the speculative server reaches")
        ax.set_title(title(c), fontsize=9)
        ax.set_xlabel("per-user decode tok/s (p50 over requests)")
        ax.set_ylabel("output tok/s per GPU (log)")
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle("Throughput per GPU at equal per-user speed (arrows: the gain read there)", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)
