"""Where a disaggregated point's time to first token went (topology=disagg): the prefill
server's queue and prefill, the KV transfer, the decode server's own time to its first token,
and what is left of the client's TTFT (the router's hops and HTTP).

The engine exposes these as histograms per server, not per request (vLLM 0.32: no request
carries its own split), so the split is of means over the point's window: each figure is
d(sum) / d(count) of one histogram over the servers of one side, as AIPerf scraped them
(`--server-metrics`). The parts are means of different request sets only where a boundary
scrape moved a request into the neighbouring point's window (docs/disagg.md).

Pure functions over AIPerf's `server_metrics_export.json` ``metrics`` object.
"""
from __future__ import annotations

from typing import Iterable, Optional

from launcher.engines import KvTransferMetrics
from launcher.bench.kv_transfer import series_for, stat_sum
from launcher.bench.prefix_cache import metrics_url

BASIS = ("means over the point's window from each server's histograms (the engine exposes no "
         "per-request split); client TTFT from the requests' records")


def _mean_ms(metrics: dict, name: Optional[str], endpoints: Iterable[str]) -> tuple[Optional[float], int]:
    """(mean in ms, count) of a seconds histogram summed over ``endpoints``' series."""
    if not name:
        return None, 0
    series = series_for(metrics, name, set(endpoints))
    count, total = int(stat_sum(series, "count")), stat_sum(series, "sum")
    return (round(1000.0 * total / count, 3) if count else None), count


def _side(topology: dict, prefix: str) -> list[str]:
    return [metrics_url(s["url"]) for s in topology.get("servers") or []
            if str(s.get("role", "")).startswith(prefix) and s.get("url")]


def ttft_split(metrics: dict, topology: Optional[dict], client_ttft_ms: Optional[float] = None, *,
               names: Optional[KvTransferMetrics]) -> Optional[dict]:
    """The point's TTFT split in ms (None when the engine names no such histograms, the
    point is not disaggregated, or no server's histograms counted a request). ``names``: the
    serving engine's counter names (None: it has none)."""
    n = names
    if n is None or not topology or not n.first_token_time:
        return None
    prefill, decode = _side(topology, "prefill"), _side(topology, "decode")
    queue, _ = _mean_ms(metrics, n.queue_time, prefill)
    compute, _ = _mean_ms(metrics, n.prefill_time, prefill)
    prefill_ttft, p_count = _mean_ms(metrics, n.first_token_time, prefill)
    transfer, t_count = _mean_ms(metrics, n.xfer_time, decode)
    decode_ttft, d_count = _mean_ms(metrics, n.first_token_time, decode)
    if not p_count and not d_count:
        return None
    out = {"basis": BASIS, "prefill_requests": p_count, "decode_requests": d_count, "transfers": t_count,
           "prefill_queue_ms": queue, "prefill_compute_ms": compute, "prefill_server_ttft_ms": prefill_ttft,
           "kv_transfer_ms": transfer, "decode_server_ttft_ms": decode_ttft,
           "client_ttft_ms": round(client_ttft_ms, 3) if client_ttft_ms is not None else None,
           "router_and_http_ms": None}
    if None not in (client_ttft_ms, prefill_ttft, decode_ttft):
        # the client's wait less the two servers' own: the router's hops, HTTP and (de)tokenizing
        out["router_and_http_ms"] = round(client_ttft_ms - prefill_ttft - decode_ttft, 3)
    return out


def client_mean_ttft_ms(records: Iterable) -> Optional[float]:
    """The mean TTFT (ms) of the point's successful requests, from their records."""
    ttfts = [r.ttft_ms for r in records if getattr(r, "ttft_ms", None) is not None]
    return sum(ttfts) / len(ttfts) if ttfts else None


def one_line(split: Optional[dict]) -> str:
    """The split in one line, for reading a point's record."""
    if not split:
        return "no TTFT split (no server histograms)"

    def f(v):
        return "?" if v is None else f"{v:.1f}"
    return (f"TTFT {f(split['client_ttft_ms'])} ms = prefill server {f(split['prefill_server_ttft_ms'])} "
            f"(queue {f(split['prefill_queue_ms'])}, prefill {f(split['prefill_compute_ms'])}) + decode server "
            f"{f(split['decode_server_ttft_ms'])} (KV transfer {f(split['kv_transfer_ms'])}) + router and HTTP "
            f"{f(split['router_and_http_ms'])}")
