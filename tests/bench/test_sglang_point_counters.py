"""An SGLang point reads SGLang's counters (issue 52): the benchmark takes the engine from the
job spec and hands it to every point, which reads the server's window with that engine's
counter names and words a missing acceptance with that engine's hint. No step falls back to
vLLM's names (tests/test_owners_engine_flags.py checks that nothing has a default engine)."""
from __future__ import annotations

import json

import pytest

from launcher.bench import aiperf_runner as ar
from launcher.bench.bench_run import BenchRun, from_job
from launcher.bench.cli import serving_engine
from launcher.bench.run_context import PointContext
from launcher.bench.metrics import RecordError, acceptance_rate
from launcher.contracts.job import BenchSpec, JobSpec, PointSpec
from launcher.contracts.server_ready import ServerReady
from launcher.engines import get_engine

SGL, VLLM = get_engine("sglang"), get_engine("vllm")


def sglang_job(tmp_path) -> JobSpec:
    return JobSpec(recipe="r", server_id="s", job_dir=str(tmp_path), model="/m", served_name="t",
                   server_command="python3 -m sglang.launch_server", server_flags=[], engine="sglang",
                   bench=BenchSpec(model="t", tokenizer="/m", save_dir=str(tmp_path)),
                   points=[PointSpec("mtbench", 0.0, 1)])


def export(tmp_path, counters: dict[str, float]):
    """An AIPerf server-metrics export of one server whose counters moved by ``counters``."""
    metrics = {name: {"type": "counter", "series": [{"endpoint_url": "http://127.0.0.1:8000/metrics",
                                                     "labels": {}, "stats": {"total": total}}]}
               for name, total in counters.items()}
    (tmp_path / "server_metrics_export.json").write_text(json.dumps({"metrics": metrics}))


def test_an_sglang_point_reads_sglangs_counters(tmp_path):
    job = sglang_job(tmp_path)
    run = from_job(job, "speculative", "http://127.0.0.1:8000")
    engine = serving_engine(run, None)
    assert engine is SGL  # the spec's engine, not a default one
    ctx = PointContext(run=run, engine_version=None, server_ready=ServerReady(), job=job, engine=engine)
    assert ctx.engine.metrics == SGL.metrics != VLLM.metrics
    # the window: 36 verify steps, 144 tokens emitted over 3 requests -> 144 - 3 - 36 = 105 accepted drafts
    export(tmp_path, {"sglang:spec_verify_calls": 36.0, "sglang:generation_tokens": 144.0,
                      "sglang:num_requests": 3.0})
    window = ar.prometheus_window(tmp_path, ctx.engine.metrics)
    assert (window["num_drafts"], window["num_accepted_tokens"]) == (36.0, 105.0)
    assert ar.prometheus_window(tmp_path, VLLM.metrics) is None  # vLLM's names find nothing in SGLang's export


def test_the_flag_form_names_its_engine_or_takes_the_job_folders(tmp_path):
    job = sglang_job(tmp_path)
    assert serving_engine(BenchRun(bench=job.bench, url="http://x", engine="sglang"), None) is SGL
    assert serving_engine(BenchRun(bench=job.bench, url="http://x"), job) is SGL  # the folder's job.json


def test_a_missing_acceptance_is_worded_with_the_serving_engines_hint():
    record = {"metadata": {"conversation_id": "a", "turn_index": 0, "benchmark_phase": "profiling",
                           "request_start_ns": 0},
              "metrics": {"output_sequence_length": {"value": 5, "unit": "tokens"},
                          "time_to_first_token": {"value": 10.0, "unit": "ms"}}}
    with pytest.raises(RecordError, match="no spec_decode_acceptance") as err:
        acceptance_rate([record], "mtbench", ["a"], ["writing"], max_tokens=None,
                        acceptance_hint=SGL.acceptance_hint())
    assert SGL.acceptance_hint() in str(err.value) and VLLM.acceptance_hint() not in str(err.value)
