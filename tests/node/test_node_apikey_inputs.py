"""The API-key rule and the node's input checks (pure or file-level; no server)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from launcher.runtime import apikey
from launcher.engines import get_engine
from launcher.contracts.job import BenchSpec, DatasetInput
from launcher.runtime.inputs import check_aiperf, check_job_inputs, check_model, check_tokenizer
from tests.support.stack import AIPERF


def test_key_rule():
    assert apikey.job_key("127.0.0.1", {}) is None and apikey.job_key("::1", {}) is None
    assert apikey.job_key("localhost", {}) is None
    a, b = apikey.job_key("0.0.0.0", {}), apikey.job_key("0.0.0.0", {})
    assert a and b and a != b and len(a) >= 32  # fresh per job
    assert apikey.job_key("10.0.0.5", {"SPECDEC_API_KEY": "user"}) == "user"
    assert apikey.job_key("127.0.0.1", {"VLLM_API_KEY": "v"}) == "v"


def test_key_goes_to_the_server_as_vllm_api_key_and_to_clients_as_specdec_api_key(tmp_path):
    s, how = apikey.server_launch("k", {"SPECDEC_API_KEY": "k", "PATH": "/bin"}, get_engine("vllm"), tmp_path)
    assert s == {"VLLM_API_KEY": "k", "PATH": "/bin"} and how.argv == [] and how.files == []
    c = apikey.client_env("k", {"VLLM_API_KEY": "k", "PATH": "/bin"})
    assert c == {"SPECDEC_API_KEY": "k", "PATH": "/bin"}
    assert apikey.auth_headers(env=c) == {"Authorization": "Bearer k"}
    assert apikey.auth_headers(env={}) == {}
    assert "VLLM_API_KEY" not in apikey.server_launch(None, {"VLLM_API_KEY": "stale"}, get_engine("vllm"), tmp_path)[0]


def test_sglang_key_goes_in_a_private_config_file_never_on_argv(tmp_path):
    env, how = apikey.server_launch("s3cret-key", {"SPECDEC_API_KEY": "s3cret-key", "PATH": "/bin"},
                                    get_engine("sglang"), tmp_path)
    assert env == {"PATH": "/bin"} and "s3cret-key" not in " ".join(how.argv)
    assert how.argv[0] == "--config" and how.files == [how.argv[1]]
    f = Path(how.argv[1])
    assert f.parent == tmp_path and (f.stat().st_mode & 0o777) == 0o600
    assert f.read_text() == 'api-key: "s3cret-key"\n'
    how.remove_files()
    assert not f.exists()


def test_api_key_flag_found_in_every_spelling():
    for eng in (get_engine("vllm"), get_engine("sglang")):
        for args in (["--api-key", "x"], ["--api-key=x"], ["--api_key", "x"]):
            assert apikey.api_key_in_args(["--dtype", "bf16", *args], eng)
        assert not apikey.api_key_in_args(["--served-model-name", "api-key"], eng)


def test_model_checks(tmp_path):
    m = tmp_path / "m"
    m.mkdir()
    assert "no config.json" in check_model(str(m), "model", "model.path", {})
    (m / "config.json").write_text("{}")
    assert check_model(str(m), "model", "model.path", {}) is None
    assert "no such file or folder" in check_model(str(tmp_path / "nope"), "model", "model.path", {})
    assert check_model("Qwen/Qwen3-8B", "model", "model.path", {"HF_HOME": str(tmp_path)}) is None
    line = check_model("Qwen/Qwen3-8B", "model", "model.path", {"HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"})
    assert "not in the Hugging Face cache" in line
    (tmp_path / "hub" / "models--Qwen--Qwen3-8B").mkdir(parents=True)
    assert check_model("Qwen/Qwen3-8B", "model", "model.path", {"HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}) is None


def test_tokenizer_checks(tmp_path):
    assert "no tokenizer files" in check_tokenizer(str(tmp_path))
    (tmp_path / "tokenizer_config.json").write_text("{not json")
    assert "does not parse" in check_tokenizer(str(tmp_path))
    (tmp_path / "tokenizer_config.json").write_text("{}")
    assert check_tokenizer(str(tmp_path)) is None


def test_aiperf_check():
    assert check_aiperf(str(AIPERF)) is None
    assert "not found on this node" in check_aiperf("/nonexistent/aiperf")
    assert "exited with" in check_aiperf(f"{sys.executable} -c 'import sys; sys.exit(4)'".replace("'", ""))


def test_job_inputs_every_problem_one_line(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"question_id": 1, "turns": ["hi"]}\nnot json\n')
    short = tmp_path / "short.jsonl"
    short.write_text("".join(json.dumps({"question_id": i, "category": "c", "turns": ["q"]}) + "\n"
                             for i in range(3)))
    ro = tmp_path / "ro"
    ro.write_text("a file, not a folder")
    bench = BenchSpec(model="m", tokenizer=str(tmp_path), save_dir=str(ro / "out"), num_requests=4,
                      datasets=(DatasetInput("mtbench", str(bad_json)), DatasetInput("specbench", str(short)),
                                DatasetInput("speed_qualitative", str(tmp_path / "qualitative.parquet"))),
                      aiperf="/nonexistent/aiperf")
    errs = check_job_inputs(model=str(model), draft=str(tmp_path / "no-draft"), tokenizer=None, env={}, bench=bench)
    text = "\n".join(errs)
    assert len(errs) == 7, text
    assert f"draft {tmp_path / 'no-draft'}: no such file or folder" in text
    assert f"sweep.dataset_paths.mtbench: {bad_json}:2: invalid JSON" in text
    assert "has 3 question(s), fewer than num_requests=4" in text
    assert "sweep.dataset_paths.speed_qualitative" in text and "no such file" in text
    assert "output_dir:" in text and "tokenizer" in text and "bench.aiperf" in text
    assert all("\n" not in e and "fix" in e for e in errs)
    assert check_job_inputs(model=str(model), draft=None, tokenizer=None, env={}, bench=None) == []
