"""The recorded H100 folders of 2026-12-06 as a results folder the tools read: copied into a test's
tmp folder (the tools write speedup.json and reports into it), with each point's COMPLETE marker
put back where the job's summary.json says the point completed (the copies keep the JSON files and
machine samples only: tests/data/h100_vllm026_dflash_explained/PROVENANCE.md)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from launcher.results.layout import COMPLETE_FILE

DATA = Path(__file__).resolve().parents[1] / "data"
DFLASH = DATA / "h100_vllm026_dflash_explained"
ASYNC_PAIR = DATA / "h100_vllm026_async_pair"  # gpu_8b: the recipe's draft_model server, the same with
# --async-scheduling, and their baseline (/work/shared/gpu/runs/h100-2026-12-06/PROVENANCE.md)
DFLASH_JOB = "qwen3-8b-shaped-dflash-k15-fal4-tp1-9ee4b6e7"
DFLASH_BASE = "qwen3-8b-shaped-none-tp1-9035ec93"
DRAFT_JOB = "llama8b-shaped-draft_model-k3-fal3.5-tp1-77730b95"
ASYNC_JOB = "llama8b-shaped-draft_model-k3-fal3.5-tp1-7a7929ac"


def results_copy(src: Path, dst: Path) -> Path:
    """``src`` copied to ``dst`` with its points' COMPLETE markers; returns ``dst``."""
    shutil.copytree(src, dst)
    for summary in dst.glob("*/summary.json"):
        for row in json.loads(summary.read_text()).get("points") or []:
            if row.get("status") == "complete" and row.get("dir"):
                (summary.parent / row["dir"] / COMPLETE_FILE).write_text("recorded complete\n")
    return dst


def repeats(root: Path, job: str, c: int) -> dict:
    return json.loads((root / job / "mtbench" / f"t0_c{c}" / "repeats.json").read_text())


def server_al(root: Path, job: str, c: int) -> float:
    rows = json.loads((root / job / "summary.json").read_text())["points"]
    return float(next(r["Server_AL"] for r in rows if r["concurrency"] == c))
