"""Write small, valid result directories in our layout (docs/results-layout.md).

Every writer takes keyword overrides so a test can break exactly one thing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

_DROP = object()  # pass as a value to remove the key


def _merge(base: dict, overrides: dict) -> dict:
    out = dict(base)
    for k, v in overrides.items():
        if v is _DROP:
            out.pop(k, None)
        else:
            out[k] = v
    return out


EXT = "specdec_launcher"


def _merge_routed(base: dict, ext: dict, overrides: dict) -> dict:
    """Overrides of our own figures go into the extension, the rest to the top level."""
    top = {k: v for k, v in overrides.items() if k not in ext}
    inner = {k: v for k, v in overrides.items() if k in ext}
    out = _merge(base, top)
    out[EXT] = _merge(ext, inner)
    return out


def configuration(**overrides: Any) -> dict:
    """specdec_bench's flat keys, then its provenance keys, then ours."""
    base = {
        "tokenizer": "/ckpt/qwen3_8b", "mtbench": "/data/mt_bench/question.jsonl", "specbench": None,
        "dataset": None, "num_requests": None, "engine": "VLLM", "speculative_algorithm": "EAGLE3",
        "model_dir": "Qwen/Qwen3-8B", "draft_model_dir": "/ckpt/qwen3_8b_eagle3", "temperature": 0.0,
        "output_length": 4096, "draft_length": 3, "tp_size": 1, "ep_size": 1, "concurrency": 1,
        "serving_config": {"server_argv": ["vllm", "serve", "Qwen/Qwen3-8B", "--api-key", "***REDACTED***"]},
        "engine_version": "0.33.0",
        "gpu": "NVIDIA H200",
        "python_version": "3.11.7",
        "argv": ["python", "-m", "launcher.bench", "--hf-token", "***REDACTED***"],
        "container_image": "nvcr.io/nvidia/vllm:25.09-py3",
        "checkpoint": {"path": "/ckpt/qwen3_8b", "size_bytes": 16384, "index_source": "config.json",
                       "index_sha256": "ab" * 32},
        "timestamp": "2026-12-02T10:00:00Z",
        "hf_token": "***REDACTED***",
    }
    ext = {"tool_version": "0.1.0", "git_sha": "0123456789abcdef0123456789abcdef01234567",
           "speculative_config": {"method": "eagle3", "model": "/ckpt/qwen3_8b_eagle3", "num_speculative_tokens": 3},
           "status": "complete", "reason": None}
    return _merge_routed(base, ext, overrides)


def _stats(lo: str = "1.0000", hi: str = "9.0000") -> dict:
    return {"min": lo, "max": hi, "mean": "4.0000", "std": "1.5000",
            "quantiles": {"0.25": "3.0000", "0.5": "4.0000", "0.75": "5.0000"}}


def timing(**overrides: Any) -> dict:
    """specdec_bench's Timing object (seconds, 4-decimal strings) plus our extension."""
    base = {
        "Output TPS": 812.5, "Output TPS/gpu": 812.5,
        "E2E Request Time": _stats(), "TTFT Time": _stats("0.0100", "0.0900"),
        "Request Generation Step Time": _stats("0.0100", "0.0300"),
        "Request Generation Tokens Per Second": _stats("50.0000", "90.0000"),
        "Number of Output Tokens": _stats("100.0000", "256.0000"),
    }
    ext = {"counts": {"E2E Request Time": 32, "TTFT Time": 32, "Request Generation Step Time": 900,
                      "Request Generation Tokens Per Second": 32, "Number of Output Tokens": 32},
           "num_gpus": 1, "num_requests": 16, "num_turns": 32, "failed_requests": 0,
           "total_output_tokens": 4096, "duration_s": 5.04, "status": "complete", "reason": None}
    return _merge_routed(base, ext, overrides)


def acceptance(**overrides: Any) -> dict:
    base = {
        "Request_AL": {"0": 2.5, "1": 2.7}, "Category_AL": {"writing": 2.6},
        "Average_AL": 2.61,
        "Acceptance_Length_Histogram": {"1": 10, "2": 20, "3": 30, "4": 40},
        "Conditional_Acceptance_Rate": {"1": 1.0, "2": 0.9, "3": 0.78, "4": 0.57},
        "Joint_Acceptance_Rate": {"1": 1.0, "2": 0.9, "3": 0.7, "4": 0.4},
    }
    ext = {"Server_AL": 2.63, "Prometheus_AL": 2.63, "speculative": True, "num_requests": 16, "num_turns": 32,
           "failed_requests": 0, "num_spec_steps": 900, "num_accepted_draft_tokens": 1450,
           "num_draft_tokens": 2700}
    return _merge_routed(base, ext, overrides)


def write_run(
    path: Path,
    *,
    config: dict | None = None,
    timing_doc: dict | None = None,
    acceptance_doc: dict | None = None,
    dataset: str = "mtbench",
    responses: int = 3,
    extra_files: int = 0,
    seed: str = "",
) -> Path:
    """One point folder: the specdec_bench files, AIPerf artifacts and COMPLETE.

    ``seed`` changes the file contents so that two runs never hold identical bytes.
    """
    path.mkdir(parents=True, exist_ok=True)
    docs = {
        "configuration.json": configuration() if config is None else config,
        "timing.json": timing() if timing_doc is None else timing_doc,
        "acceptance_rate.json": acceptance() if acceptance_doc is None else acceptance_doc,
    }
    for name, doc in docs.items():
        if name != "configuration.json" and isinstance(doc, dict):
            doc = [doc]  # specdec_bench's metric files are lists of runs
        (path / name).write_text(json.dumps(doc, indent=1) + "\n")
    lines = [
        json.dumps({"question_id": 81 + i, "category": "writing", "turns": [f"q{i}{seed}"],
                    "choices": [{"index": 0, "turns": [f"answer {i} {seed}"]}]})
        for i in range(responses)
    ]
    (path / f"{dataset}_responses.jsonl").write_text("\n".join(lines) + "\n")
    aiperf = path / "aiperf"
    aiperf.mkdir(exist_ok=True)
    (aiperf / "profile_export_aiperf.json").write_text(json.dumps({"benchmark_duration": 5.0, "seed": seed}))
    (aiperf / "profile_export.jsonl").write_text(json.dumps({"metadata": {"seed": seed}, "metrics": {}}) + "\n")
    for i in range(extra_files):
        (aiperf / f"extra_{i}.json").write_text(json.dumps({"i": i, "seed": seed}))
    (path / "COMPLETE").write_text(hashlib.sha256(f"{path}{seed}".encode()).hexdigest() + "\n")
    return path


def write_sweep(job_dir: Path, points: list[str], **run_kwargs: Any) -> list[Path]:
    """A job folder: job-level files plus one run per ``<dataset>/t<T>_c<C>`` point."""
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / "summary.json").write_text(json.dumps({"schema_version": 1, "points": points}))
    (job_dir / "gpu_telemetry.json").write_text(json.dumps({"available": False}))
    (job_dir / "logs").mkdir(exist_ok=True)
    (job_dir / "logs" / "server.log").write_text("INFO started\n")
    runs = []
    for point in points:
        dataset = point.split("/", 1)[0]
        runs.append(write_run(job_dir / point, dataset=dataset, seed=point, **run_kwargs))
    return runs


def local_files(run_dir: Path) -> dict[str, bytes]:
    """Every file of a run directory by its POSIX path inside the run."""
    return {p.relative_to(run_dir).as_posix(): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


DROP = _DROP
