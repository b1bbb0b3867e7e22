"""Each point's server counters over its own time (launcher/bench/server_metrics_window.py):
AIPerf's per-phase window ran into the next point; the counters are taken again from the
run's scrapes, cut at the points' starts."""
from __future__ import annotations

import json

import pytest

from launcher.bench import aiperf_runner as ar
from launcher.bench import server_metrics_window as smw

EP = "http://h:1/metrics"


def _scrape(t: int, hits: float, drafts_count: float, drafts_sum: float) -> dict:
    return {"endpoint_url": EP, "timestamp_ns": t, "metrics": {
        "vllm:prefix_cache_hits": [{"value": hits}],
        "vllm:request_success": [{"labels": {"finished_reason": "stop"}, "value": hits / 10},
                                 {"labels": {"finished_reason": "length"}, "value": 100 + hits}],
        "vllm:kv_xfer_time": [{"count": drafts_count, "sum": drafts_sum, "buckets": {"+Inf": drafts_count}}]}}


# scrapes at t=10 (before point 1), 20, 30 (point 1 running), 40 (in the gap), 50, 60 (point 2), 70 (the final one)
SCRAPES = [(10, 0, 0, 0.0), (20, 100, 1, 0.5), (30, 200, 2, 1.0), (40, 300, 3, 1.5), (50, 350, 4, 3.5),
           (60, 400, 5, 4.0), (70, 500, 6, 4.5)]


def _export(total: float, count: float, s: float) -> dict:
    return {"summary": {"source": "phases/p/server_metrics.json"}, "metrics": {
        "vllm:prefix_cache_hits": {"type": "counter", "series": [{"endpoint_url": EP, "stats": {"total": total, "rate": 1.0}}]},
        "vllm:request_success": {"type": "counter", "series": [
            {"endpoint_url": EP, "labels": {"finished_reason": "length"}, "stats": {"total": total}}]},
        "vllm:kv_xfer_time": {"type": "histogram", "series": [
            {"endpoint_url": EP, "stats": {"count": count, "sum": s, "avg": s / count, "p50": 0.1}}]},
        "vllm:other": {"type": "counter", "series": [{"endpoint_url": "http://elsewhere/metrics",
                                                      "stats": {"total": 7.0}}]}}}


def test_a_point_is_cut_at_the_next_points_start_and_the_last_runs_to_the_last_scrape(tmp_path):
    path = tmp_path / "server_metrics_export.jsonl"
    path.write_text("".join(json.dumps(_scrape(*s)) + "\n" for s in reversed(SCRAPES)) + "not json\n")
    scrapes = smw.read_scrapes(path)
    assert [t for t, _ in scrapes[EP]] == [10, 20, 30, 40, 50, 60, 70]  # in time order, the bad line skipped
    # point 1 from t=15 (baseline: the scrape at 10) to the next point's start at 45 (last scrape: 40);
    # AIPerf's own window had run to 60
    one = smw.window(_export(400.0, 5.0, 4.0), scrapes, 15, 45)
    m = one["metrics"]
    assert m["vllm:prefix_cache_hits"]["series"][0]["stats"] == {"total": 300.0, "rate": 1.0}  # rates stay AIPerf's
    assert m["vllm:request_success"]["series"][0]["stats"]["total"] == 300.0  # the series with its labels
    hist = m["vllm:kv_xfer_time"]["series"][0]["stats"]
    assert (hist["count"], hist["sum"], hist["avg"], hist["p50"]) == (3.0, 1.5, 0.5, 0.1)
    assert m["vllm:other"]["series"][0]["stats"]["total"] == 7.0  # no scrape of its endpoint: AIPerf's figure
    assert one["summary"]["window"]["series_rewindowed"] == 3 and one["summary"]["source"].startswith("phases/")
    # point 2 from 45 (baseline 40) to the run's last scrape
    two = smw.window(_export(0, 1, 1), scrapes, 45, None)["metrics"]
    assert two["vllm:prefix_cache_hits"]["series"][0]["stats"]["total"] == 200.0
    assert two["vllm:kv_xfer_time"]["series"][0]["stats"]["count"] == 3.0
    # nothing before the start: the first scrape is the baseline
    assert smw.window(_export(0, 1, 1), scrapes, 5, 25)["metrics"]["vllm:prefix_cache_hits"]["series"][0][
        "stats"]["total"] == 100.0
    assert smw.read_scrapes(tmp_path / "absent.jsonl") == {}


def test_next_start_is_the_following_points():
    starts = [("p1_c1", 100), ("p3_c4", 300), ("p2_c2", 200)]
    assert smw.next_start(starts, "p1_c1") == 200
    assert smw.next_start(starts, "p3_c4") is None
    assert smw.next_start(starts, "absent") is None


def test_collect_phase_rewindows_where_the_run_wrote_its_scrapes(tmp_path):
    g = tmp_path / "group"
    for name, start in (("p1_c1", 15), ("p2_c2", 45), ("gap_1", 35)):
        (g / "phases" / name).mkdir(parents=True)
        (g / "phases" / name / "profile_export_aiperf.json").write_text("{}")
        (g / "phases" / name / "server_metrics.json").write_text(json.dumps({
            "phase": {"start_ns": start, "end_ns": start + 20}, "data": {"phase_name": name, "endpoint_summaries": {
                "h:1": {"endpoint_url": EP, "metrics": {"vllm:prefix_cache_hits": {
                    "type": "counter", "series": [{"stats": {"total": 400.0}}]}}}}}}))
    (g / "profile_export.jsonl").write_text("")
    (g / ar.SCRAPES_FILE).write_text("".join(json.dumps(_scrape(*s)) + "\n" for s in SCRAPES))
    assert ar.collect_phase(g, "p1_c1", tmp_path / "p1") is None
    export = json.loads((tmp_path / "p1" / "server_metrics_export.json").read_text())
    # cut at p2's start (45), not the gap's (35): the gap is idle and belongs to the point before it
    assert export["metrics"]["vllm:prefix_cache_hits"]["series"][0]["stats"]["total"] == pytest.approx(300.0)
    assert export["summary"]["window"]["end_ns"] == 45
    # without the scrapes, AIPerf's window as it was
    (g / ar.SCRAPES_FILE).unlink()
    assert ar.collect_phase(g, "p1_c1", tmp_path / "p1b") is None
    export = json.loads((tmp_path / "p1b" / "server_metrics_export.json").read_text())
    assert export["metrics"]["vllm:prefix_cache_hits"]["series"][0]["stats"]["total"] == 400.0
    assert "window" not in export["summary"]
