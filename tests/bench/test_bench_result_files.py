import hashlib
import json
from pathlib import Path

import pytest

from launcher.bench.datasets import DATASETS, Question, read_mtbench
from launcher.bench.result_files import (
    build_configuration, checkpoint_info, is_complete, is_secret_key, mark_complete,
    mask_argv, mask_secrets, response_texts_from_raw, responses_rows, write_json_atomic,
    write_point,
)

DATA = Path(__file__).parent / "data"
RECORDED = DATA / "recorded"


# ------------------------------------------------------------ masking

def test_mask_secrets_at_any_depth():
    config = {
        "serving": {"engine_args": [{
            "hf_token": "hf_abc", "HF_TOKEN": "hf_abc", "api_key": "k1", "apiKey": "k2",
            "AWS_SECRET_ACCESS_KEY": "s", "db_password": "p", "key": "v",
            "credentials": {"user": "u"},
            "tokenizer": "/models/tok", "tokenizer_path": "/t", "tokenizer_mode": "auto",
            "num_speculative_tokens": 3, "max_tokens": 512, "empty_token": None,
            "model": "m",
        }]},
        "top_secret": ("a", "b"),
    }
    assert mask_secrets(config) == {
        "serving": {"engine_args": [{
            "hf_token": "***", "HF_TOKEN": "***", "api_key": "***", "apiKey": "***",
            "AWS_SECRET_ACCESS_KEY": "***", "db_password": "***", "key": "***",
            "credentials": "***",
            "tokenizer": "/models/tok", "tokenizer_path": "/t", "tokenizer_mode": "auto",
            "num_speculative_tokens": 3, "max_tokens": 512, "empty_token": None,
            "model": "m",
        }]},
        "top_secret": "***",
    }
    assert config["serving"]["engine_args"][0]["hf_token"] == "hf_abc"  # input untouched


@pytest.mark.parametrize("key, secret", [
    ("token", True), ("hfToken", True), ("SPECDEC_BENCH_S3_KEY_ID", True), ("passwd", True),
    ("tokenizer", False), ("tokenizer_revision", False), ("num_speculative_tokens", False),
    ("output_tokens", False), ("keyframe", False), ("kv_cache_dtype", False), (3, False),
])
def test_is_secret_key(key, secret):
    assert is_secret_key(key) is secret


def test_mask_argv():
    argv = ["python", "-m", "vllm.entrypoints.openai.api_server", "--hf-token", "hf_abc",
            "--api-key=xyz", "--tokenizer", "/tok", "HF_TOKEN=abc", "--num-speculative-tokens", "3",
            "--speculative-config", '{"model": "d", "num_speculative_tokens": 3}',
            "--extra", '{"auth": {"access_token": "t"}}',
            "--url", "https://user:pw@host/x"]
    assert mask_argv(argv) == [
        "python", "-m", "vllm.entrypoints.openai.api_server", "--hf-token", "***",
        "--api-key=***", "--tokenizer", "/tok", "HF_TOKEN=***", "--num-speculative-tokens", "3",
        "--speculative-config", '{"model": "d", "num_speculative_tokens": 3}',
        "--extra", '{"auth": {"access_token": "***"}}',
        "--url", "https://***@host/x"]


# ------------------------------------------------------------ configuration

def test_build_configuration(monkeypatch):
    monkeypatch.setenv("CONTAINER_IMAGE", "nvcr.io/x/vllm:1")
    cfg = build_configuration(
        run_args={"dataset": "mtbench", "s3": {"secret": "s"}},
        serving={"model": "m", "server_argv": ["--api-key", "k"]},
        model="org/m", speculative_config={"method": "eagle3", "model": "d", "num_speculative_tokens": 3},
        engine="vllm", engine_version="0.32.0", argv=["bench", "--hf-token", "t"],
        tool_version="0.1.0", git_sha="abc123", gpu="NVIDIA H200",
        checkpoint={"path": "/m", "size_bytes": 1, "index_sha256": "00", "index_file": "config.json"},
        python_version="3.11.2", timestamp="2026-12-02T00:00:00+00:00", extra={"recipe": "r"},
    )
    assert cfg["container_image"] == "nvcr.io/x/vllm:1"
    assert cfg["model"] == "org/m" and cfg["engine_version"] == "0.32.0"
    assert cfg["speculative_config"]["num_speculative_tokens"] == 3
    assert cfg["run_args"]["s3"]["secret"] == "***"
    assert cfg["argv"] == ["bench", "--hf-token", "***"]
    assert cfg["timestamp"] == "2026-12-02T00:00:00+00:00" and cfg["recipe"] == "r"
    assert cfg["checkpoint"]["index_sha256"] == "00"
    # server argv is a list inside a dict: only the argv field gets argv masking
    assert cfg["serving"]["server_argv"] == ["--api-key", "k"]


def test_build_configuration_defaults(monkeypatch):
    monkeypatch.delenv("CONTAINER_IMAGE", raising=False)
    cfg = build_configuration(run_args={}, serving={}, model="m", speculative_config=None,
                              engine="vllm", engine_version="0.32.0", argv=[],
                              tool_version="0.1.0", git_sha=None)
    assert cfg["speculative_config"] == {"method": "none"}
    assert cfg["container_image"] == ""
    assert cfg["timestamp"].endswith("+00:00")
    assert cfg["checkpoint"] == {"path": None, "size_bytes": None, "index_sha256": None, "index_file": None}
    with pytest.raises(ValueError, match="overwrite"):
        build_configuration(run_args={}, serving={}, model="m", speculative_config=None,
                            engine="vllm", engine_version="1", argv=[], tool_version="0",
                            git_sha=None, extra={"model": "x"})


def test_checkpoint_info(tmp_path):
    (tmp_path / "config.json").write_bytes(b'{"a": 1}')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "w.bin").write_bytes(b"x" * 100)
    info = checkpoint_info(tmp_path)
    assert info == {"path": str(tmp_path), "size_bytes": 108,
                    "index_sha256": hashlib.sha256(b'{"a": 1}').hexdigest(), "index_file": "config.json"}
    (tmp_path / "model.safetensors.index.json").write_bytes(b"{}")
    info = checkpoint_info(tmp_path)
    assert info["index_file"] == "model.safetensors.index.json"
    assert info["index_sha256"] == hashlib.sha256(b"{}").hexdigest()
    assert info["size_bytes"] == 110
    assert checkpoint_info("org/hub-model")["size_bytes"] is None


# ------------------------------------------------------------ writing

def test_write_json_atomic_and_nan(tmp_path):
    path = tmp_path / "a" / "x.json"
    write_json_atomic(path, {"v": 1.5})
    assert json.loads(path.read_text()) == {"v": 1.5}
    with pytest.raises(ValueError):
        write_json_atomic(path, {"v": float("nan")})
    assert json.loads(path.read_text()) == {"v": 1.5}  # the old file is intact
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.json"]  # no temp file left


def test_complete_marker(tmp_path):
    assert not is_complete(tmp_path)
    mark_complete(tmp_path)
    assert is_complete(tmp_path)
    assert (tmp_path / "COMPLETE").read_text().strip().endswith("+00:00")


def test_responses_rows_fill_missing_texts():
    qs = [Question("81", "writing", ["u1", "u2"]), Question("82", "writing", ["v1"])]
    rows = responses_rows(qs, {("81", 0): "a1", ("82", 0): "b1"})
    assert rows == [
        {"question_id": "81", "category": "writing", "turns": ["u1", "u2"],
         "choices": [{"index": 0, "turns": ["a1", ""]}]},
        {"question_id": "82", "category": "writing", "turns": ["v1"],
         "choices": [{"index": 0, "turns": ["b1"]}]},
    ]
    assert responses_rows(qs)[1]["choices"][0]["turns"] == [""]


def test_response_texts_from_recorded_raw_export():
    texts = response_texts_from_raw(RECORDED / "profile_export_raw.jsonl")
    assert len(texts) == 12
    # AIPerf replays turn 0's reply as the assistant message of turn 1's
    # request: an independent copy of each first-turn text.
    for line in (RECORDED / "profile_export_raw.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["metadata"]["turn_index"] == 1:
            cid = r["metadata"]["conversation_id"]
            assert r["payload"]["messages"][1]["role"] == "assistant"
            assert texts[(cid, 0)] == r["payload"]["messages"][1]["content"]
            assert texts[(cid, 1)]  # second turns have text too


def test_write_point(tmp_path):
    qs = read_mtbench(DATA / "mtbench_16.jsonl", 2)
    point = tmp_path / "mtbench" / "t0_c1"
    write_point(point, dataset=DATASETS["mtbench"], acceptance={"Average_AL": 2.0},
                timing={"Output TPS": 1.0}, configuration={"model": "m"}, questions=qs,
                texts={("81", 0): "hello"})
    assert sorted(p.name for p in point.iterdir()) == [
        "COMPLETE", "acceptance_rate.json", "configuration.json", "mtbench_responses.jsonl", "timing.json"]
    rows = [json.loads(x) for x in (point / "mtbench_responses.jsonl").read_text().splitlines()]
    assert [r["question_id"] for r in rows] == ["81", "82"]
    assert rows[0]["choices"][0]["turns"] == ["hello", ""]
    other = tmp_path / "p2"
    write_point(other, dataset=DATASETS["speed_qualitative"], acceptance={}, timing={},
                configuration={}, questions=qs, complete=False)
    assert not is_complete(other) and (other / "speed_qualitative_responses.jsonl").is_file()
