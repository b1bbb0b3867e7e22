"""sweep.slo and sweep.k_schedule: validation (one line each) and what the plan hands the jobs."""
from __future__ import annotations

import json

from launcher.login.config.validate import validate
from launcher.login.plan import make_plan
from tests.support.login import with_engine


def test_slo_and_schedule_reach_every_job(compose):
    cfg = compose("sweep.baseline=true", "sweep.num_speculative_tokens=[1,3]", "sweep.slo.ttft_ms=300",
                  "sweep.slo.tpot_ms=40", "sweep.slo.percentiles={ttft_ms: 99}", "sweep.k_schedule=[[1,1,3],[2,8,1]]")
    assert validate(*with_engine(cfg)) == []
    plan = make_plan(*with_engine(cfg))
    benches = [j.bench for j in plan.jobs] + [plan.baseline.bench]
    for b in benches:
        assert b.slo["limits"] == {"ttft_ms": 300.0, "tpot_ms": 40.0}
        assert b.slo["percentiles"] == {"ttft_ms": 99.0, "tpot_ms": 90.0}
        assert b.slo["aiperf_slos"] == {"time_to_first_token": 300.0, "inter_token_latency": 40.0}
        assert b.warmup  # on by default with an SLO
    sched = [j for j in plan.jobs if (j.speculative_config or {}).get("num_speculative_tokens_per_batch_size")]
    assert len(sched) == 1 and "-k3-sched-" in sched[0].server_id
    assert sched[0].speculative_config["num_speculative_tokens_per_batch_size"] == [[1, 1, 3], [2, 8, 1]]
    assert sched[0].speculative_config["num_speculative_tokens"] == 3
    assert json.loads(json.dumps(plan.jobs[0].bench.slo)) == plan.jobs[0].bench.slo  # job.json keeps it


def test_no_slo_by_default(compose):
    plan = make_plan(*with_engine(compose()))
    assert all(j.bench.slo is None for j in plan.jobs) and not plan.jobs[0].bench.warmup


def test_bad_slo_and_schedule_are_one_line_errors(compose):
    cfg = compose("sweep.slo.ttft_ms=0", "sweep.slo.itl_ms=5", "sweep.slo.tpot_ms=5", "sweep.slo.percentile=0",
                  "sweep.slo.good_share=1.5", "sweep.slo.percentiles={e2e_ms: 99}", "sweep.k_schedule=[[2,4,1]]")
    lines = [str(e) for e in validate(*with_engine(cfg))]
    for field in ("sweep.slo.ttft_ms", "sweep.slo.itl_ms", "sweep.slo.percentile:", "sweep.slo.good_share",
                  "sweep.slo.percentiles.e2e_ms", "sweep.k_schedule"):
        assert any(line.startswith(field) for line in lines), (field, lines)
    assert all("\n" not in line and "fix:" in line for line in lines)
    assert any("set only one" in line for line in lines)
    lines = [str(e) for e in validate(*with_engine(compose("sweep.k_schedule=[[1,2,3],[2,4,1]]")))]  # overlapping
    assert len(lines) == 1 and lines[0].startswith("sweep.k_schedule")
