"""SGLang behind the engine seam: argv per algorithm, its Prometheus names, its
per-request meta_info, and the recipe errors of engine=sglang.

The Prometheus text and the meta_info below are built by hand from the metric names, types
and fields in SGLang 0.5.17's source (srt/observability/metrics_collector.py,
srt/managers/tokenizer_manager.py; docs/sglang.md); a real server's replies are checked in
tests/engines/test_sglang_recorded.py and test_sglang_checks.py.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from launcher.bench.known_answer import verdict
from launcher.bench.metrics import counter_deltas, parse_prometheus_text, prometheus_al
from launcher.bench.stream_chunks import stats_from_chunks
from launcher.engines import AcceptanceSource, EngineError, get_engine
from launcher.engines.sglang import ACCEPT_LENGTH_GAUGE
from launcher.login.errors import ConfigError
from launcher.contracts.job import JobSpec

SGL = get_engine("sglang")
CMD = "python3 -m sglang.launch_server"


def argv(cfg: dict, flags=()) -> list[str]:
    return JobSpec(recipe="r", server_id="s", job_dir="/j", model="/t", served_name="t", server_command=CMD,
                   server_flags=list(flags), speculative_config=cfg, engine="sglang",
                   acceptance_flags=SGL.acceptance_flags(AcceptanceSource.STREAM_CHUNKS)).server_argv("h", 1, engine=SGL)


def value(a: list[str], flag: str) -> str:
    return a[a.index(flag) + 1]


def test_eagle3_argv():
    a = argv({"method": "eagle3", "model": "/d", "num_speculative_tokens": 3})
    assert a[:5] == ["python3", "-m", "sglang.launch_server", "--model-path", "/t"]
    assert value(a, "--speculative-algorithm") == "EAGLE3" and value(a, "--speculative-draft-model-path") == "/d"
    assert (value(a, "--speculative-num-steps"), value(a, "--speculative-eagle-topk"),
            value(a, "--speculative-num-draft-tokens")) == ("3", "1", "4")
    assert "--enable-metrics" in a and a[-4:] == ["--host", "h", "--port", "1"]
    assert "--speculative-config" not in a


def test_standalone_argv_and_the_self_draft_probe():
    cfg = SGL.self_draft_config("/t", 4, "0.5.17")
    a = argv(cfg)
    assert value(a, "--speculative-algorithm") == "STANDALONE" and value(a, "--speculative-draft-model-path") == "/t"
    assert value(a, "--speculative-num-steps") == "4" and value(a, "--speculative-num-draft-tokens") == "5"
    # 0.5.17 refuses rejection sampling (sampled drafts) for STANDALONE: the argmax is drafted
    assert "--speculative-use-rejection-sampling" not in a and not SGL.capabilities("0.5.17").probabilistic_drafting
    with pytest.raises(EngineError):
        SGL.speculative_flags({**cfg, "use_rejection_sampling": True})
    e = argv({"method": "eagle3", "model": "/d", "num_speculative_tokens": 3, "use_rejection_sampling": True})
    assert "--speculative-use-rejection-sampling" in e


def test_ngram_argv_has_no_draft_and_no_steps():
    a = argv({"method": "ngram", "num_speculative_tokens": 4, "ngram_max_bfs_breadth": 1})
    assert value(a, "--speculative-algorithm") == "NGRAM" and value(a, "--speculative-num-draft-tokens") == "5"
    assert "--speculative-draft-model-path" not in a and "--speculative-num-steps" not in a
    assert value(a, "--speculative-ngram-max-bfs-breadth") == "1"


def test_vllm_only_keys_and_tree_without_size_are_refused_in_one_line():
    for cfg in ({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4},
                {"method": "eagle3", "model": "/d", "num_speculative_tokens": 3, "eagle_topk": 4},
                {"method": "dflash", "model": "/d", "num_speculative_tokens": 3}):
        with pytest.raises(EngineError) as e:
            SGL.speculative_flags(cfg)
        assert "\n" not in str(e.value) and "fix:" in str(e.value)


def test_baseline_drops_every_speculative_flag():
    from launcher.engines.flags import drop_flags
    a = argv({"method": "eagle3", "model": "/d", "num_speculative_tokens": 3})
    rest = drop_flags(a, SGL.speculative_flag_names())
    assert not [x for x in rest if x.startswith("--speculative")] and "--enable-metrics" not in rest


def test_acceptance_comes_from_stream_chunks():
    assert SGL.acceptance_source("auto", "0.5.17") is AcceptanceSource.STREAM_CHUNKS
    with pytest.raises(EngineError) as e:
        SGL.acceptance_source("per_request_stats", "0.5.17")
    assert "stream_chunks" in str(e.value) and "\n" not in str(e.value)
    assert SGL.stream_options(AcceptanceSource.STREAM_CHUNKS)["stream_options"]["continuous_usage_stats"] is True
    assert SGL.capabilities("0.5.17").version_known and not SGL.capabilities("0.5.18").version_known


# Built from srt/observability/metrics_collector.py (0.5.17): counters sglang:spec_verify_calls_total
# (labels: the collector's labels, e.g. model_name), sglang:generation_tokens_total and
# sglang:num_requests_total (labels + is_streaming), all added when a request finishes; gauges
# sglang:spec_accept_length / sglang:spec_accept_rate. Values: 2 streamed requests of 64 tokens
# and 1 non-streamed of 16 after the first scrape; each request's first token is prefill's.
BEFORE = """# HELP sglang:spec_verify_calls_total Number of speculative decoding verification calls.
# TYPE sglang:spec_verify_calls_total counter
sglang:spec_verify_calls_total{model_name="t"} 10.0
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{is_streaming="true",model_name="t"} 31.0
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{is_streaming="true",model_name="t"} 1.0
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="t"} 3.0
"""
AFTER = """# TYPE sglang:spec_verify_calls_total counter
sglang:spec_verify_calls_total{model_name="t"} 46.0
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{is_streaming="true",model_name="t"} 159.0
sglang:generation_tokens_total{is_streaming="false",model_name="t"} 16.0
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{is_streaming="true",model_name="t"} 3.0
sglang:num_requests_total{is_streaming="false",model_name="t"} 1.0
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="t"} 3.5
"""


def test_accepted_drafts_are_derived_from_emitted_tokens():
    before, after = parse_prometheus_text(BEFORE), parse_prometheus_text(AFTER)
    # window: 36 verify steps, 144 tokens, 3 requests -> 144 - 3 - 36 = 105 accepted drafts
    assert counter_deltas(before, after, SGL.metrics) == (36.0, 105.0)
    assert prometheus_al(before, after, SGL.metrics) == pytest.approx(1 + 105 / 36)
    # a gauge is never differenced: the names of the seam are counters only
    assert ACCEPT_LENGTH_GAUGE not in {SGL.metrics.drafts, SGL.metrics.emitted_tokens}
    # absent counters (no speculation, no --enable-metrics): no figure
    assert counter_deltas({}, {}, SGL.metrics) is None


def test_stream_chunks_and_meta_info_count_the_same_request():
    # One request, k=3: prefill token, then verify steps emitting 4, 2, 4, 1 tokens (completion 12).
    chunks = [1, 4, 2, 4, 1]
    from_chunks = stats_from_chunks(chunks, 3)
    # what tokenizer_manager._calculate_spec_decoding_metrics puts in meta_info for it
    # (spec_num_proposed_drafts = verify_ct * (speculative_num_draft_tokens - 1))
    response = {"choices": [{"index": 0, "message": {"content": "x"}, "meta_info": {
        "completion_tokens": 12, "spec_verify_ct": 4, "spec_num_correct_drafts": 7, "spec_num_proposed_drafts": 12,
        "spec_accept_length": 12 / 4, "spec_accept_rate": 7 / 12, "spec_correct_drafts_histogram": [1, 1, 0, 2]}}]}
    stats = SGL.request_stats(response)
    assert stats["num_spec_steps"] == from_chunks["num_spec_steps"] == 4
    assert stats["num_accepted_draft_tokens"] == from_chunks["num_accepted_draft_tokens"] == 7
    assert verdict([stats], 3, 0.0)["al"] == pytest.approx(1 + 7 / 4)
    # SGLang's own spec_accept_length counts the prefill token: 3.0, not 1 + 7/4 = 2.75
    assert response["choices"][0]["meta_info"]["spec_accept_length"] != verdict([stats], 3, 0.0)["al"]
    assert SGL.request_stats({"choices": [{"message": {}}]}) is None


def test_forced_length_travels_as_the_engine_neutral_keys_and_becomes_sglangs_environment():
    """draft.forced_acceptance.length on SGLang: the speculative config carries the same keys as
    vLLM's (so identity, label and verdict read it one way), no flag is made of them, and the
    server's environment gets SGLANG_SIMULATE_ACC_LEN with the token mode that keeps the stream's
    chunks one per verify step."""
    from launcher.engines.forced_acceptance import forced_from_speculative_config
    SGL.forced_acceptance_check("0.5.17", cpu=False)  # no longer refused
    cfg = {"method": "draft_model", "model": "/d", "num_speculative_tokens": 3, **SGL.forced_acceptance_config(2.5, None)}
    assert forced_from_speculative_config(cfg) == {"length": 2.5}
    flags = SGL.speculative_flags(cfg)
    assert not [f for f in flags if "synthetic" in f or "rejection-sample" in f], flags
    assert SGL.speculative_env(cfg) == {"SGLANG_SIMULATE_ACC_LEN": "2.5",
                                        "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token"}
    assert SGL.speculative_env({"method": "draft_model", "model": "/d", "num_speculative_tokens": 3}) == {}
    assert SGL.speculative_env(None) == {}
    with pytest.raises(EngineError) as e:
        SGL.forced_acceptance_config(None, [0.9, 0.5, 0.1])
    assert "length" in str(e.value) and "\n" not in str(e.value)


def test_a_forced_sglang_recipe_plans_the_env_into_its_identity_and_label():
    """The plan of engine=sglang with a forced length: the job's identity says forced AL 2.5 (not
    the unforced draft's), and the node starts the speculative server with the environment."""
    from launcher.engines.forced_acceptance import label
    from launcher.login.plan import make_plan
    cfg = compose("recipe=gpu_smoke", "engine=sglang", "draft=tiny_noisy", "draft.forced_acceptance.length=2.5",
                  "server.kv_cache_memory_bytes=null")
    unforced = compose("recipe=gpu_smoke", "engine=sglang", "draft=tiny_noisy", "server.kv_cache_memory_bytes=null")
    spec = make_plan(cfg, SGL).jobs[0]
    ident = spec.resolved_identity()
    assert ident.forced == {"length": 2.5} and label(ident.forced) == "forced AL 2.5"
    assert make_plan(unforced, SGL).jobs[0].resolved_identity().forced is None
    assert make_plan(unforced, SGL).jobs[0].server_id != spec.server_id
    assert SGL.speculative_env(spec.speculative_config)["SGLANG_SIMULATE_ACC_LEN"] == "2.5"


def test_measured_server_env_is_part_of_the_identity():
    """A server environment setting that changes what is measured (the engine's measured_env)
    enters the run identity's serving settings, so two such runs never pool and their labels
    say what differs; other variables (paths, hub settings) do not."""
    base = dict(recipe="r", server_id="s", job_dir="/j", model="/t", served_name="t", server_command=CMD,
                server_flags=[], engine="sglang", speculative_config={"method": "draft_model", "model": "/d",
                                                                      "num_speculative_tokens": 3})
    plain = JobSpec(**base, env={"HF_HUB_OFFLINE": "1"}).resolved_identity()
    other = JobSpec(**base, env={"HF_HUB_OFFLINE": "1", "SGLANG_SIMULATE_ACC_METHOD": "multinomial"}).resolved_identity()
    assert plain.fingerprint != other.fingerprint
    assert other.differences(plain) == ["+ env SGLANG_SIMULATE_ACC_METHOD multinomial"]
    assert JobSpec(**base, env={}).resolved_identity().fingerprint == plain.fingerprint


def test_sglangs_kv_pool_follows_the_recipes_budget_in_tokens(tmp_path):
    """server.kv_cache_memory_bytes becomes --max-total-tokens: the budget over the KV bytes a
    token takes in the target's and the draft's pools (2 x layers x KV heads x head size x 2 for
    bf16), read from their config.json; unreadable configs give a one-line error with the fix."""
    import json
    from launcher.login.server_args import build_server_argv
    for name, layers in (("t", 4), ("d", 2)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(
            {"num_hidden_layers": layers, "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 512,
             "torch_dtype": "bfloat16"}))
    per_token = 2 * 4 * 2 * 64 * 2 + 2 * 2 * 2 * 64 * 2
    cfg = compose("recipe=gpu_smoke", "engine=sglang", f"model.path={tmp_path / 't'}", "draft=tiny_noisy",
                  f"draft.model={tmp_path / 'd'}", "server.kv_cache_memory_bytes=1G")
    a = build_server_argv(cfg, SGL, "127.0.0.1", 1)
    assert int(value(a, "--max-total-tokens")) == 1024 ** 3 // per_token
    assert "--mem-fraction-static" not in a
    hub = compose("recipe=qwen3_eagle3", "engine=sglang", "server.kv_cache_memory_bytes=20G")
    with pytest.raises(ConfigError) as e:
        build_server_argv(hub, SGL, "127.0.0.1", 1)
    assert "--max-total-tokens" in str(e.value) and "\n" not in str(e.value)


def test_off_loopback_the_key_goes_in_a_private_file_not_on_argv(tmp_path):
    """SGLang reads its key from --api-key or a --config YAML only: the node passes the file
    (0600, outside the run), so an SGLang server bound off loopback is no longer refused."""
    from launcher.node import engine_preflight
    spec = JobSpec(recipe="r", server_id="s", job_dir="/j", model="/t", served_name="t", server_command=CMD,
                   server_flags=[], engine="sglang", engine_version="0.5.17", bind_host="0.0.0.0")
    assert engine_preflight.resolve(spec, {}, SGL, probe=lambda a, env: None).spec.engine_version == "0.5.17"
    how = SGL.server_key("k-123", tmp_path)
    assert how.env == {} and how.argv == ["--config", how.files[0]] and "k-123" not in how.argv
    assert Path(how.files[0]).read_text() == 'api-key: "k-123"\n'


# ------------------------------------------------------------ recipes


def compose(*overrides):
    from launcher.login.config.compose import compose_recipe as _compose
    return _compose(list(overrides))


def test_qwen3_eagle3_on_sglang_renders_sglang_argv():
    from launcher.login.server_args import build_server_argv
    cfg = compose("recipe=qwen3_eagle3", "engine=sglang")
    assert cfg.server.engine == "sglang" and cfg.cluster.container_image == "lmsysorg/sglang:v0.5.17"
    a = build_server_argv(cfg, get_engine("sglang"), "0.0.0.0", 30000)
    assert a[:5] == ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"]
    assert value(a, "--speculative-algorithm") == "EAGLE3" and value(a, "--tp-size") == "1"
    assert value(a, "--context-length") == "8192"
    local = compose("engine=sglang")  # no container on the local cluster
    assert local.cluster.container_image is None


@pytest.mark.parametrize("overrides,field", [
    (("engine=sglang", "draft.method=dflash"), "draft.method"),
    (("engine=sglang", "cluster.container_image=vllm/vllm-openai:v0.32.0"), "cluster.container_image"),
    (("recipe=qwen3_eagle3", "engine=sglang", "server.kv_cache_memory_bytes=20G"), "server.engine"),
    (("engine=sglang", "+server.env.SGLANG_SIMULATE_ACC_LEN=2.5"), "server.env.SGLANG_SIMULATE_ACC_LEN"),
    (("engine=sglang", "draft.forced_acceptance.rates=[0.9,0.5,0.1]"), "draft.forced_acceptance"),
    (("engine=sglang", "bench.acceptance_source=per_request_stats"), "bench.acceptance_source"),
    (("engine=sglang", "draft=ngram"), "draft"),
    (("engine=sglang", "bench.known_answer=true", "bench.known_answer_allow_fail=false",
      "sweep.temperatures=[0,0.7]"), "bench.known_answer"),
])
def test_recipe_errors_name_the_field_and_the_fix(overrides, field):
    """Refused in the login side's one pass: by validation, or (what only the engine's flags can
    say: a KV-cache cap, an ngram draft) by the plan, which builds them once."""
    from launcher.login.prepare import Invalid, prepare
    cfg = compose(*overrides)
    try:
        prepare(cfg)
    except Invalid as invalid:
        errs = [e for e in invalid.errors if str(e).startswith(field)]
    except ConfigError as e:
        errs = [e]
    else:
        errs = []
    assert errs, overrides
    line = str(errs[0])
    assert line.startswith(field) and "fix:" in line and "\n" not in line


def test_sglangs_forced_verdict_counts_one_draw_per_batch_step():
    """SGLang draws one simulated length per verify call of the whole batch, so its counters over
    N per-request steps at concurrency C hold about N / C draws: the tolerance widens by sqrt(C).
    The recorded H100 run (forced 2.5, C=8: 1 + 2390/1642 = 2.456) passes either way; a point 0.08
    off at C=32 fails as 1,642 independent draws and passes as 1,642 / 32 batch draws."""
    from launcher.engines.forced_acceptance import run_verdicts

    def run(point, accepted):
        return [{"dataset": "mtbench", "temperature": 0.0, "points": [point], "num_drafts": 1642.0,
                 "num_accepted_tokens": accepted}]
    assert run_verdicts({"length": 2.5}, 3, run("c8", 2390.0), batch_of={"c8": 8})["verdict"] == "pass"
    off = run("c32", 1642.0 * 1.42)
    per_request, per_batch = run_verdicts({"length": 2.5}, 3, off), run_verdicts({"length": 2.5}, 3, off, {"c32": 32})
    assert per_request["verdict"] == "fail" and per_batch["verdict"] == "pass"
    assert per_batch["runs"][0]["tolerance"] == pytest.approx(per_request["runs"][0]["tolerance"] * 32 ** 0.5, rel=0.01)
    assert SGL.forced_draw_per_batch and not get_engine("vllm").forced_draw_per_batch
