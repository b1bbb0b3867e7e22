"""The report's disagg section: the parity verdict and both topologies side by side."""
from __future__ import annotations

from launcher.report.html import disagg_block


def test_disagg_block_shows_the_verdict_and_both_sides():
    parity = {"verdict": "fail", "al_tolerance": 0.05,
              "checks": {"outputs_equal_at_t0": True, "al_within_tolerance": False, "every_request_transferred": True},
              "points": [{"point": "mtbench/t0_c1", "disagg": {"Average_AL": 2.07, "TTFT median s": 0.61},
                          "aggregated": {"Average_AL": 2.182, "TTFT median s": 0.055},
                          "kv_transfer": {"external_kv_transfer_tokens": 521, "prompt_tokens": 521},
                          "outputs_equal": True, "extra_verify_steps_per_turn": 1.0}],
              "problems": ["mtbench/t0_c1: Average_AL 2.070 disagg vs 2.182 aggregated (-5.1%, tolerance 5%)"]}
    html = disagg_block(parity)
    assert "Disaggregated vs aggregated" in html and 'badge fail">FAIL' in html and "acceptance per drafted step within 5%: False" in html  # a version-1 file
    assert "<td>2.070</td><td>2.182</td>" in html and "<td>521 / 521</td>" in html and "-5.1%" in html
    assert disagg_block(None) == ""


def test_disagg_block_shows_acceptance_per_drafted_step_and_the_structural_cost():
    parity = {"verdict": "pass", "al_tolerance": 0.05,
              "checks": {"outputs_equal_at_t0": True, "acceptance_within_tolerance": True,
                         "every_request_transferred": True},
              "points": [{"point": "mtbench/t0_c1", "disagg": {"Average_AL": 2.097}, "aggregated": {"Average_AL": 2.213},
                          "kv_transfer": {}, "outputs_equal": True, "extra_verify_steps_per_turn": 1.0,
                          "per_step_al": {"disagg": 2.258929, "aggregated": 2.258929}, "structural_step_cost": -0.05205}],
              "problems": []}
    html = disagg_block(parity)
    assert "acceptance per drafted step within 5%: True" in html
    assert "<td>2.259</td><td>2.259</td><td>-5.2%</td>" in html and "post-transfer step" in html


def test_prefix_cache_block_shows_each_servers_hits_per_point(tmp_path):
    from launcher.report.html import prefix_cache_block
    from launcher.results.job_dir import Job, Point
    from launcher.results.summary import PointRow

    def point(name, p0, p1):
        w = {"router_policy": "cache_aware", "prefill_queries": p0[1] + p1[1], "prefill_hits": p0[0] + p1[0],
             "prefill_hit_rate": (p0[0] + p1[0]) / (p0[1] + p1[1]),
             "servers": [{"server": "prefill0", "hits": p0[0], "queries": p0[1]},
                         {"server": "prefill1", "hits": p1[0], "queries": p1[1]}]}
        return Point(dataset="mtbench", temperature=0.0, concurrency=1, dir=name, status="complete", reason=None,
                     path=tmp_path / name, row=PointRow.from_dict({"prefix_cache": w}))

    job = Job(path=tmp_path, summary={}, points=[point("mtbench/t0_c1", (64, 300), (32, 200))])
    html = prefix_cache_block(job)
    assert "Prefix cache per server" in html and "<th>prefill0 hits / queries</th>" in html
    assert "<td>mtbench/t0_c1</td><td>cache_aware</td><td>64 / 300</td><td>32 / 200</td><td>19.2%</td>" in html
    assert prefix_cache_block(Job(path=tmp_path, summary={}, points=[])) == ""


def test_ttft_split_block_shows_where_each_points_first_token_went(tmp_path):
    import json
    from pathlib import Path

    from launcher.bench.ttft_split import client_mean_ttft_ms, ttft_split
    from launcher.engines import get_engine
    from launcher.report.html import ttft_split_block
    from launcher.results.job_dir import Job, Point
    from launcher.results.records import profiling_records, read_profile_export
    from launcher.results.summary import PointRow

    rec = Path(__file__).parents[1] / "bench" / "data" / "recorded" / "disagg_2p1d"
    ok = profiling_records(read_profile_export(rec / "profile_export.jsonl"))[0]
    split = ttft_split(json.loads((rec / "server_metrics_export.json").read_text())["metrics"],
                       json.loads((rec / "topology.json").read_text()), client_ttft_ms=client_mean_ttft_ms(ok),
                       names=get_engine("vllm").kv_transfer_metrics)
    pt = Point(dataset="mtbench", temperature=0.0, concurrency=1, dir="mtbench/t0_c1", status="complete",
               reason=None, path=tmp_path / "p", row=PointRow.from_dict({"ttft_split": split}))
    html = ttft_split_block(Job(path=tmp_path, summary={}, points=[pt]))
    assert "Time to first token, split (mean ms)" in html and "<th>KV transfer</th>" in html
    cells = [f"{split[k]:.1f}" for k in ("client_ttft_ms", "prefill_queue_ms", "prefill_compute_ms",
                                         "prefill_server_ttft_ms", "kv_transfer_ms", "decode_server_ttft_ms",
                                         "router_and_http_ms")]
    assert "<td>mtbench/t0_c1</td>" + "".join(f"<td>{c}</td>" for c in cells) in html
    assert ttft_split_block(Job(path=tmp_path, summary={}, points=[])) == ""
