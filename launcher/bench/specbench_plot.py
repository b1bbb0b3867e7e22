"""The figure specdec_bench's SpecBench metric saves beside specbench_results.json
(``acceptance_rate_analysis.png``): three panels over the requests' AL: the mean
(with its standard deviation) per category, the mean per response-length bin
(characters of the answers: 0-100, 100-300, 300-500, 500-1000, 1000+), and the
distribution with its mean. Best effort: without matplotlib no figure is drawn."""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Optional, Sequence

LENGTH_BINS = ((0, 100, "0-100"), (100, 300, "100-300"), (300, 500, "300-500"), (500, 1000, "500-1000"),
               (1000, float("inf"), "1000+"))


def _groups(keys: Sequence, values: Sequence[float]) -> tuple[list, list[float], list[float], list[int]]:
    by: dict = {}
    for k, v in zip(keys, values):
        by.setdefault(k, []).append(v)
    names = list(by)
    return (names, [statistics.mean(by[n]) for n in names],
            [statistics.stdev(by[n]) if len(by[n]) > 1 else 0.0 for n in names], [len(by[n]) for n in names])


def length_bin(chars: float) -> str:
    for lo, hi, name in LENGTH_BINS:
        if lo < chars <= hi:
            return name
    return LENGTH_BINS[0][2]


def draw(path: Path, request_al: Sequence[float], categories: Sequence[str],
         response_chars: Sequence[float]) -> Optional[Path]:
    try:
        import matplotlib  # lazy: matplotlib is heavy (~0.3 s) and optional; only this plot needs it
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # lazy: after matplotlib.use("Agg") (see above)
    except ImportError:
        return None
    if not request_al:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(15, 5))
    fig.suptitle("Speculative Decoding Acceptance Rate Analysis", fontsize=16, fontweight="bold")
    order = sorted(set(categories))
    names, means, sds, counts = _groups(categories, request_al)
    idx = [names.index(c) for c in order]
    panels = [(axes[0], [names[i] for i in idx], [means[i] for i in idx], [sds[i] for i in idx],
               [counts[i] for i in idx], "Category", "Acceptance Rate by Category")]
    bins = [length_bin(c) for c in response_chars]
    b_order = [name for _, _, name in LENGTH_BINS if name in bins]
    bn, bm, bs, bc = _groups(bins, request_al)
    bidx = [bn.index(b) for b in b_order]
    panels.append((axes[1], b_order, [bm[i] for i in bidx], [bs[i] for i in bidx], [bc[i] for i in bidx],
                   "Response Length (characters)", "Acceptance Rate by Response Length"))
    for ax, labels, m, s, n, xlabel, title in panels:
        bars = ax.bar(range(len(labels)), m, yerr=s, capsize=5, alpha=0.8)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=45 if ax is axes[0] else 0, ha="right" if ax is axes[0] else "center")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("Acceptance Rate")
        ax.set_title(title)
        for bar, count in zip(bars, n):
            ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height() + 0.01, f"n={count}",
                    ha="center", va="bottom", fontsize=8)
    ax = axes[2]
    mean = statistics.mean(request_al)
    ax.hist(request_al, bins=20, alpha=0.7, edgecolor="black")
    ax.axvline(mean, color="red", linestyle="--", label=f"Mean: {mean:.3f}")
    ax.set_xlabel("Acceptance Rate")
    ax.set_ylabel("Frequency")
    ax.set_title("Distribution of Acceptance Rates")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path
