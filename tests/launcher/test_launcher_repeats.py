"""sweep.repeats in the plan: the benchmark's arguments and the compare defaults in job.json."""
import copy

from launcher.login.plan import make_plan
from tests.support.login import with_engine


def _bench(cfg):
    return make_plan(*with_engine(cfg)).jobs[0].bench


def test_repeats_and_warmup_reach_the_benchmark(qwen3_dflash_cfg):
    cfg = copy.deepcopy(qwen3_dflash_cfg)
    cfg.sweep.repeats = 1
    b = _bench(cfg)
    assert b.repeats == 1 and not b.warmup
    cfg.sweep.repeats = 3
    b = _bench(cfg)
    assert b.repeats == 3 and b.noisy_rel_mad == 0.1
    assert b.warmup                      # on by default with repeats
    cfg.sweep.warmup = False
    assert not _bench(cfg).warmup


def test_the_spec_gives_the_benchmark_its_repeats(qwen3_dflash_cfg):
    from launcher.bench.bench_run import from_job

    cfg = copy.deepcopy(qwen3_dflash_cfg)
    cfg.sweep.repeats = 3
    b = from_job(make_plan(*with_engine(cfg)).jobs[0], "speculative", "http://127.0.0.1:1").bench
    assert b.repeats == 3 and b.warmup and b.noisy_rel_mad == 0.1


def test_compare_defaults_travel_in_job_json(qwen3_dflash_cfg):
    cfg = copy.deepcopy(qwen3_dflash_cfg)
    cfg.bench.gates.compare_single_run_tps_threshold = 0.5
    cfg.bench.gates.compare_run_floor = 0.07
    th = make_plan(*with_engine(cfg)).jobs[0].compare_thresholds
    assert th["single_run_tps"] == 0.5 and th["run_floor"] == 0.07 and th["noisy_rel_mad"] == 0.1


def test_the_standard_sweep_repeats_three_times_and_smoke_once(compose):
    assert compose("recipe=qwen3_dflash").sweep.repeats == 3
    assert compose("recipe=smoke").sweep.repeats == 1


def test_server_starts_reach_the_benchmark_and_bad_values_are_refused(qwen3_dflash_cfg):
    from launcher.bench.bench_run import from_job
    from launcher.login.config.validate import validate

    cfg = copy.deepcopy(qwen3_dflash_cfg)
    cfg.sweep.server_starts = 2
    job = make_plan(*with_engine(cfg)).jobs[0]
    assert job.bench.server_starts == 2
    assert from_job(job, "speculative", "http://127.0.0.1:1").bench.server_starts == 2
    cfg.sweep.server_starts = 0
    assert any(e.field == "sweep.server_starts" and "sweep.server_starts=2" in str(e) for e in validate(*with_engine(cfg)))
    cfg.sweep.server_starts = 2
    cfg.topology.kind = "disagg"
    assert any(e.field == "sweep.server_starts" and "disagg" in str(e) for e in validate(*with_engine(cfg)))
