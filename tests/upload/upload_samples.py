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


def configuration(**overrides: Any) -> dict:
    base = {
        "model": "Qwen/Qwen3-8B",
        "speculative_config": {"method": "eagle3", "model": "/ckpt/qwen3_8b_eagle3", "num_speculative_tokens": 3},
        "engine": "vllm",
        "engine_version": "0.33.0",
        "container_image": "nvcr.io/nvidia/vllm:25.09-py3",
        "timestamp": "2026-12-02T10:00:00Z",
        "gpu": {"name": "NVIDIA H200"},
        "python_version": "3.11.7",
        "tool_version": "0.1.0",
        "git_sha": "0123456789abcdef0123456789abcdef01234567",
        "tokenizer": "/ckpt/qwen3_8b",
        "hf_token": "***",
        "argv": ["vllm", "serve", "Qwen/Qwen3-8B", "--num-speculative-tokens", "3", "--api-key", "***"],
        "checkpoint": {"path": "/ckpt/qwen3_8b", "size_bytes": 16384, "index_sha256": "ab" * 32},
    }
    return _merge(base, overrides)


def timing(**overrides: Any) -> dict:
    stats = {"min": 1.0, "max": 9.0, "mean": 4.0, "std": 1.5, "p25": 3.0, "p50": 4.0, "p75": 5.0, "count": 16}
    base = {
        "Output TPS": 812.5, "Output TPS/gpu": 812.5, "num_gpus": 1,
        "TTFT Time": stats, "E2E Request Time": stats, "Request Generation Tokens Per Second": stats,
        "total_output_tokens": 4096, "duration_s": 5.04, "num_requests": 16, "failed_requests": 0,
    }
    return _merge(base, overrides)


def acceptance(**overrides: Any) -> dict:
    base = {
        "Average_AL": 2.61, "Category_AL": {"writing": 2.4, "coding": 2.8},
        "Request_AL": {"81": 2.5, "82": 2.7},
        "Acceptance_Length_Histogram": {"1": 10, "2": 20, "3": 30, "4": 40},
        "Conditional_Acceptance_Rate": {"2": 0.9, "3": 0.78, "4": 0.57},
        "Joint_Acceptance_Rate": {"2": 0.9, "3": 0.7, "4": 0.4},
        "Server_AL": 2.63, "Prometheus_AL": 2.63, "num_requests": 16, "num_turns": 32,
        "num_spec_steps": 900, "num_accepted_draft_tokens": 1450, "num_draft_tokens": 2700, "speculative": True,
    }
    return _merge(base, overrides)


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
