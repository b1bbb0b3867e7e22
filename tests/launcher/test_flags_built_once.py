"""Issue 42, items 1, 2 and 5 as behaviour: the plan resolves the engine once and builds each
server's flags once into its job spec, which the node's argv uses as carried; one memory-conflict
check; one set of compare thresholds for every job; validation finds the engine one way."""
from __future__ import annotations

import dataclasses

import pytest

from launcher import engines
from launcher.contracts.compare_thresholds import CompareThresholds
from launcher.engines import AcceptanceSource, get_engine
from launcher.login import plan as plan_module
from launcher.login.config import engine_check
from launcher.login.config.validate import validate
from launcher.login.errors import ConfigError
from launcher.login.plan import make_plan
from launcher.login import prepare as prepare_module
from launcher.login.prepare import Invalid, prepare
from launcher.login.server_args import build_server_flags, server_flags
from tests.support.login import with_engine


def test_the_login_side_resolves_the_engine_once_for_validation_and_the_plan(compose, monkeypatch):
    calls = []
    monkeypatch.setattr(engine_check, "get_engine", lambda name: calls.append(name) or engines.get_engine(name))
    seen = []
    monkeypatch.setattr(prepare_module, "validate", lambda cfg, eng: seen.append(eng) or validate(cfg, eng))
    plan = prepare(compose("recipe=smoke", "sweep.num_speculative_tokens=[1,3]", "sweep.baseline=true"))
    assert calls == ["vllm"] and seen == [engines.get_engine("vllm")] and plan.engine is seen[0]
    assert len(plan.jobs) == 2 and plan.baseline is not None


def test_each_server_configurations_flags_are_built_once(compose, monkeypatch):
    """Validation builds no flags; the plan builds each server configuration's once (issue 52: both
    built them, and validation filtered out the error the second build repeated)."""
    built = []
    monkeypatch.setattr(plan_module, "server_flags", lambda c, eng, k=None: built.append(k) or server_flags(c, eng, k))
    plan = prepare(compose("recipe=smoke", "sweep.num_speculative_tokens=[1,3]", "sweep.baseline=true"))
    assert sorted(built) == [1, 3] and len(plan.jobs) == 2


def test_validation_reports_a_memory_conflict_once(compose):
    cfg = compose("recipe=smoke", "server.kv_cache_memory_bytes=20G")
    cfg.server.extra_args = ["--gpu-memory-utilization", "0.5"]
    with pytest.raises(Invalid) as raised:
        prepare(cfg)
    assert [e.field for e in raised.value.errors] == ["server.extra_args"]


def test_validation_resolves_the_engine_once(compose, monkeypatch):
    calls = []
    monkeypatch.setattr(engine_check, "get_engine", lambda name: calls.append(name) or engines.get_engine(name))
    with pytest.raises(Invalid):  # refused on the CPU
        prepare(compose("recipe=smoke", "draft.forced_acceptance.length=2"))
    assert calls == ["vllm"]


def test_an_unknown_engine_is_one_line_not_a_traceback(compose):
    lines = [e.line() for e in validate(*with_engine(compose("recipe=smoke", "server.engine=nope", "server.extra_args=[--api-key,k]")))]
    assert "server.engine: is 'nope' (fix: use one of: sglang, vllm)" in lines


def test_each_job_carries_its_flags_and_the_node_runs_them_as_carried(compose):
    plan = make_plan(*with_engine(compose("recipe=smoke", "sweep.num_speculative_tokens=[1,3]")))
    eng = plan.engine
    for job in plan.jobs:
        assert job.speculative_flags == eng.speculative_flags(job.speculative_config)
        assert job.acceptance_flags == eng.acceptance_flags(AcceptanceSource(job.acceptance_source))
        argv = job.server_argv("127.0.0.1", 8000, engine=eng)
        # the argv the node ran before the flags were carried: serving + the engine's + acceptance
        before = eng.server_argv(job.server_command, job.model, list(job.server_flags) + eng.speculative_flags(
            job.speculative_config) + list(job.acceptance_flags), "127.0.0.1", 8000)
        assert argv == before
        marked = dataclasses.replace(job, speculative_flags=["--speculative-config", "AS-PLANNED"])
        assert "AS-PLANNED" in marked.server_argv("127.0.0.1", 8000, engine=eng)  # carried, not rebuilt
        assert "AS-PLANNED" not in marked.server_argv("127.0.0.1", 8000, speculative_config=None, engine=eng)


def test_a_spec_without_carried_flags_and_another_config_get_the_engines(compose):
    (job,) = make_plan(*with_engine(compose("recipe=smoke"))).jobs
    eng = get_engine(job.engine)
    unplanned = dataclasses.replace(job, speculative_flags=None)  # run.sh's spec, a job.json of an earlier version
    assert unplanned.server_argv("h", 1, engine=eng) == job.server_argv("h", 1, engine=eng)
    probe = eng.self_draft_config(job.model, 2, "0.32.0")  # the known-answer probe's config, decided on the node
    argv = job.server_argv("h", 1, speculative_config=probe, engine=eng)
    assert eng.speculative_flags(probe)[1] in argv and job.speculative_flags[1] not in argv


def test_the_baseline_records_the_same_compare_thresholds_as_its_jobs(compose):
    plan = make_plan(*with_engine(compose("recipe=smoke", "sweep.baseline=true", "bench.gates.compare_single_run_tps_threshold=0.5",
                             "bench.gates.compare_run_floor=0.07")))
    ths = [j.compare_thresholds for j in plan.jobs + [plan.baseline]]
    assert all(th == ths[0] for th in ths)
    assert set(ths[0]) == {f.name for f in dataclasses.fields(CompareThresholds)}
    assert CompareThresholds.recorded([plan.baseline.compare_thresholds]).single_run_tps == 0.5


def test_compare_reads_each_threshold_from_the_first_job_that_recorded_it():
    th = CompareThresholds.recorded([None, {"al": 0.03}, {"al": 0.9, "tps": "0.2", "min_speedup": {}},
                                     {"min_speedup": {"mtbench": 1}}])
    assert (th.al, th.tps, th.min_speedup, th.single_run_tps) == (0.03, 0.2, {"mtbench": 1.0}, None)


@pytest.mark.parametrize("extra", [["--gpu-memory-utilization", "0.5"], ["--kv-cache-memory-bytes=4G",
                                                                          "--gpu-memory-utilization=0.5"]])
def test_validation_and_the_flags_refuse_a_memory_conflict_in_the_same_words(compose, extra):
    cfg = compose("recipe=smoke", "server.kv_cache_memory_bytes=20G")
    cfg.server.extra_args = list(extra)
    with pytest.raises(ConfigError) as raised:
        build_server_flags(cfg, get_engine("vllm"))
    assert raised.value.line() in [e.line() for e in validate(*with_engine(cfg))]


def test_server_flags_split_the_identity_flags_into_what_the_spec_carries(compose):
    cfg = compose("recipe=smoke", "server.extra_args=[--per-request-spec-decode-metrics,summary]")
    eng = get_engine("vllm")
    f = server_flags(cfg, eng)
    assert f.all == build_server_flags(cfg, eng)
    assert f.acceptance == ["--per-request-spec-decode-metrics", "summary"]  # the recipe's own wins
    names = eng.speculative_flag_names() | eng.acceptance_flag_names()
    assert not any(a.split("=", 1)[0] in names for a in f.serving)
    assert sorted(f.serving + f.speculative + f.acceptance) == sorted(f.all)
