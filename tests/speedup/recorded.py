"""The recorded H100 folders of 2026-12-06 as a results folder the tools read: copied into a test's
tmp folder (the tools write speedup.json and reports into it), with each point's COMPLETE marker
put back where the job's summary.json says the point completed (the copies keep the JSON files and
machine samples only: tests/data/h100_vllm026_dflash_explained/PROVENANCE.md)."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from statistics import mean, stdev

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


# ------------------------------------------------------------------ the cost model across ALs, from the files

T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201}  # Student's t, two-sided 95 %, by degrees of freedom (the tests' own table)


def output_tokens(root: Path, job: str, c: int) -> float:
    doc = json.loads((root / job / "mtbench" / f"t0_c{c}" / "timing.json").read_text())
    return float(doc[0]["Number of Output Tokens"]["mean"])


def repeat_parts(root: Path, job: str, base: str, c: int) -> list[dict]:
    """Each repeat of ``job`` at C with the baseline's same repeat: speedup, TTFT, TPOT and the server's AL
    (1 + accepted / steps), read from the two repeats.json."""
    s, b = repeats(root, job, c)["per_repeat"], repeats(root, base, c)["per_repeat"]
    return [{"speedup": x["Output TPS"] / y["Output TPS"], "ttft": x["TTFT s"], "tpot": x["TPOT s"],
             "al": 1 + x["num_accepted_draft_tokens"] / x["num_spec_steps"]} for x, y in zip(s, b)]


def request_time(rep: dict, n: float, al: float) -> float:
    """A request at AL ``al``: its prefill and (n - 1) / al verify steps of al_measured x TPOT each."""
    return rep["ttft"] + (n - 1) / al * rep["al"] * rep["tpot"]


def model_prediction(reps: list[dict], n: float, al: float, n_new: int, step_drift: float = 0.011) -> tuple:
    """(speedup, lo, hi) at ``al`` from one level's repeats, as docs/speedup.md writes the model and its
    interval: the speedup moves as the request time; the interval adds the repeats' spread, the prefill's
    spread and the step drift in quadrature."""
    preds = [r["speedup"] * request_time(r, n, r["al"]) / request_time(r, n, al) for r in reps]
    s, big_n = mean(preds), len(preds)
    times = [request_time(r, n, al) for r in reps]
    t = T975[big_n - 1]
    terms = [t * stdev(preds) / s * math.sqrt(1 / big_n + 1 / n_new),
             t * stdev(r["ttft"] for r in reps) * math.sqrt(1 + 1 / big_n) / mean(times),
             step_drift * mean(x - r["ttft"] for x, r in zip(times, reps)) / mean(times)]
    h = math.sqrt(sum(v * v for v in terms))
    return s, s * (1 - h), s * (1 + h)
