import hashlib
import json
from pathlib import Path

import pytest

from launcher.runtime.datasets import DATASETS, Question, read_mtbench
from launcher.bench.result_files import (
    build_configuration, checkpoint_info, is_complete, is_secret_key, mark_complete,
    mask_argv, mask_secrets, response_texts_from_raw, responses_rows, write_json_atomic,
    write_point, MASK, SPECDEC_ARGS, speculative_algorithm,
)
from launcher.results import EXTENSION_KEY

M = MASK
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
            "hf_token": M, "HF_TOKEN": M, "api_key": M, "apiKey": M,
            "AWS_SECRET_ACCESS_KEY": M, "db_password": M, "key": M,
            "credentials": M,
            "tokenizer": "/models/tok", "tokenizer_path": "/t", "tokenizer_mode": "auto",
            "num_speculative_tokens": 3, "max_tokens": 512, "empty_token": None,
            "model": "m",
        }]},
        "top_secret": M,
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
        "python", "-m", "vllm.entrypoints.openai.api_server", "--hf-token", M,
        f"--api-key={M}", "--tokenizer", "/tok", f"HF_TOKEN={M}", "--num-speculative-tokens", "3",
        "--speculative-config", '{"model": "d", "num_speculative_tokens": 3}',
        "--extra", json.dumps({"auth": {"access_token": M}}),
        "--url", "https://***@host/x"]


# ------------------------------------------------------------ configuration

def test_build_configuration(monkeypatch):
    monkeypatch.setenv("CONTAINER_IMAGE", "nvcr.io/x/vllm:1")
    cfg = build_configuration(
        run_args={"engine": "VLLM", "speculative_algorithm": "EAGLE3", "model_dir": "org/m",
                  "runtime_params": {"s3": {"secret": "s"}}, "concurrency": 4},
        serving_config={"server_argv": ["--api-key", "k"]},
        engine_version="0.32.0", argv=["bench", "--hf-token", "t"], gpu="NVIDIA H200",
        checkpoint={"path": "/m", "size_bytes": 1, "index_sha256": "00", "index_source": "config.json"},
        python_version="3.11.2", timestamp="2026-12-02T00:00:00+00:00", extension={"recipe": "r"},
    )
    # specdec_bench's flat argument keys first, in its order, then its provenance keys
    assert list(cfg)[:len(SPECDEC_ARGS)] == list(SPECDEC_ARGS)
    assert list(cfg)[len(SPECDEC_ARGS):] == [
        "serving_config", "engine_version", "gpu", "python_version", "argv", "specdec_bench_version",
        "specdec_bench_sha", "modelopt_version", "modelopt_sha", "container_image", "checkpoint", "timestamp",
        "jira_ticket", "huggingface_model_id", EXTENSION_KEY]
    assert cfg["container_image"] == "nvcr.io/x/vllm:1" and cfg["concurrency"] == 4
    assert cfg["model_dir"] == "org/m" and cfg["engine_version"] == "0.32.0" and cfg["tp_size"] is None
    assert cfg["runtime_params"]["s3"]["secret"] == M
    assert cfg["argv"] == ["bench", "--hf-token", M]
    assert cfg[EXTENSION_KEY] == {"recipe": "r"}
    assert cfg["checkpoint"]["index_sha256"] == "00"
    # server argv is a list inside a dict: only the argv field gets argv masking
    assert cfg["serving_config"]["server_argv"] == ["--api-key", "k"]


def test_build_configuration_defaults(monkeypatch):
    monkeypatch.delenv("CONTAINER_IMAGE", raising=False)
    cfg = build_configuration(run_args={}, serving_config={}, engine_version="0.32.0", argv=[])
    assert cfg["container_image"] is None
    assert cfg["timestamp"].endswith("+00:00")
    assert cfg["checkpoint"] == {"path": None, "size_bytes": None, "index_sha256": None, "index_source": None}
    with pytest.raises(ValueError, match="specdec_bench does not have"):
        build_configuration(run_args={"recipe": "x"}, serving_config={}, engine_version="1", argv=[])


@pytest.mark.parametrize("method, name", [("eagle3", "EAGLE3"), ("draft_model", "DRAFT_TARGET"), ("ngram", "NGRAM"),
                                          ("qwen3_next_mtp", "MTP"), (None, "NONE"), ("dflash", "DFLASH")])
def test_speculative_algorithm_names(method, name):
    assert speculative_algorithm(method) == name


def test_checkpoint_info(tmp_path):
    (tmp_path / "config.json").write_bytes(b'{"a": 1}')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "w.bin").write_bytes(b"x" * 100)
    info = checkpoint_info(tmp_path)
    assert info == {"path": str(tmp_path), "size_bytes": 108,
                    "index_sha256": hashlib.sha256(b'{"a": 1}').hexdigest(), "index_source": "config.json"}
    (tmp_path / "model.safetensors.index.json").write_bytes(b"{}")
    info = checkpoint_info(tmp_path)
    assert info["index_source"] == "model.safetensors.index.json"
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
    rows = responses_rows(qs, {("81", 0): "a1", ("82", 0): "b1"}, "specbench")
    assert rows == [
        {"question_id": 81, "category": "writing", "turns": ["u1", "u2"],
         "choices": [{"index": 0, "turns": ["a1", ""]}]},
        {"question_id": 82, "category": "writing", "turns": ["v1"],
         "choices": [{"index": 0, "turns": ["b1"]}]},
    ]
    speed = responses_rows([Question("speed-1", "c", ["u"])], None, "speed_qualitative")
    assert speed[0]["question_id"] == "speed-1"
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
    # a rerun into the same folder appends, as specdec_bench does; readers take the last
    write_point(point, dataset=DATASETS["mtbench"], acceptance={"Average_AL": 3.0},
                timing={"Output TPS": 2.0}, configuration={"model": "m"}, questions=qs,
                texts={("81", 0): "hello"})
    assert [d["Average_AL"] for d in json.loads((point / "acceptance_rate.json").read_text())] == [2.0, 3.0]
    assert [d["Output TPS"] for d in json.loads((point / "timing.json").read_text())] == [1.0, 2.0]
    assert sorted(p.name for p in point.iterdir()) == [
        "COMPLETE", "acceptance_rate.json", "configuration.json", "mtbench_responses.jsonl", "timing.json"]
    rows = [json.loads(x) for x in (point / "mtbench_responses.jsonl").read_text().splitlines()]
    assert [r["question_id"] for r in rows] == [81, 82]  # MTBench: 81 + run index, an integer
    assert rows[0]["choices"][0]["turns"] == ["hello", ""]
    other = tmp_path / "p2"
    write_point(other, dataset=DATASETS["speed_qualitative"], acceptance={}, timing={},
                configuration={}, questions=qs, complete=False)
    assert not is_complete(other) and (other / "specbench_responses.jsonl").is_file()
