"""KV-transfer figures of a disaggregated point (topology=disagg): what the decode
servers' Prometheus counters counted over the point's window, as AIPerf scraped them
(`--server-metrics` names the decode servers' /metrics; the router has none of these).

Pure functions over AIPerf's `server_metrics_export.json` ``metrics`` object. The prompt
tokens of every request a decode server admitted are split by where their KV came from
(vLLM's `prompt_tokens_by_source`): `external_kv_transfer` (moved from a prefill server),
`local_compute` (prefilled on decode itself) and `local_cache_hit` (decode's own prefix
cache). A point in which decode computed or found in its cache any prompt token served some
request (or part of one) without a transfer.
"""
from __future__ import annotations

from typing import Collection, Optional

from launcher.engines import KvTransferMetrics


def series_for(metrics: dict, name: str, endpoints: Optional[Collection[str]]) -> list[dict]:
    m = metrics.get(name) or {}
    return [s for s in m.get("series") or []
            if endpoints is None or s.get("endpoint_url") in endpoints]


def stat_sum(series: list[dict], stat: str) -> float:
    return sum(float((s.get("stats") or {}).get(stat) or 0.0) for s in series)


def kv_transfer_window(metrics: dict, endpoints: Optional[Collection[str]] = None, *,
                       names: Optional[KvTransferMetrics], point_prompt_tokens: Optional[int] = None,
                       point_requests: Optional[int] = None) -> Optional[dict]:
    """The decode servers' KV-transfer counts over a window (None when the export holds no
    `prompt_tokens_by_source`: not a disaggregated server, or not scraped). ``endpoints``:
    only series scraped from these /metrics URLs (the decode servers); ``names``: the engine's
    counter names (the serving engine's; None: it has none). ``point_prompt_tokens``: the prompt
    tokens the point's requests sent (their usage), the check of the window like every other
    window's: a decode server counts a request's prompt once, so a window that counted another
    number of prompt tokens holds a neighbour's request or misses one of the point's (a counter
    updated after the next point began): ``covers_the_point`` is then false and
    ``every_prompt_transferred`` unknown (None). ``point_requests``: the point's requests; where
    every prompt came by transfer each request is one transfer, so a window whose transfer count
    differs (the engine reports its transfers apart from its prompt tokens, and later: seen on a
    loaded 2-core machine, 3 transfers counted of 4 with every prompt token counted) has
    ``transfers_cover_the_point`` false: its transfers, bytes and times are not the point's own."""
    n = names
    if n is None:
        return None
    by_source = series_for(metrics, n.prompt_tokens_by_source, endpoints)
    if not by_source:
        return None
    tokens = {src: int(round(stat_sum([s for s in by_source if (s.get("labels") or {}).get("source") == src], "total")))
              for src in n.prompt_token_sources}
    xfer = series_for(metrics, n.xfer_time, endpoints)
    transfers = int(round(stat_sum(xfer, "count")))
    xfer_s = stat_sum(xfer, "sum")
    out = {
        "prompt_tokens": sum(tokens.values()),
        "external_kv_transfer_tokens": tokens["external_kv_transfer"],
        "local_compute_tokens": tokens["local_compute"],
        "local_cache_hit_tokens": tokens["local_cache_hit"],
        "transfers": transfers,
        "bytes": int(round(stat_sum(series_for(metrics, n.bytes, endpoints), "sum"))),
        "transfer_time_s": round(xfer_s, 6),
        "mean_transfer_ms": round(1000.0 * xfer_s / transfers, 3) if transfers else None,
        "failed_transfers": int(round(stat_sum(series_for(metrics, n.failed_transfers, endpoints), "total"))),
        "expired_requests": int(round(stat_sum(series_for(metrics, n.expired_requests, endpoints), "total"))),
    }
    out["every_prompt_transferred"] = (out["external_kv_transfer_tokens"] > 0 and out["local_compute_tokens"] == 0
                                       and out["local_cache_hit_tokens"] == 0 and out["failed_transfers"] == 0)
    if point_prompt_tokens is not None:
        out["point_prompt_tokens"] = int(point_prompt_tokens)
        out["covers_the_point"] = out["prompt_tokens"] == int(point_prompt_tokens)
        if not out["covers_the_point"]:
            out["every_prompt_transferred"] = None
    if point_requests is not None:
        out["point_requests"] = int(point_requests)
        if out["every_prompt_transferred"]:  # one transfer per request: the count is checkable
            out["transfers_cover_the_point"] = out["transfers"] == int(point_requests)
        else:  # unknown, or some prompt not transferred: no count to expect
            out["transfers_cover_the_point"] = None
    return out


def topology_note(topology: dict) -> dict:
    """What configuration.json records of a disaggregated point's serving topology,
    including how the prefix-cache effect is controlled."""
    keys = ("kind", "prefill", "decode", "router", "kv_connector", "kv_buffer_device", "kv_lease_duration_s",
            "kv_progress_poll_us", "decode_prefix_caching", "router_policy", "placement", "router_node", "decode_draft_model")
    out = {k: topology.get(k) for k in keys}
    out["server_nodes"] = {s.get("role"): s.get("node") for s in topology.get("servers") or []}
    out["prefix_cache_control"] = (
        "prefix caching off on the decode servers: every request's prompt KV comes by transfer"
        if not topology.get("decode_prefix_caching") else
        "prefix caching on on the decode servers: a repeated prefix may be served from decode's cache")
    return out
