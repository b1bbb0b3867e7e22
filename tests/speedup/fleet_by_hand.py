"""The fleet figures of the recorded H100 folders worked out by hand from the raw per-point files
(repeats.json, timing.json), with numpy's interpolation and Student's t from a table: what
tests/speedup/test_fleet_recorded.py and tests/docs/test_fleet_figures.py hold the product's
analysis (launcher.speedup.fleet) and docs/fleet.md to. Nothing here calls the product's code."""
from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import mean, stdev

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "data"
# folder -> (the speculative jobs whose summary.json says complete, their baseline); the DFlash
# folder's forced-6 job was cut short (its PROVENANCE.md) and is not compared
FOLDERS = {
    "h100_vllm026_dflash_2starts": (["qwen3-8b-shaped-dflash-k15-fal4-tp1-9ee4b6e7"],
                                    "qwen3-8b-shaped-none-tp1-9035ec93"),
    "h100_vllm026_qwen3_eagle3_2starts": (["qwen3-8b-shaped-eagle3-k3-fal2-tp1-49dda453",
                                           "qwen3-8b-shaped-eagle3-k3-fal3.5-tp1-15484f71"],
                                          "qwen3-8b-shaped-none-tp1-0dcb1aec"),
    "h100_vllm026_llama_eagle3_1start": (["llama8b-shaped-eagle3-k3-fal2-tp1-90f1097e",
                                          "llama8b-shaped-eagle3-k3-fal3.5-tp1-1445b9db"],
                                         "llama8b-shaped-none-tp1-9724f184"),
}
T975 = {2: 4.303, 5: 2.571}  # Student's t, 0.975 quantile, by degrees of freedom
PRICE = 2.50  # USD per GPU-hour, the docs' example


def points(job_dir: Path) -> dict[int, list[dict]]:
    """C -> each repeat's {x: Decode tok/s, y: Output TPS per GPU, w: power W per GPU}."""
    out = {}
    for d in sorted((job_dir / "mtbench").iterdir()):
        reps = json.loads((d / "repeats.json").read_text())["per_repeat"]
        gpus = json.loads((d / "timing.json").read_text())[-1]["specdec_launcher"]["num_gpus"]
        out[int(d.name.split("_c")[1])] = [{"x": r["Decode tok/s"], "y": r["Output TPS"] / gpus,
                                            "w": r["machine"]["power_w"], "samples": r["machine"]["samples"]}
                                           for r in reps]
    return out


def ci(values: list[float]) -> tuple[float, float, float]:
    m = mean(values)
    half = T975[len(values) - 1] * stdev(values) / math.sqrt(len(values))
    return m, max(0.0, m - half), m + half  # positive figures: the interval stops at 0


def spec_at(curve: list[dict], x: float) -> tuple[float, float, bool]:
    """(y, w, at least) of a curve whose speed falls and throughput rises with C, at speed x."""
    xs = [p["x"] for p in curve]
    if x < min(xs):
        slow = min(curve, key=lambda p: p["x"])
        return slow["y"], slow["w"], True
    order = np.argsort(xs)
    return (float(np.interp(x, np.array(xs)[order], np.array([p["y"] for p in curve])[order])),
            float(np.interp(x, np.array(xs)[order], np.array([p["w"] for p in curve])[order])), False)


def monotone(pts: dict[int, list[dict]], i: int) -> bool:
    cs = sorted(pts)
    return all(pts[a][i]["x"] > pts[b][i]["x"] and pts[a][i]["y"] < pts[b][i]["y"] for a, b in zip(cs, cs[1:]))


def at_baseline_points(spec: dict[int, list[dict]], base: dict[int, list[dict]]) -> dict[int, dict]:
    """At each baseline point's per-user speed (repeat i's, for the i-th pair of curves): the gain,
    both sides' J per token and $ per million tokens, each (mean, lo, hi)."""
    n = min(len(v) for v in [*spec.values(), *base.values()])
    out = {}
    for c in sorted(base):
        gains, js, jb, us, ub, xs, low, yss, ybs = [], [], [], [], [], [], [], [], []
        for i in range(n):
            x, yb, wb = base[c][i]["x"], base[c][i]["y"], base[c][i]["w"]
            ys, ws, at_least = spec_at([spec[k][i] for k in spec], x)
            gains.append(ys / yb)
            js.append(ws / ys)
            jb.append(wb / yb)
            us.append(PRICE * 1e6 / 3600 / ys)
            ub.append(PRICE * 1e6 / 3600 / yb)
            xs.append(x)
            low.append(at_least)
            yss.append(ys)
            ybs.append(yb)
        out[c] = {"x": mean(xs), "gain": ci(gains), "j_spec": ci(js), "j_base": ci(jb), "usd_spec": ci(us),
                  "usd_base": ci(ub), "at_least": any(low), "n": n, "y_spec": mean(yss), "y_base": mean(ybs)}
    return out


def per_point(pts: dict[int, list[dict]]) -> dict[int, dict]:
    """Each point's J per token and $ per million tokens over its repeats, (mean, lo, hi)."""
    return {c: {"j": ci([r["w"] / r["y"] for r in reps]), "usd": ci([PRICE * 1e6 / 3600 / r["y"] for r in reps]),
                "x": mean(r["x"] for r in reps)} for c, reps in pts.items()}
