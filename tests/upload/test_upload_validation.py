"""Validation, before anything is sent: provenance, result files, the validity
gate, secrets, discovery and key layout.  No S3 server needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from upload_samples import DROP, acceptance, configuration, timing, write_run, write_sweep

from concurrent.futures import ThreadPoolExecutor

from upload.destination import parse_destination
from upload.discovery import discover
from upload.errors import UsageError
from upload.secretscan import find_secrets, is_masked
from upload.validation import Policy, check_run


def reasons_for(run_dir: Path, **policy) -> list[str]:
    found = discover(run_dir)
    assert len(found.runs) == 1
    return check_run(found.runs[0], Policy(environment={}, **policy), "prefix/run")


# --- provenance -----------------------------------------------------------

def test_a_complete_sample_run_passes_every_check(tmp_path):
    assert reasons_for(write_run(tmp_path / "run")) == []


@pytest.mark.parametrize("field", ["container_image", "model_dir", "speculative_algorithm", "engine_version", "timestamp"])
@pytest.mark.parametrize("bad", ["", None, DROP])
def test_each_empty_provenance_field_is_refused_by_name(tmp_path, field, bad):
    run = write_run(tmp_path / "run", config=configuration(**{field: bad}))
    reasons = reasons_for(run)
    assert len(reasons) == 1, reasons
    assert field in reasons[0] and "--allow-incomplete-provenance" in reasons[0]
    assert reasons_for(run, allow_incomplete_provenance=True) == []


def test_whitespace_container_image_counts_as_empty(tmp_path):
    reasons = reasons_for(write_run(tmp_path / "run", config=configuration(container_image="   ")))
    assert any("container_image is empty" in r for r in reasons)


def test_missing_configuration_is_refused_even_with_the_provenance_override(tmp_path):
    run = write_run(tmp_path / "run")
    (run / "configuration.json").unlink()
    for allow in (False, True):
        reasons = reasons_for(run, allow_incomplete_provenance=allow)
        assert any(r.startswith("configuration.json missing") for r in reasons)


# --- result files -----------------------------------------------------------

def test_malformed_configuration_is_refused_with_its_position(tmp_path):
    run = write_run(tmp_path / "run")
    (run / "configuration.json").write_text('{"model": "x",\n "container_image": }')
    reasons = reasons_for(run, allow_incomplete_provenance=True)
    assert reasons == [next(r for r in reasons if r.startswith("configuration.json: invalid JSON at line 2"))]


def test_every_result_file_must_parse(tmp_path):
    run = write_run(tmp_path / "run")
    (run / "timing.json").write_text("")
    (run / "mtbench_responses.jsonl").write_text('{"question_id": 1}\n\n{"question_id": 2\n')
    reasons = reasons_for(run)
    assert any(r.startswith("timing.json: file is empty") for r in reasons)
    assert any(r.startswith("mtbench_responses.jsonl: line 3 is not valid JSON") for r in reasons)
    # the gate does not pile a second reason on a file that did not parse
    assert not any("timing.json missing" in r for r in reasons)


def test_result_file_must_be_an_object_and_utf8(tmp_path):
    run = write_run(tmp_path / "run")
    (run / "acceptance_rate.json").write_text("[1, 2]")
    (run / "timing.json").write_text("[]")
    (run / "extra.json").write_bytes(b'{"x": "\xff"}')
    reasons = reasons_for(run)
    assert any(r.startswith("acceptance_rate.json: top level must be a JSON list of objects, found list")
               for r in reasons)
    assert any(r.startswith("timing.json: top level must be a JSON list of objects, found an empty list")
               for r in reasons)
    assert any(r.startswith("extra.json: not UTF-8") for r in reasons)


# --- validity gate -------------------------------------------------------------

def test_speculative_run_needs_average_al_of_at_least_one(tmp_path):
    low = write_run(tmp_path / "low", acceptance_doc=acceptance(Average_AL=0.93))
    assert any("Average_AL 0.93 is below 1" in r for r in reasons_for(low))
    assert reasons_for(low, allow_invalid=True) == []
    assert reasons_for(write_run(tmp_path / "one", acceptance_doc=acceptance(Average_AL=1.0))) == []


@pytest.mark.parametrize("al", [None, "two", float("nan")])
def test_speculative_run_with_unusable_average_al_is_refused(tmp_path, al):
    run = write_run(tmp_path / "run", acceptance_doc=acceptance(Average_AL=al))
    assert any("Average_AL" in r and "--allow-invalid" in r for r in reasons_for(run))


def test_speculative_run_without_acceptance_file_is_refused(tmp_path):
    run = write_run(tmp_path / "run")
    (run / "acceptance_rate.json").unlink()
    assert any("without acceptance_rate.json" in r for r in reasons_for(run))


def test_baseline_run_is_not_held_to_the_acceptance_length(tmp_path):
    run = write_run(
        tmp_path / "run",
        config=configuration(speculative_algorithm="NONE"),
        acceptance_doc=acceptance(speculative=False, Average_AL=None),
    )
    assert reasons_for(run) == []


def test_zero_generated_tokens_is_refused(tmp_path):
    run = write_run(tmp_path / "run", timing_doc=timing(total_output_tokens=0))
    reasons = reasons_for(run)
    assert any("generated 0 tokens" in r for r in reasons)
    assert reasons_for(run, allow_invalid=True) == []


def test_a_point_that_failed_a_recipe_gate_is_refused(tmp_path):
    run = write_run(tmp_path / "run", timing_doc=timing(status="failed", reason="Average_AL 1.2 is below the gate 1.5"))
    (run / "COMPLETE").unlink()
    reasons = reasons_for(run)
    assert any("not complete: Average_AL 1.2 is below the gate 1.5" in r for r in reasons)


def test_specdec_bench_folder_without_our_extension(tmp_path):
    """specdec_bench's own output: no COMPLETE, no extension; tokens from Number of Output Tokens."""
    run = tmp_path / "sdb"
    run.mkdir()
    tim = {k: v for k, v in timing().items() if k != "specdec_launcher"}
    acc = {k: v for k, v in acceptance().items() if k != "specdec_launcher"}
    (run / "timing.json").write_text(json.dumps([tim]))
    (run / "acceptance_rate.json").write_text(json.dumps([acc]))
    (run / "configuration.json").write_text(json.dumps({k: v for k, v in configuration().items()
                                                        if k != "specdec_launcher"}))
    assert reasons_for(run) == []
    tim["Number of Output Tokens"] = {**tim["Number of Output Tokens"], "mean": "0.0000"}
    (run / "timing.json").write_text(json.dumps([tim]))
    assert any("generated 0 tokens" in r for r in reasons_for(run))


def test_failed_fraction_threshold_and_flag(tmp_path):
    # failed / (failed + succeeded), AIPerf's requests being turns
    at_limit = write_run(tmp_path / "at", timing_doc=timing(num_turns=95, failed_requests=5))
    above = write_run(tmp_path / "above", timing_doc=timing(num_turns=94, failed_requests=6))
    assert reasons_for(at_limit) == []
    reasons = reasons_for(above)
    assert len(reasons) == 1 and "6 of 100 requests failed (> 5%)" in reasons[0]
    assert reasons_for(above, max_failed_fraction=0.10) == []
    assert any("failed" in r for r in reasons_for(at_limit, max_failed_fraction=0.01))


def test_missing_timing_is_refused_by_the_gate(tmp_path):
    run = write_run(tmp_path / "run")
    (run / "timing.json").unlink()
    assert any(r.startswith("timing.json missing") for r in reasons_for(run))
    assert reasons_for(run, allow_invalid=True) == []


# --- secrets ---------------------------------------------------------------

@pytest.mark.parametrize("value", [None, "", "***", "********", "<masked>", "REDACTED", "hf_****"])
def test_mask_forms_are_accepted(value):
    assert is_masked(value)


@pytest.mark.parametrize("value", ["hunter22", "EMPTY", "hf_*", "abc***defgh"])
def test_non_masks_are_not_accepted(value):
    assert not is_masked(value)


def test_unmasked_secret_key_is_refused_without_printing_it(tmp_path):
    secret = "tok-9f8e7d6c5b4a39281706"
    run = write_run(tmp_path / "run", config=configuration(engine_args={"hf_token": secret, "max_num_batched_tokens": 8192}))
    reasons = reasons_for(run)
    assert len(reasons) == 1 and "engine_args.hf_token holds an unmasked value" in reasons[0]
    assert secret not in reasons[0]
    # provenance override does not let a secret through
    assert len(reasons_for(run, allow_incomplete_provenance=True, allow_invalid=True)) == 1


def test_tokenizer_and_numeric_token_fields_are_not_secrets():
    config = configuration(tokenizer_mode="auto", num_speculative_tokens=3, max_tokens=512, tokenizer="/models/tok")
    assert find_secrets(config) == []


@pytest.mark.parametrize(
    "argv, where",
    [
        (["vllm", "serve", "m", "--hf-token", "abcdefgh12345"], "argv[4]"),
        (["vllm", "serve", "m", "--api-key=abcdefgh12345"], "argv[3]"),
        (["vllm", "serve", "m", "--api-key", "EMPTY"], "argv[4]"),
    ],
)
def test_unmasked_flag_values_in_argv_are_refused(argv, where):
    findings = find_secrets(configuration(argv=argv))
    assert len(findings) == 1 and where in findings[0]


def test_flag_values_inside_a_command_string_are_checked():
    assert find_secrets(configuration(server_cmd="vllm serve m --api-key s3cr3tvalue --port 8000"))
    assert find_secrets(configuration(server_cmd="vllm serve m --api-key *** --num-speculative-tokens 3")) == []


@pytest.mark.parametrize(
    "text",
    [
        "AKIA" + "ABCDEFGHIJKLMNOP",
        "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6",
        "ghp_" + "A" * 36,
        "nvapi-" + "x" * 40,
        "-----BEGIN RSA PRIVATE KEY-----",
        "https://user:pa55word@registry.example.com/v2",
    ],
)
def test_credential_shaped_values_anywhere_are_refused(text):
    findings = find_secrets(configuration(notes={"free_text": f"see {text} here"}))
    assert len(findings) == 1 and "notes.free_text" in findings[0]
    assert text not in findings[0]


@pytest.mark.parametrize(
    "name, secret",
    [
        ("hf_token", True), ("apiKey", True), ("DB_PASSWORD", True), ("passwd", True), ("authorization", True),
        ("credentials", True), ("s3_secret", True),
        ("num_speculative_tokens", False), ("stop_tokens", False), ("tokenizer", False),
        ("tokenizer_mode", False), ("keyword", False), ("kv_cache_dtype", False),
    ],
)
def test_secret_key_rule_matches_the_masking_rule(name, secret):
    findings = find_secrets({name: "plain-value-1234"})
    assert bool(findings) is secret, findings


def test_numbers_under_secret_keys_and_json_strings_are_checked():
    assert find_secrets({"serving": {"api_key": 12345678}})
    findings = find_secrets({"argv": ["vllm", "serve", "--speculative-config", '{"method": "eagle3", "hf_token": "abc"}']})
    assert len(findings) == 1 and "argv[3]<json>.hf_token" in findings[0]
    assert find_secrets({"env_line": "HF_TOKEN=abcdef123 vllm serve m"})
    assert find_secrets({"argv": ["env", "HF_TOKEN=***", "vllm"], "flags": {"use_tokens": True}}) == []


def test_what_the_benchmark_writes_passes_and_its_unmasked_form_does_not():
    """Contract with launcher/bench/result_files.py: its masking satisfies the re-check."""
    from launcher.bench.result_files import mask_argv, mask_secrets

    raw = configuration(
        hf_token="hf_" + "q" * 34,
        run_args={"api_key": "sk-local-abcdefghijklmnopqrstu", "max_tokens": 512, "tokenizer": "/tok"},
        argv=["vllm", "serve", "m", "--api-key", "plainsecret99", "--num-speculative-tokens", "3",
              "HF_TOKEN=abcdef123456", "--url=https://user:pw123456@host/x"],
    )
    assert len(find_secrets(raw)) >= 4
    masked = mask_secrets({**raw, "argv": mask_argv(raw["argv"])})
    assert find_secrets(masked) == []


def test_values_of_secret_environment_variables_are_refused():
    env = {"SPECDEC_BENCH_S3_SECRET": "zq8Lr2Vv0aNm3Ks", "TOKENIZERS_PARALLELISM": "false-but-long", "HOME": "/root"}
    config = configuration(notes="uploaded with zq8Lr2Vv0aNm3Ks", other="false-but-long")
    findings = find_secrets(config, env)
    assert len(findings) == 1 and "SPECDEC_BENCH_S3_SECRET" in findings[0] and "zq8L" not in findings[0]


# --- discovery and keys ------------------------------------------------------------

def test_sweep_discovery_keys_and_job_level_files(tmp_path):
    job = tmp_path / "job42"
    write_sweep(job, ["mtbench/t0_c1", "speed_qualitative/t0.7_c8"])
    found = discover(job)
    assert found.name == "job42"
    assert [r.rel for r in found.runs] == ["mtbench/t0_c1", "speed_qualitative/t0.7_c8"]
    assert sorted(found.outside) == ["gpu_telemetry.json", "logs/server.log", "summary.json"]
    run = found.runs[0]
    assert {f.rel for f in run.files} == {
        "configuration.json", "timing.json", "acceptance_rate.json", "mtbench_responses.jsonl",
        "COMPLETE", "aiperf/profile_export_aiperf.json", "aiperf/profile_export.jsonl",
    }
    dest = parse_destination("s3://results-bucket/team/specdec/")
    assert dest.key(found.name, run.rel, "timing.json") == "team/specdec/job42/mtbench/t0_c1/timing.json"


def test_single_run_and_flat_folder(tmp_path):
    single = write_run(tmp_path / "only_run")
    found = discover(single)
    assert [r.rel for r in found.runs] == [""] and found.runs[0].label == "only_run"
    assert parse_destination("s3://bkt").key(found.name, "", "timing.json") == "only_run/timing.json"
    flat = tmp_path / "flat"
    write_run(flat / "a")
    write_run(flat / "b")
    assert [r.rel for r in discover(flat).runs] == ["a", "b"]


@pytest.mark.parametrize("url", ["bucket/prefix", "s3://", "s3://Upper_Case/x", "s3://ok-bucket/a//b"])
def test_bad_destination_urls(url):
    with pytest.raises(UsageError):
        parse_destination(url)


def test_local_manifest_copy_is_not_uploaded(tmp_path):
    run = write_run(tmp_path / "run")
    (run / "_manifest.json").write_text(json.dumps({"files": []}))
    assert "_manifest.json" not in {f.rel for f in discover(run).runs[0].files}


def test_file_vanishing_before_hashing_refuses_only_its_run(tmp_path):
    job = tmp_path / "job"
    write_run(job / "a")
    write_run(job / "b")
    found = discover(job)
    (job / "b" / "COMPLETE").unlink()  # removed after discovery, before hashing
    from upload.upload_plan import build_plan

    with ThreadPoolExecutor(2) as pool:
        plan = build_plan(found, parse_destination("s3://bkt/p"), Policy(environment={}), pool)
    assert [rp.run.rel for rp in plan.runs] == ["a"]
    assert [(r.label, len(r.reasons)) for r in plan.refused] == [("job/b", 1)]
    # the validity gate reads the folder again: a point without its marker is not complete
    assert plan.refused[0].reasons[0].startswith("not complete (no COMPLETE marker)")
