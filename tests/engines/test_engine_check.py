"""The node's engine check before the server starts (pure, with a fake version probe)."""
from __future__ import annotations

import json

import pytest

from launcher.engines import EngineError, get_engine
from launcher.node import engine_preflight
from launcher.contracts.job import JobSpec, LaunchSpec
from tests.support.login import with_engine

SPEC_CFG = {"method": "draft_model", "model": "/d", "num_speculative_tokens": 3}
FLAGS = ["--served-model-name", "t"]
ACCEPTANCE = ["--per-request-spec-decode-metrics", "detailed"]
VLLM = get_engine("vllm")  # the spec's engine, as the node job's context holds it


def spec(**kw) -> JobSpec:
    base = dict(recipe="r", server_id="s", job_dir="/tmp/j", model="/m", served_name="t",
                server_command="/v/bin/python -m vllm.entrypoints.openai.api_server", server_flags=FLAGS,
                speculative_config=SPEC_CFG, acceptance_flags=ACCEPTANCE, engine="vllm")
    return JobSpec(**{**base, **kw})


def test_probed_old_version_switches_auto_to_stream_chunks():
    res = engine_preflight.resolve(spec(), {}, VLLM, probe=lambda argv, env: "0.26.0")
    assert res.version_from == "probe" and res.spec.engine_version == "0.26.0"
    assert res.spec.acceptance_source == "stream_chunks"
    assert res.spec.acceptance_flags == [] and "stream_chunks" in res.note
    argv = res.spec.server_argv("127.0.0.1", 8000, engine=VLLM)
    assert "--per-request-spec-decode-metrics" not in argv and "--speculative-config" in argv
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == SPEC_CFG


def test_explicit_stats_on_a_probed_old_version_is_refused():
    with pytest.raises(EngineError, match="no per-request"):
        engine_preflight.resolve(spec(acceptance_requested="per_request_stats"), {}, VLLM,
                             probe=lambda argv, env: "0.26.0")


def test_a_version_in_the_spec_is_not_probed_and_a_container_is_never_probed():
    calls = []
    res = engine_preflight.resolve(spec(engine_version="0.32.0"), {}, VLLM, probe=lambda a, e: calls.append(a))
    assert not calls and res.version_from == "spec" and res.spec.acceptance_source == "per_request_stats"
    assert res.spec.acceptance_flags == ACCEPTANCE and res.note is None
    res = engine_preflight.resolve(spec(launch=LaunchSpec(container_image="img:latest")), {}, VLLM,
                               probe=lambda a, e: calls.append(a))
    assert not calls and res.version_from == "unknown" and res.spec.acceptance_source == "per_request_stats"


def test_probe_version_reads_a_real_command(tmp_path):
    assert engine_preflight.probe_version(["python3", "-c", "print('noise'); print('0.26.0')"], {"PATH": "/usr/bin:/bin"}) \
        == "0.26.0"
    assert engine_preflight.probe_version(["/nonexistent/bin/vllm", "--version"], {}) is None


def test_forced_acceptance_on_a_probed_version_without_it_is_refused_before_the_server():
    forced = {**SPEC_CFG, "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.5}
    with pytest.raises(EngineError, match="no synthetic acceptance"):
        engine_preflight.resolve(spec(speculative_config=forced), {}, VLLM, probe=lambda argv, env: "0.20.1")
    res = engine_preflight.resolve(spec(speculative_config=forced), {}, VLLM, probe=lambda argv, env: "0.26.0")
    assert res.spec.engine_version == "0.26.0"


def test_forced_acceptance_refused_at_login_for_a_stated_old_engine_version():
    from launcher.login.config.compose import compose_recipe as compose
    from launcher.login.config.validate import validate

    cfg = compose(["recipe=gpu_smoke", "draft.forced_acceptance.length=2.5", "server.engine_version=0.20.1"])
    lines = [e.line() for e in validate(*with_engine(cfg))]
    assert any("draft.forced_acceptance" in ln and "0.20.1" in ln for ln in lines), lines
    cfg = compose(["recipe=gpu_smoke", "draft.forced_acceptance.length=2.5", "server.engine_version=0.26.0"])
    assert not [e for e in validate(*with_engine(cfg)) if "forced_acceptance" in e.line()]
