"""Each disaggregated server's own prefix cache over a point's window (topology=disagg):
where the router sent a conversation's later turns shows as prefix-cache hits on the
prefill server that computed its earlier turns (docs/disagg.md, "Router policies").

Pure functions over AIPerf's `server_metrics_export.json` ``metrics`` object (AIPerf scrapes
every server's /metrics over the point's window: `--server-metrics`). Counts are tokens:
``queries`` looked up in the server's prefix cache, ``hits`` found there.
"""
from __future__ import annotations

from typing import Optional, Sequence

from launcher.engines import KvTransferMetrics


def metrics_url(server_url: str) -> str:
    return server_url.rstrip("/") + "/metrics"


def scrape_urls(decode_metrics_urls: Sequence[str], topology: Optional[dict]) -> list[str]:
    """What AIPerf scrapes besides the router: the decode servers' /metrics (acceptance, KV
    transfer) and every prefill server's (its prefix cache), each once, decode first."""
    out = list(decode_metrics_urls or ())
    for s in (topology or {}).get("servers") or []:
        u = metrics_url(s["url"]) if s.get("url") else None
        if u and u not in out:
            out.append(u)
    return out


def _total(metrics: dict, name: Optional[str], endpoint: str) -> Optional[int]:
    if not name or name not in metrics:
        return None
    found = [s for s in (metrics[name] or {}).get("series") or [] if s.get("endpoint_url") == endpoint]
    if not found:
        return None
    return int(round(sum(float((s.get("stats") or {}).get("total") or 0.0) for s in found)))


def prefix_cache_window(metrics: dict, topology: Optional[dict], router_policy: Optional[str] = None, *,
                        names: Optional[KvTransferMetrics]) -> Optional[dict]:
    """Per server (prefill0, prefill1, decode0, ...): prefix-cache queries and hits (tokens)
    over the window, and the prefill servers' totals. None when no server's counters were
    scraped (an aggregated server, or an engine without these counters). ``names``: the serving
    engine's counter names (None: it has none)."""
    n = names
    if n is None or not n.prefix_cache_hits or not topology:
        return None
    per_server = []
    for s in topology.get("servers") or []:
        if not s.get("url"):
            continue
        ep = metrics_url(s["url"])
        q, h = _total(metrics, n.prefix_cache_queries, ep), _total(metrics, n.prefix_cache_hits, ep)
        if q is None and h is None:
            continue
        per_server.append({"server": s.get("role"), "queries": q or 0, "hits": h or 0,
                           "hit_rate": round((h or 0) / q, 4) if q else None})
    if not per_server:
        return None
    prefill = [s for s in per_server if str(s["server"]).startswith("prefill")]
    q, h = sum(s["queries"] for s in prefill), sum(s["hits"] for s in prefill)
    return {"router_policy": router_policy, "servers": per_server,
            "prefill_queries": q, "prefill_hits": h, "prefill_hit_rate": round(h / q, 4) if q else None}


def one_line(window: Optional[dict]) -> str:
    """`prefill0 40/120, prefill1 0/96 (cache_aware)`: hits/queries per server, in tokens."""
    if not window:
        return "-"
    per = ", ".join(f"{s['server']} {s['hits']}/{s['queries']}" for s in window["servers"]
                    if str(s["server"]).startswith("prefill"))
    return per + (f" ({window['router_policy']})" if window.get("router_policy") else "")
