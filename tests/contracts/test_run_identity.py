"""The typed run identity (launcher/contracts/run_identity.py): the server settings that shape
serving, their differences in words, the fingerprint, and the JSON round trip."""
import json

import pytest

from launcher.contracts.run_identity import (SPECULATIVE_CONFIG_FLAG, RunIdentity, build, configuration_labels,
                                             serving_settings, settings_diff)

ARGV = ["python3", "-m", "vllm.entrypoints.cli.main", "serve", "/models/target",
        "--served-model-name", "llama8b", "--tensor-parallel-size", "1", "--max-num-seqs=64", "--async-scheduling",
        "--host", "127.0.0.1", "--port", "55513", "--api-key", "s3cret", "--hf-token", "hf_s3cret", "--download-dir", "/scratch/hf",
        "--tokenizer", "/models/tok", "--chat-template", "tmpl.jinja", "--data-parallel-rpc-port", "13345",
        "--speculative-config", '{"method": "draft_model", "num_speculative_tokens": 3}',
        "--kv_cache_dtype", "fp8", "--middleware", "a.b", "c.d"]


def test_serving_settings_keep_what_shapes_serving_and_drop_where_and_secrets():
    s = serving_settings(ARGV)
    assert s == {"--served-model-name": "llama8b", "--tensor-parallel-size": "1", "--max-num-seqs": "64",
                 "--async-scheduling": "", "--kv-cache-dtype": "fp8", "--middleware": "a.b c.d",
                 SPECULATIVE_CONFIG_FLAG: '{"method": "draft_model", "num_speculative_tokens": 3}'}
    assert "s3cret" not in json.dumps(s) and "55513" not in json.dumps(s)


def test_settings_diff_labels_each_change_by_flag():
    a = {"--max-num-seqs": "64", "--enable-prefix-caching": "", SPECULATIVE_CONFIG_FLAG: "{}"}
    b = {"--max-num-seqs": "128", "--async-scheduling": "", SPECULATIVE_CONFIG_FLAG: '{"k": 3}'}
    assert settings_diff(a, b, ignore=[SPECULATIVE_CONFIG_FLAG]) == [
        "+ --async-scheduling", "- --enable-prefix-caching", "--max-num-seqs 64→128"]
    assert settings_diff(a, a) == []
    assert settings_diff({"--x": "1"}, {"--x": ""}) == ["--x 1→(set)"]


def _ident(flags, k=3, length=3.5, version="0.26.0", **extra):
    sc = {"method": "draft_model", "model": "/m/draft", "num_speculative_tokens": k, **extra}
    if length is not None:
        sc |= {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": length}
    return build(model="/m/target", method="draft_model", speculative_config=sc, engine="vllm",
                 engine_version=version, server_flags=flags)


def test_the_fingerprint_is_the_server_configuration_not_k_level_or_version():
    plain = _ident(["--max-num-seqs", "64"])
    assert (plain.k, plain.forced, plain.draft) == (3, {"length": 3.5}, "/m/draft")
    same = [_ident(["--max-num-seqs", "64"], k=5, length=2.5, version="0.32.0"),
            _ident(["--max-num-seqs", "64", "--port", "1"], length=None)]
    assert {i.fingerprint for i in same} == {plain.fingerprint}
    other = [_ident(["--max-num-seqs", "64", "--async-scheduling"]), _ident(["--max-num-seqs", "32"]),
             _ident(["--max-num-seqs", "64"], draft_tensor_parallel_size=2)]
    assert len({plain.fingerprint} | {i.fingerprint for i in other}) == 4
    assert other[0].differences(plain) == ["+ --async-scheduling"]
    assert plain.differences(other[1]) == ["--max-num-seqs 32→64"]
    assert other[2].differences(plain) == ["+ speculative_config.draft_tensor_parallel_size 2"]


def test_a_baseline_has_no_speculation_and_the_speculative_flag_is_not_a_setting():
    base = build(model="/m/target", method="none", speculative_config=None, engine="vllm", engine_version="",
                 server_flags=["--max-num-seqs", "64", SPECULATIVE_CONFIG_FLAG, "{}"])
    assert (base.method, base.k, base.draft, base.forced, base.serving) == ("none", 0, "", None, {"--max-num-seqs": "64"})


def test_the_identity_round_trips_through_json():
    i = _ident(["--async-scheduling", "--max-num-seqs", "64"], draft_tensor_parallel_size=2)
    d = json.loads(json.dumps(i.to_dict()))
    assert d["fingerprint"] == i.fingerprint
    back = RunIdentity.from_dict(d)
    assert back == i and back.fingerprint == i.fingerprint
    assert i.with_engine_version("0.32.0") is i and _ident([], version="").with_engine_version("0.32.0").engine_version == "0.32.0"
    with pytest.raises(ValueError, match="unknown key"):
        RunIdentity.from_dict(d | {"colour": "red"})
    with pytest.raises(ValueError, match="model"):
        RunIdentity.from_dict({"k": 3})


def test_labels_name_what_differs_between_configurations_of_one_folder():
    plain, asy = _ident(["--max-num-seqs", "64"]), _ident(["--max-num-seqs", "64", "--async-scheduling"])
    other_level = _ident(["--max-num-seqs", "64"], length=2.5)  # the same server at another forced level
    labels = configuration_labels([asy, plain, other_level])
    assert labels[asy.configuration] == "+ --async-scheduling"
    assert labels[plain.configuration] == labels[other_level.configuration] == "- --async-scheduling"
    assert configuration_labels([plain, other_level]) == {plain.configuration: ""}
    three = configuration_labels([plain, asy, _ident(["--max-num-seqs", "128"])])
    assert three[plain.configuration] == f"reference configuration {plain.fingerprint}"
    assert sorted(three.values())[:2] == ["+ --async-scheduling", "--max-num-seqs 64→128"]
