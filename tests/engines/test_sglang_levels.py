"""SGLang 0.5.17's EAGLE3 head (Llama-3.1-8B shape, k = 3) on an H100 at two forced levels (2 and 3.5)
with its matched SGLang baseline, through the main command (tests/data/h100_sglang0517_eagle3_levels,
PROVENANCE.md). Read from the files, independently of the product's readers where a figure is derived:

- SGLang's counters count the tokens a request emits, so each request's last verify step, cut at
  max_tokens, loses the drafts it accepted past the cut: at forced AL 2 (every step accepts exactly
  one draft) the counters lose exactly one accepted draft per finished request, and the forced
  verdict allows that cut (it failed the run before);
- each point's speedup is its held repeat's Output TPS over the baseline's, and over repeats the mean
  of the per-repeat ratios;
- the step cost (AL / speedup) of the two levels agrees, so SGLang has a break-even AL.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from statistics import mean

import pytest

from launcher.engines.forced_acceptance import run_verdicts, verdict

RUN = Path(__file__).resolve().parents[1] / "data" / "h100_sglang0517_eagle3_levels"
LEVELS = {2.0: next(RUN.glob("*-fal2-*")), 3.5: next(RUN.glob("*-fal3.5-*"))}
BASE = next(RUN.glob("*-none-*"))
CS = (1, 4, 16, 64)


def load(path: Path):
    return json.loads(path.read_text())


def window(job: Path, c: int) -> dict:
    return load(job / f"mtbench/t0_c{c}/acceptance_rate.json")[0]["specdec_launcher"]["prometheus_window"]


def tps(job: Path, c: int) -> list[float]:
    return [r["Output TPS"] for r in load(job / f"mtbench/t0_c{c}/repeats.json")["per_repeat"]]


@pytest.mark.parametrize("c", CS)
def test_at_an_integer_level_the_counters_lose_one_draft_per_request(c):
    w = window(LEVELS[2.0], c)
    assert w["is_the_points_own"] and w["finished_requests"] > 0
    assert w["num_drafts"] - w["num_accepted_tokens"] == w["finished_requests"]  # every step accepted 1 but the last


def _runs(job: Path, with_requests: bool) -> list[dict]:
    return [{"dataset": "mtbench", "temperature": 0.0, "points": [f"mtbench/t0_c{c}"],
             "num_drafts": window(job, c)["num_drafts"], "num_accepted_tokens": window(job, c)["num_accepted_tokens"],
             **({"finished_requests": window(job, c)["finished_requests"]} if with_requests else {})} for c in CS]


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_the_forced_verdict_allows_the_cut_last_steps(level):
    batch = {f"mtbench/t0_c{c}": c for c in CS}
    judged = run_verdicts({"length": level}, 3, _runs(LEVELS[level], True), batch_of=batch)
    assert judged["verdict"] == "pass", judged
    for r in judged["runs"]:
        assert r["measured_al"] <= r["expected_al"]          # the cut only lowers the count
        assert r["cut_allowance"] > 0
    if level == 2.0:  # the device run's own verdict, without the allowance: failed at every point
        recorded = load(LEVELS[level] / "summary.json")["forced_acceptance"]
        assert recorded["verdict"] == "fail"
        assert run_verdicts({"length": level}, 3, _runs(LEVELS[level], False), batch_of=batch)["verdict"] == "fail"


def test_the_allowance_is_one_sided():
    above = verdict({"length": 2.0}, 3, 1000, 1000 + 50, cut_requests=10)  # AL 2.05: above by more than FLOOR
    assert above["passed"] is False and above["cut_allowance"] == pytest.approx(0.01)


@pytest.mark.parametrize("level", sorted(LEVELS))
@pytest.mark.parametrize("c", CS)
def test_each_speedup_is_the_per_repeat_throughput_ratio(tmp_path, level, c):
    from launcher.speedup.analysis import write_all
    root = tmp_path / "run"
    shutil.copytree(RUN, root)
    res = write_all(root)
    row = next(r for r in res["points"] if r["concurrency"] == c and Path(r["job_dir"]).name == LEVELS[level].name)
    ratios = [s / b for s, b in zip(tps(LEVELS[level], c), tps(BASE, c))]
    assert row["throughput_repeats"]["mean"] == pytest.approx(mean(ratios), rel=1e-6)
    # the point's own figure: the repeats its files hold (the lower median of each side)
    held = lambda job: tps(job, c)[load(job / f"mtbench/t0_c{c}/repeats.json")["files_hold"]["repeat"] - 1]  # noqa: E731
    assert row["speedup"]["throughput"] == pytest.approx(held(LEVELS[level]) / held(BASE), rel=1e-6)


@pytest.mark.parametrize("c", (1, 16))
def test_the_two_levels_give_one_step_cost(c):
    """AL / speedup at each level: at C = 1 and 16 the two agree within 5 % (the step does not
    depend on how many drafts it accepts), so a break-even AL exists."""
    costs = []
    for level, job in LEVELS.items():
        al = load(job / f"mtbench/t0_c{c}/acceptance_rate.json")[0]["specdec_launcher"]["Server_AL"]
        sp = mean(s / b for s, b in zip(tps(job, c), tps(BASE, c)))
        costs.append(al / sp)
    assert abs(costs[0] - costs[1]) / mean(costs) < 0.05
    assert 1.0 < mean(costs) < 2.0
