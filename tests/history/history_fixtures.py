"""Recorded runs for the history: the recorded smoke run (tests/report/data/smoke_run1) copied
as four uploads on four days, the third with a planted Average_AL drop, and specdec_bench's
own output folders (tests/results/golden: files its own classes wrote) with the
configuration.json its run.py writes."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "tests" / "report" / "data" / "smoke_run1"
GOLDEN = ROOT / "tests" / "results" / "golden"
DAYS = ("2026-11-28", "2026-11-29", "2026-11-30", "2026-12-01")
DROP_DAY = DAYS[2]      # the planted regression begins here and stays
DROP = 0.7              # Average_AL (and every Request_AL) x 0.7, at T=0
ENGINES = ("0.31.0", "0.32.0", "0.32.0", "0.32.0")
SDB_DAYS = ("2026-11-28", "2026-11-30")


def _edit_last(path: Path, edit) -> None:
    doc = json.loads(path.read_text())
    if isinstance(doc, list):
        doc[-1] = edit(doc[-1])
    else:
        doc = edit(doc)
    path.write_text(json.dumps(doc, indent=2))


def _drop(acc: dict) -> dict:
    acc["Average_AL"] *= DROP
    acc["Request_AL"] = {k: v * DROP for k, v in acc["Request_AL"].items()}
    ext = acc.get("specdec_launcher") or {}
    if ext.get("Server_AL"):
        ext["Server_AL"] *= DROP
    return acc


def our_upload(dest: Path, day: str, engine: str, drop: bool) -> Path:
    """One recorded job folder as it was on ``day`` (every point's configuration.json timestamp)."""
    job = shutil.copytree(SMOKE, dest)
    for conf in job.glob("*/*/configuration.json"):
        def edit(c):
            c["timestamp"] = f"{day}T06:00:00+00:00"
            c["engine_version"] = engine
            c["container_image"] = f"vllm-cpu:{engine}"
            return c
        _edit_last(conf, edit)
        if drop and conf.parent.name.startswith("t0_"):  # T=0: at T=0.7 the AL is near 1 already
            _edit_last(conf.parent / "acceptance_rate.json", _drop)
    return job


def specdec_bench_folder(dest: Path, day: str) -> Path:
    """specdec_bench's --save_dir for MT-Bench: its metric files, and configuration.json as its run.py writes."""
    dest.mkdir(parents=True)
    for f in ("acceptance_rate.json", "timing.json", "mtbench_responses.jsonl"):
        shutil.copy(GOLDEN / "mtbench" / f, dest / f)
    conf = {"tokenizer": "Qwen/Qwen3-8B", "mtbench": "/data/mt_bench/question.jsonl", "specbench": None,
            "random_isl": None, "dataset": None, "dataset_path": None, "num_requests": 3, "engine": "VLLM",
            "speculative_algorithm": "EAGLE3", "model_dir": "Qwen/Qwen3-8B", "draft_model_dir": "/ckpt/qwen3_8b_eagle3",
            "runtime_params": None, "temperature": 0.0, "max_seq_len": None, "output_length": 4096,
            "draft_length": 3, "block_size": None, "tp_size": 2, "ep_size": 1, "concurrency": 2,
            "trust_remote_code": False, "aa_timing": None, "ignore_eos": False, "show_progress": None,
            "completions": None, "postprocess": "base", "save_dir": str(dest), "serving_config": None,
            "engine_version": "0.26.0", "gpu": "NVIDIA H200", "python_version": "3.12.3", "argv": ["run.py"],
            "specdec_bench_version": "0.1.0", "specdec_bench_sha": "a2fbac7bad8ab446d3f8783dadb0c3366eb0ad73",
            "modelopt_version": None, "modelopt_sha": None, "container_image": "nvcr.io/nvidia/vllm:25.09-py3",
            "checkpoint": None, "timestamp": f"{day}T08:00:00+00:00", "jira_ticket": None,
            "huggingface_model_id": None}
    (dest / "configuration.json").write_text(json.dumps(conf, indent=4))
    return dest


def recorded_uploads(root: Path) -> list[Path]:
    """The folders to upload, one upload_to_s3 each (LOCAL_DIR's name keys the upload)."""
    out = [our_upload(root / f"{day}_smoke", day, eng, day >= DROP_DAY) for day, eng in zip(DAYS, ENGINES)]
    out += [specdec_bench_folder(root / f"{day}_specdec_bench" / "qwen3_eagle3_mtbench", day).parent
            for day in SDB_DAYS]
    return out
