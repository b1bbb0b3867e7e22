"""Speedup against acceptance length, drafters side by side (``launcher.speedup A B ... --out F``).

One panel per (dataset, T, C); in each, one line per drafter configuration and machine: its
forced levels' measured speedups (markers with their 95 % intervals) and the line the step cost
predicts, AL / step cost, from AL 1 to the largest level measured; the dotted line at 1x is the
baseline, where a line crosses it is the break-even AL. Reads the comparison of
launcher.speedup.across only.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from launcher.speedup.across import drafter_words


def panels(comp: dict) -> dict[tuple, list[dict]]:
    """The comparison's rows by (dataset, T, C), in that order."""
    out: dict[tuple, list[dict]] = {}
    for r in comp["rows"]:
        out.setdefault((r["dataset"], r["temperature"], r["concurrency"]), []).append(r)
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])))


def curve(row: dict) -> Optional[tuple[list[float], list[float]]]:
    """The predicted line of one row: AL from 1 to its largest measured level, speedup AL / cost."""
    cost = (row.get("step_cost") or {}).get("mean")
    levels = [float(x) for x in row["levels"]]
    if not cost or not levels:
        return None
    top = max(levels)
    xs = [1 + i * (top - 1) / 20 for i in range(21)]
    return xs, [x / cost for x in xs]


def draw(comp: dict, legend: dict[str, str], path: Path) -> Optional[Path]:
    """Write the figure; None when the comparison has no forced point."""
    groups = panels(comp)
    if not groups:
        return None
    import matplotlib  # lazy: heavy; only the comparison's plot needs it
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: as above

    n = len(groups)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n + 2.8, 4.0), squeeze=False, sharey=True)
    handles = {}
    colours = {}
    for ax, ((ds, t, c), rows) in zip(axes[0], groups.items()):
        for r in rows:
            name = f"{drafter_words(r)} on {legend.get(r['machine'], r['machine'])}"
            colour = colours.setdefault(name, f"C{len(colours) % 10}")
            line = curve(r)
            if line:
                (h,) = ax.plot(*line, color=colour, lw=1.2)
                handles.setdefault(name, h)
            for lv, f in r["levels"].items():
                sp = f["speedup"]
                al = f.get("server_al") or float(lv)
                err = None if sp.get("lo") is None else [[sp["mean"] - sp["lo"]], [sp["hi"] - sp["mean"]]]
                h = ax.errorbar([al], [sp["mean"]], yerr=err, fmt="o", color=colour, ms=4, capsize=2)
                handles.setdefault(name, h)
        ax.axhline(1.0, color="0.5", ls=":", lw=1)
        ax.set_title(f"{ds} T={t:g} C={c}", fontsize=9)
        ax.set_xlabel("acceptance length (server)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("Output TPS speedup over the baseline")
    # the legend beside the panels, off the data
    fig.legend(list(handles.values()), list(handles), loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8,
               frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
