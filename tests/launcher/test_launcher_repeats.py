"""sweep.repeats in the plan: the benchmark's arguments and the compare defaults in job.json."""
import copy

from launcher.plan import make_plan


def _bench_args(cfg):
    return make_plan(cfg).jobs[0].bench_args


def test_repeats_and_warmup_reach_the_benchmark(qwen3_dflash_cfg):
    cfg = copy.deepcopy(qwen3_dflash_cfg)
    cfg.sweep.repeats = 1
    args = _bench_args(cfg)
    assert "--repeats" not in args and "--warmup" not in args
    cfg.sweep.repeats = 3
    args = _bench_args(cfg)
    assert args[args.index("--repeats") + 1] == "3" and args[args.index("--noisy_rel_mad") + 1] == "0.1"
    assert "--warmup" in args                      # on by default with repeats
    cfg.sweep.warmup = False
    assert "--warmup" not in _bench_args(cfg)


def test_compare_defaults_travel_in_job_json(qwen3_dflash_cfg):
    cfg = copy.deepcopy(qwen3_dflash_cfg)
    cfg.bench.gates.compare_single_run_tps_threshold = 0.5
    cfg.bench.gates.compare_run_floor = 0.07
    th = make_plan(cfg).jobs[0].compare_thresholds
    assert th["single_run_tps"] == 0.5 and th["run_floor"] == 0.07 and th["noisy_rel_mad"] == 0.1


def test_the_standard_sweep_repeats_three_times_and_smoke_once(compose):
    assert compose("recipe=qwen3_dflash").sweep.repeats == 3
    assert compose("recipe=smoke").sweep.repeats == 1
