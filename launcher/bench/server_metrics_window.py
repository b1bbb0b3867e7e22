"""Each point's server counters over its own time (several points in one AIPerf run).

AIPerf 0.13 labels every periodic scrape of the servers' /metrics with the phase it believes
is running, and a phase's window in `phases/<name>/server_metrics.json` runs from its baseline
scrape to the last scrape labelled with it. It starts the next phase the moment a phase ends,
and labelled scrapes of the next phase's first seconds with the phase before: one point's
counters then held part of the next point's requests (measured: a concurrency-1 point's
window ended 0.4 to 4 s into the concurrency-2 point, and counted up to twice its own prompt
tokens; docs/results-layout.md, "Server metrics per point").

The run also writes every scrape with its time (`server_metrics_export.jsonl`, AIPerf's
``jsonl`` format), and an idle phase sits between two points (aiperf_runner.gap_phase), so a
scrape falls between them. Here a point's counters and histogram counts and sums are taken
again between the last scrape at or before its start and the last scrape at or before the next
point's start (the run's last scrape for the last point). Everything is pure but ``read_scrapes``.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping, Optional

SOURCE = "server_metrics_export.jsonl: the last scrape at or before the point's start to the last at or before the next point's start"

Scrape = tuple[int, dict]  # (timestamp_ns, metrics: family -> [samples])


def read_scrapes(path: Path) -> dict[str, list[Scrape]]:
    """AIPerf's per-scrape JSONL: endpoint URL -> its scrapes in time order. Empty when absent.
    Read once per file version: every point of a run cuts its window from the same file."""
    try:
        st = path.stat()
    except OSError:
        return {}
    return _read_scrapes(str(path), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=2)
def _read_scrapes(path: str, mtime_ns: int, size: int) -> dict[str, list[Scrape]]:
    out: dict[str, list[Scrape]] = {}
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            rec = json.loads(line)
            out.setdefault(rec["endpoint_url"], []).append((int(rec["timestamp_ns"]), rec.get("metrics") or {}))
        except (ValueError, KeyError, TypeError):
            continue
    for scrapes in out.values():
        scrapes.sort(key=lambda s: s[0])
    return out


def _at_or_before(scrapes: list[Scrape], t_ns: Optional[int]) -> Optional[Scrape]:
    found = None
    for s in scrapes:
        if t_ns is not None and s[0] > t_ns:
            break
        found = s
    return found


def _sample(scrape: Optional[Scrape], name: str, labels: Optional[Mapping]) -> Optional[dict]:
    if scrape is None:
        return None
    want = dict(labels or {})
    for s in scrape[1].get(name) or []:
        if dict(s.get("labels") or {}) == want:
            return s
    return None


def _delta(end: Optional[dict], start: Optional[dict], key: str) -> Optional[float]:
    if end is None or end.get(key) is None:
        return None
    return float(end[key]) - float((start or {}).get(key) or 0.0)


def window(export: dict, scrapes: Mapping[str, list[Scrape]], start_ns: int, end_ns: Optional[int]) -> dict:
    """``export`` (AIPerf's per-phase `metrics` shape: name -> {type, series: [{endpoint_url,
    labels, stats}]}) with each counter's ``total`` and each histogram's ``count``, ``sum`` and
    ``avg`` taken between the last scrape of its endpoint at or before ``start_ns`` and the last
    at or before ``end_ns`` (None: its last). A series whose endpoint has no scrape keeps
    AIPerf's figures. The other statistics (rates, percentiles) stay AIPerf's."""
    metrics: dict = {}
    changed = 0
    for name, m in (export.get("metrics") or {}).items():
        series = []
        for s in m.get("series") or []:
            eps = scrapes.get(s.get("endpoint_url") or "") or []
            first = _at_or_before(eps, start_ns) or (eps[0] if eps else None)
            last = _at_or_before(eps, end_ns)
            a, b = _sample(first, name, s.get("labels")), _sample(last, name, s.get("labels"))
            stats = dict(s.get("stats") or {})
            if b is not None and first is not None and last is not None and last[0] >= first[0]:
                if b.get("value") is not None and "total" in stats:
                    stats["total"] = _delta(b, a, "value")
                    changed += 1
                elif b.get("count") is not None:
                    stats["count"], stats["sum"] = _delta(b, a, "count"), _delta(b, a, "sum")
                    if "avg" in stats:
                        stats["avg"] = stats["sum"] / stats["count"] if stats["count"] else None
                    changed += 1
            series.append(dict(s, stats=stats))
        metrics[name] = dict(m, series=series)
    summary = dict(export.get("summary") or {})
    summary["window"] = {"start_ns": start_ns, "end_ns": end_ns, "source": SOURCE, "series_rewindowed": changed}
    return dict(export, metrics=metrics, summary=summary)


def next_start(phase_starts: Iterable[tuple[str, int]], name: str) -> Optional[int]:
    """The start of the phase that follows ``name`` among ``phase_starts`` ((name, start_ns) of
    the run's points); None for the last."""
    starts = dict(phase_starts)
    if name not in starts:
        return None
    later = [t for t in starts.values() if t > starts[name]]
    return min(later) if later else None
