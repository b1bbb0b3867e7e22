"""The report's PNG figures, drawn with matplotlib's Agg backend.

Each function takes already-loaded points (only usable ones: the caller drops
failed points), writes one PNG and returns its path, or returns None when there
is nothing to draw. ``series`` arguments map a label (a job name, or "" for a
single job) to that job's points.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from statistics import mean

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from launcher.report.marks import LEGEND, SUSPECT, point_marks  # noqa: E402
from launcher.results.job_dir import Point  # noqa: E402

DPI = 110
_MARKERS = "osD^vP*X"


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight", facecolor="white")
    plt.close(fig)
    return path


def panel_grid(n: int, width: float, height: float):
    """A figure of ``n`` panels, two a row, each ``width`` x ``height`` inches: (figure, its
    first ``n`` axes); the grid's spare panel is hidden."""
    cols = min(2, n)
    nrows = (n + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(width * cols, height * nrows), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def concurrency_axes(ax, concurrencies, title: str, xlabel: str, ylabel: str, legend_size: int = 8) -> None:
    """A panel against concurrency: log2 x axis ticked at the measured concurrencies, its
    title, labels, grid and legend."""
    ticks = sorted(concurrencies)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [str(x) for x in ticks])
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=legend_size)


def _tlabel(t: float) -> str:
    return f"T={t:g}"


def _join(*parts: str) -> str:
    return " · ".join(p for p in parts if p)


def pareto_front(xy: list[tuple[float, float]]) -> set[int]:
    """Indices of the points no other point beats on both axes (higher is better on both)."""
    front = set()
    for i, (x, y) in enumerate(xy):
        if not any((x2 >= x and y2 >= y) and (x2 > x or y2 > y) for j, (x2, y2) in enumerate(xy) if j != i):
            front.add(i)
    return front


E2E_NOTE = ("hollow: no decode speed could be timed (every request's tokens after the first arrived at once); "
            "x is its end-to-end speed, output tokens / request time")


def per_user_speed(p: Point) -> tuple[float, bool] | None:
    """(x, estimated) of a point on the throughput plot: its per-user decode speed, else (a point
    whose decode speed could not be timed: few or no samples) its end-to-end speed, marked as such;
    None when it has neither. A point with few samples is drawn and marked, never dropped."""
    if p.decode_tps_p50 is not None:
        return p.decode_tps_p50, False
    if p.e2e_tps_p50 is not None:
        return p.e2e_tps_p50, True
    return None


def drawable(p: Point) -> bool:
    """The point has both axes of the throughput plot."""
    return p.output_tps_per_gpu is not None and per_user_speed(p) is not None


def throughput_pareto(series: dict[str, list[Point]], path: Path) -> Path | None:
    """Output TPS/gpu against per-user decode tok/s, one panel per dataset,
    one curve per (job, temperature) through its concurrencies (every drawable point:
    launcher.report.plots.drawable; those without a decode speed hollow, at their end-to-end speed)."""
    usable = {lab: [p for p in pts if drawable(p)] for lab, pts in series.items()}
    datasets = sorted({p.dataset for pts in usable.values() for p in pts})
    if not datasets:
        return None
    fig, axes = plt.subplots(1, len(datasets), figsize=(5.2 * len(datasets), 4.2), squeeze=False)
    any_estimated = False
    for ax, ds in zip(axes[0], datasets):
        groups: dict[tuple[str, float], list[Point]] = defaultdict(list)
        for lab, pts in usable.items():
            for p in pts:
                if p.dataset == ds:
                    groups[(lab, p.temperature)].append(p)
        all_xy, all_pts = [], []
        for gi, ((lab, t), pts) in enumerate(sorted(groups.items())):
            pts.sort(key=lambda p: p.concurrency)
            speeds = [per_user_speed(p) for p in pts]
            xs = [x for x, _ in speeds]
            ys = [p.output_tps_per_gpu for p in pts]
            (line,) = ax.plot(xs, ys, marker=_MARKERS[gi % len(_MARKERS)], label=_join(lab, _tlabel(t)))
            est = [(x, y) for (x, e), y in zip(speeds, ys) if e]
            if est:  # hollow: the end-to-end speed stands in for a decode speed no request could time
                any_estimated = True
                ax.scatter([x for x, _ in est], [y for _, y in est], s=64, marker=_MARKERS[gi % len(_MARKERS)],
                           facecolors="white", edgecolors=line.get_color(), linewidths=1.5, zorder=4)
            for p, (x, e), y in zip(pts, speeds, ys):
                ax.annotate(f"c{p.concurrency} {point_marks(p).symbols}".rstrip() + (" e2e" if e else ""), (x, y),
                            textcoords="offset points", xytext=(5, 4), fontsize=8)
                tps = point_marks(p).tps
                if tps is not None and p.num_gpus:  # the 95% interval over the repeats
                    ax.errorbar([x], [y], yerr=[[y - tps.lo / p.num_gpus], [tps.hi / p.num_gpus - y]],
                                fmt="none", ecolor="gray", capsize=3)
            all_xy += list(zip(xs, ys))
            all_pts += pts
        front = pareto_front(all_xy)
        if front and len(all_xy) > 1:
            ax.scatter([all_xy[i][0] for i in front], [all_xy[i][1] for i in front], s=160,
                       facecolors="none", edgecolors="black", linewidths=1.0, label="Pareto-optimal", zorder=3)
        ax.margins(x=0.1, y=0.1)   # room for the concurrency labels
        ax.set_title(ds)
        ax.set_xlabel("per-user decode tok/s (p50 over requests)")
        ax.set_ylabel("Output TPS / GPU")
        ax.grid(alpha=0.3)
    legend_beside(fig, axes[0])
    fig.suptitle("Throughput vs per-user speed across concurrency (labels: concurrency)", fontsize=11)
    _legend_marks(fig, E2E_NOTE if any_estimated else "")
    return _save(fig, path)


def legend_beside(fig, axes) -> None:
    """One legend for every panel, right of the figure's panels: never on the data (the saved
    figure's tight box takes it in). Labels shown in several panels appear once."""
    seen: dict[str, object] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="upper left", bbox_to_anchor=(1.0, 0.95), fontsize=8,
                   frameon=False)


def _legend_marks(fig, extra: str = "") -> None:
    """The marks' meaning under a figure (launcher.report.marks)."""
    fig.text(0.01, 0.005, LEGEND + (f"; {extra}" if extra else ""), fontsize=6.5, ha="left", va="bottom", wrap=True)
    fig.subplots_adjust(bottom=0.2)


def al_vs_temperature(series: dict[str, list[Point]], path: Path) -> Path | None:
    """Average_AL against temperature, one line per (job, dataset): the mean over
    concurrencies, with bars spanning their min..max. None with fewer than two temperatures."""
    lines: dict[tuple[str, str], dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    suspect: dict[float, str] = {}  # temperature -> its mark (! a suspicion, D a known defect)
    for lab, pts in series.items():
        for p in pts:
            if p.average_al is not None:
                lines[(lab, p.dataset)][p.temperature].append(p.average_al)
                mk = point_marks(p)
                if mk.suspect:
                    suspect[p.temperature] = mk.suspect_mark
    if len({t for by_t in lines.values() for t in by_t}) < 2:
        return None  # one temperature is a single dot on a degenerate axis: nothing to show against temperature
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for gi, ((lab, ds), by_t) in enumerate(sorted(lines.items())):
        ts = sorted(by_t)
        ys = [mean(by_t[t]) for t in ts]
        lo = [y - min(by_t[t]) for t, y in zip(ts, ys)]
        hi = [max(by_t[t]) - y for t, y in zip(ts, ys)]
        ax.errorbar(ts, ys, yerr=[lo, hi], marker=_MARKERS[gi % len(_MARKERS)], capsize=4, label=_join(lab, ds))
    for t in sorted(suspect):  # the known-answer probe failed here: the engine, not the draft
        ax.axvline(t, color="red", alpha=0.3, linestyle="--")
        ax.annotate(f"{suspect[t]} suspect T" if suspect[t] == SUSPECT else f"{suspect[t]} known defect",
                    (t, ax.get_ylim()[1]), fontsize=8, color="red", ha="center", va="top")
    ax.set_xlabel("temperature")
    ax.set_ylabel("Average_AL (tokens per step)")
    ax.set_title("Acceptance length vs temperature\n(mean over concurrencies; bars: min–max)", fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def category_al(points: list[Point], path: Path) -> Path | None:
    """Category_AL as grouped bars (one group per category, one bar per
    temperature; mean over concurrencies), one panel per dataset."""
    data: dict[str, dict[str, dict[float, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for p in points:
        for cat, v in p.category_al.items():
            data[p.dataset][cat][p.temperature].append(v)
    if not data:
        return None
    datasets = sorted(data)
    width_in = max(6.4, 0.9 * max(len(c) for c in data.values()) + 2)
    fig, axes = plt.subplots(len(datasets), 1, figsize=(width_in, 3.4 * len(datasets)), squeeze=False)
    for ax, ds in zip(axes[:, 0], datasets):
        cats = list(data[ds])
        temps = sorted({t for c in cats for t in data[ds][c]})
        w = 0.8 / len(temps)
        for ti, t in enumerate(temps):
            xs = [ci - 0.4 + w * (ti + 0.5) for ci in range(len(cats))]
            ys = [mean(data[ds][c][t]) if data[ds][c].get(t) else 0.0 for c in cats]
            bars = ax.bar(xs, ys, width=w, label=_tlabel(t))
            ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
        ax.set_xticks(range(len(cats)), cats, rotation=25 if len(cats) > 4 else 0, ha="right" if len(cats) > 4 else "center")
        pad = max(0.0, (3 - len(cats)) / 2)  # keep bars narrow when there are few categories
        ax.set_xlim(-0.6 - pad, len(cats) - 0.4 + pad)
        ax.set_ylabel("Category_AL")
        ax.set_title(f"{ds}: acceptance length per category", fontsize=11)
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.margins(y=0.15)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def pooled_histogram(points: list[Point], path: Path) -> Path | None:
    """Acceptance_Length_Histogram summed over points, per temperature, as the
    share of steps that emitted 1, 2, ... tokens."""
    pooled: dict[float, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for p in points:
        for k, n in p.histogram.items():
            pooled[p.temperature][k] += n
    pooled = {t: h for t, h in pooled.items() if sum(h.values()) > 0}
    if not pooled:
        return None
    lengths = sorted({k for h in pooled.values() for k in h})
    temps = sorted(pooled)
    w = 0.8 / len(temps)
    fig, ax = plt.subplots(figsize=(max(6.4, 0.7 * len(lengths) + 3), 4.0))
    for ti, t in enumerate(temps):
        h = pooled[t]
        total = sum(h.values())
        mean_len = sum(k * n for k, n in h.items()) / total
        xs = [i - 0.4 + w * (ti + 0.5) for i in range(len(lengths))]
        ax.bar(xs, [h.get(k, 0) / total for k in lengths], width=w,
               label=f"{_tlabel(t)}  ({total} steps, mean {mean_len:.2f})")
    ax.set_xticks(range(len(lengths)), [str(k) for k in lengths])
    ax.set_xlabel("tokens emitted per step (chunk length; prefill chunks included)")
    ax.set_ylabel("share of steps")
    ax.set_title("Pooled acceptance-length histogram (all datasets and concurrencies)", fontsize=11)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)
