"""server_args: the one authority for the inference server's argv (pure functions)."""
from __future__ import annotations

import json
import shlex

import pytest

from launcher.login.config.schema import DraftConfig, LauncherConfig, ModelConfig, ParallelConfig, ServerConfig
from launcher.login.errors import ConfigError
from launcher.contracts.job import shell_join
from launcher.engines import AcceptanceSource, get_engine
from launcher.contracts.job import JobSpec
from launcher.engines.vllm import SPEC_METRICS_FLAG
from launcher.login import server_args
from launcher.login.server_args import drop_flags, flag_names

API_SERVER = "/venv/bin/python -m vllm.entrypoints.openai.api_server"


def count(argv: list[str], flag: str) -> int:
    """Occurrences of a flag in both `--x v` and `--x=v` forms."""
    return sum(1 for a in argv if a == flag or a.startswith(flag + "="))


def value(argv: list[str], flag: str) -> str:
    """The one value of a flag, in either form."""
    assert count(argv, flag) == 1, f"{flag} appears {count(argv, flag)} times in {argv}"
    for i, a in enumerate(argv):
        if a == flag:
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    raise AssertionError("unreachable")


def spec_of(argv: list[str]) -> dict:
    return json.loads(value(argv, "--speculative-config"))


def build_server_flags(cfg, k=None):  # the engine the recipe names, as the plan resolves it
    return server_args.build_server_flags(cfg, get_engine(cfg.server.engine), k)


def build_server_argv(cfg, host, port, k=None):
    return server_args.build_server_argv(cfg, get_engine(cfg.server.engine), host, port, k)


def speculative_config(cfg, k=None):
    return server_args.speculative_config(cfg, get_engine(cfg.server.engine), k)


def make_cfg(method="eagle3", model="org/draft", k=3, extra=None, tp=1, dp=1, ep=1, draft_tp=None,
             max_model_len=None, **server) -> LauncherConfig:
    return LauncherConfig(
        model=ModelConfig(path="org/target", served_name="target", max_model_len=max_model_len),
        draft=DraftConfig(method=method, model=model, num_speculative_tokens=k, extra=dict(extra or {})),
        parallel=ParallelConfig(tp=tp, dp=dp, ep=ep, draft_tp=draft_tp),
        server=ServerConfig(**server),
    )


def test_count_helper():
    argv = ["--a", "1", "--a=2", "--ab", "3", "x--a"]
    assert count(argv, "--a") == 2 and count(argv, "--ab") == 1 and count(argv, "--b") == 0


# --- methods
@pytest.mark.parametrize("method,model,k,extra,expected", [
    ("eagle3", "org/eagle3", 3, {}, {"method": "eagle3", "model": "org/eagle3", "num_speculative_tokens": 3}),
    ("dflash", "z-lab/Qwen3-8B-DFlash-b16", 15, {},
     {"method": "dflash", "model": "z-lab/Qwen3-8B-DFlash-b16", "num_speculative_tokens": 15}),
    ("mtp", None, 1, {}, {"method": "mtp", "num_speculative_tokens": 1}),
    ("ngram", None, 4, {"prompt_lookup_min": 2, "prompt_lookup_max": 4},
     {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}),
    ("draft_model", "/models/tiny-draft", 3, {},
     {"method": "draft_model", "model": "/models/tiny-draft", "num_speculative_tokens": 3}),
])
def test_speculative_methods(method, model, k, extra, expected):
    cfg = make_cfg(method=method, model=model, k=k, extra=extra)
    assert speculative_config(cfg) == expected
    flags = build_server_flags(cfg)
    assert spec_of(flags) == expected
    assert value(flags, SPEC_METRICS_FLAG) == "detailed"
    argv = build_server_argv(cfg, "127.0.0.1", 8000)
    assert spec_of(argv) == expected
    assert count(argv, SPEC_METRICS_FLAG) == 1


def test_method_none_has_no_speculation_flags():
    cfg = make_cfg(method="none", model=None, k=1)
    assert speculative_config(cfg) is None
    for argv in (build_server_flags(cfg), build_server_argv(cfg, "127.0.0.1", 8000)):
        assert count(argv, "--speculative-config") == 0
        assert count(argv, SPEC_METRICS_FLAG) == 0


def test_k_override_and_draft_tp():
    cfg = make_cfg(method="eagle3", k=3, tp=4, draft_tp=1)
    assert spec_of(build_server_flags(cfg, 5)) == {"method": "eagle3", "model": "org/draft",
                                                   "num_speculative_tokens": 5, "draft_tensor_parallel_size": 1}
    assert speculative_config(cfg)["num_speculative_tokens"] == 3


def test_spec_metrics_mode_comes_from_the_recipe():
    flags = build_server_flags(make_cfg(spec_decode_metrics="detailed"))
    assert value(flags, SPEC_METRICS_FLAG) == "detailed"


# --- memory: KV cap vs utilisation
def test_kv_cap_only():
    flags = build_server_flags(make_cfg(kv_cache_memory_bytes="20G"))
    assert value(flags, "--kv-cache-memory-bytes") == "20G"
    assert count(flags, "--gpu-memory-utilization") == 0


def test_utilization_only():
    flags = build_server_flags(make_cfg(gpu_memory_utilization=0.85))
    assert value(flags, "--gpu-memory-utilization") == "0.85"
    assert count(flags, "--kv-cache-memory-bytes") == 0


def test_neither_memory_flag_by_default():
    flags = build_server_flags(make_cfg())
    assert count(flags, "--kv-cache-memory-bytes") == count(flags, "--gpu-memory-utilization") == 0


def test_kv_cap_and_utilization_together_is_an_error():
    with pytest.raises(ConfigError) as e:
        build_server_flags(make_cfg(kv_cache_memory_bytes="20G", gpu_memory_utilization=0.8))
    assert e.value.field == "server.kv_cache_memory_bytes"


@pytest.mark.parametrize("extra", [["--gpu-memory-utilization", "0.5"], ["--gpu-memory-utilization=0.5"]])
def test_extra_utilization_with_kv_cap_is_an_error(extra):
    with pytest.raises(ConfigError) as e:
        build_server_flags(make_cfg(kv_cache_memory_bytes="20G", extra_args=extra))
    assert e.value.field == "server.extra_args" and "--gpu-memory-utilization" in e.value.line()
    assert e.value.fix


def test_extra_kv_cap_with_utilization_is_an_error():
    with pytest.raises(ConfigError):
        build_server_flags(make_cfg(gpu_memory_utilization=0.9, extra_args=["--kv-cache-memory-bytes=4G"]))


def test_extra_args_setting_both_memory_flags_is_an_error():
    with pytest.raises(ConfigError) as e:
        build_server_flags(make_cfg(extra_args=["--kv-cache-memory-bytes", "4G", "--gpu-memory-utilization", "0.5"]))
    assert e.value.field == "server.extra_args"


def test_memory_through_extra_args_alone_is_fine():
    flags = build_server_flags(make_cfg(extra_args=["--gpu-memory-utilization", "0.5"]))
    assert value(flags, "--gpu-memory-utilization") == "0.5"
    assert count(flags, "--kv-cache-memory-bytes") == 0


# --- extra args win over computed flags
@pytest.mark.parametrize("extra", [["--max-model-len", "4096"], ["--max-model-len=4096"]])
def test_extra_arg_overrides_a_computed_flag(extra):
    cfg = make_cfg(max_model_len=8192, extra_args=extra)
    flags = build_server_flags(cfg)
    assert value(flags, "--max-model-len") == "4096"
    assert "8192" not in flags
    argv = build_server_argv(cfg, "0.0.0.0", 8000)
    assert value(argv, "--max-model-len") == "4096"


def test_extra_arg_overrides_spec_metrics_without_duplicate():
    cfg = make_cfg(extra_args=[f"{SPEC_METRICS_FLAG}=detailed"])
    for argv in (build_server_flags(cfg), build_server_argv(cfg, "h", 1)):
        assert value(argv, SPEC_METRICS_FLAG) == "detailed"


def test_extra_arg_overrides_speculative_config():
    mine = '{"method":"eagle3","model":"x/y","num_speculative_tokens":2}'
    flags = build_server_flags(make_cfg(extra_args=["--speculative-config", mine]))
    assert value(flags, "--speculative-config") == mine


def test_extra_boolean_flag_overrides_without_eating_the_next_flag():
    flags = build_server_flags(make_cfg(tp=4, ep=4, enforce_eager=True, extra_args=["--enforce-eager"]))
    assert count(flags, "--enforce-eager") == 1
    assert count(flags, "--enable-expert-parallel") == 1
    assert value(flags, "--tensor-parallel-size") == "4"


def test_extra_args_with_spaces_stay_one_item():
    gen = '{"temperature": 0.6, "top_p": 0.95}'
    cfg = make_cfg(extra_args=["--override-generation-config", gen, "--chat-template", "/path with spaces/t.jinja"])
    flags = build_server_flags(cfg)
    assert value(flags, "--override-generation-config") == gen
    assert value(flags, "--chat-template") == "/path with spaces/t.jinja"
    argv = build_server_argv(cfg, "127.0.0.1", 8000)
    assert gen in argv
    assert shlex.split(shell_join(argv)) == argv  # the dry-run text round-trips


# --- parallelism
def test_tp_and_ep():
    flags = build_server_flags(make_cfg(tp=4, ep=4))
    assert value(flags, "--tensor-parallel-size") == "4"
    assert count(flags, "--enable-expert-parallel") == 1
    assert count(flags, "--data-parallel-size") == 0


def test_dp_and_no_ep():
    flags = build_server_flags(make_cfg(tp=2, dp=2))
    assert value(flags, "--tensor-parallel-size") == "2"
    assert value(flags, "--data-parallel-size") == "2"
    assert count(flags, "--enable-expert-parallel") == 0


def test_no_flag_is_ever_duplicated():
    cfg = make_cfg(method="ngram", model=None, extra={"prompt_lookup_max": 4}, tp=2, dp=2, ep=4,
                   max_model_len=2048, max_num_batched_tokens=4096, kv_cache_memory_bytes="8G", enforce_eager=True,
                   extra_args=["--max-model-len=1024", "--seed", "0"])
    cfg.model.dtype, cfg.model.tokenizer = "bfloat16", "org/tok"
    argv = build_server_argv(cfg, "0.0.0.0", 9000)
    names = [a.split("=", 1)[0] for a in argv if a.startswith("--")]
    assert len(names) == len(set(names)), names


def compose_server_argv(command, model, flags, host, port):
    return get_engine("vllm").server_argv(command, model, flags, host, port)


def spec_argv(speculative_config=None, acceptance=None):
    eng = get_engine("vllm")
    acc = eng.acceptance_flags(AcceptanceSource.PER_REQUEST_STATS) if acceptance is None else acceptance
    return JobSpec(recipe="r", server_id="s", job_dir="/j", model="m", served_name="m", server_command="vllm serve",
                   server_flags=["--tensor-parallel-size", "1"], speculative_config=speculative_config, engine="vllm",
                   acceptance_flags=acc).server_argv("h", 1, engine=get_engine("vllm"))


# --- the server argv: the engine's, from typed fields
def test_vllm_serve_takes_the_model_positionally():
    argv = compose_server_argv("vllm serve", "org/target", ["--tensor-parallel-size", "1"], "0.0.0.0", 8000)
    assert argv[:3] == ["vllm", "serve", "org/target"]
    assert count(argv, "--model") == 0


def test_api_server_module_takes_model_flag():
    argv = compose_server_argv(API_SERVER, "org/target", ["--tensor-parallel-size", "1"], "127.0.0.1", 8000)
    assert argv[:3] == shlex.split(API_SERVER)
    assert value(argv, "--model") == "org/target"
    assert argv.count("org/target") == 1


def test_spec_metrics_added_only_with_a_speculative_config():
    argv = spec_argv({"method": "ngram", "num_speculative_tokens": 3})
    assert value(argv, SPEC_METRICS_FLAG) == "detailed"
    assert spec_of(argv) == {"method": "ngram", "num_speculative_tokens": 3}
    argv = spec_argv(None)  # the same spec without speculation: no acceptance flag either
    assert count(argv, SPEC_METRICS_FLAG) == 0 and count(argv, "--speculative-config") == 0


@pytest.mark.parametrize("present", [[SPEC_METRICS_FLAG, "detailed"], [f"{SPEC_METRICS_FLAG}=detailed"]])
def test_spec_metrics_not_duplicated_when_present(present):
    argv = spec_argv({"method": "ngram"}, acceptance=present)
    assert value(argv, SPEC_METRICS_FLAG) == "detailed" and count(argv, SPEC_METRICS_FLAG) == 1


def test_host_and_port_are_replaced():
    flags = ["--host", "10.0.0.1", "--tensor-parallel-size", "2", "--port=1234", "--seed", "7"]
    argv = compose_server_argv("vllm serve", "m", flags, "0.0.0.0", 8123)
    assert value(argv, "--host") == "0.0.0.0"
    assert value(argv, "--port") == "8123"
    assert value(argv, "--tensor-parallel-size") == "2"
    assert value(argv, "--seed") == "7"
    assert "10.0.0.1" not in argv and "1234" not in argv
    assert flags == ["--host", "10.0.0.1", "--tensor-parallel-size", "2", "--port=1234", "--seed", "7"], \
        "the caller's list is not modified"


def test_build_server_argv_end_to_end():
    cfg = make_cfg(method="dflash", model="z/d", k=15, command="vllm serve", extra_args=["--port", "1"])
    argv = build_server_argv(cfg, "0.0.0.0", 8000)
    assert argv[:3] == ["vllm", "serve", "org/target"]
    assert argv[-4:] == ["--host", "0.0.0.0", "--port", "8000"]
    assert value(argv, "--served-model-name") == "target"
    assert spec_of(argv)["num_speculative_tokens"] == 15


# --- the helpers
def test_flag_names_and_drop_flags():
    args = ["--a", "1", "--b=2", "--c", "--d", "x y", "pos"]
    assert flag_names(args) == {"--a", "--b", "--c", "--d"}
    assert drop_flags(args, {"--a", "--b"}) == ["--c", "--d", "x y", "pos"]
    assert drop_flags(args, {"--c"}) == ["--a", "1", "--b=2", "--d", "x y", "pos"]
    assert drop_flags(args, {"--d"}) == ["--a", "1", "--b=2", "--c", "pos"]
