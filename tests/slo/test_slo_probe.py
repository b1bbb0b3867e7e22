"""The probe loop of the max-load search (launcher/bench/slo_probe.py) with a stand-in
for the AIPerf runs: which concurrencies it measures, and what summary.json gets."""
from __future__ import annotations

from launcher.bench.bench_run import BenchRun
from launcher.bench.run_context import PointContext
from launcher.bench.point_outcome import PointOutcome
from launcher.bench.slo_probe import search
from launcher.contracts.job import BenchSpec
from launcher.contracts.server_ready import ServerReady
from launcher.engines import get_engine


class Progress:
    total = 0


def context(slo, tmp_path) -> PointContext:
    bench = BenchSpec(model="tiny", tokenizer="/tok", save_dir=str(tmp_path), slo=slo)
    return PointContext(run=BenchRun(bench, "http://127.0.0.1:1"), engine_version=None, server_ready=ServerReady(),
                        job=None, engine=get_engine("vllm"))


def run(truth, concurrencies, slo_extra=None, tmp_path=None):
    ctx = context({"limits": {"e2e_ms": 100.0}, "percentiles": {"e2e_ms": 50.0}, "search": True,
                   "max_search_probes": 3, **(slo_extra or {})}, tmp_path)
    outcomes = []
    for c in concurrencies:
        o = PointOutcome("mtbench", 0.0, c, status="complete")
        o.values["goodput"] = {"verdict": truth(c)}
        outcomes.append(o)
    measured = []

    def run_group(ctx, spec, questions, ds, temp, group, save_dir, progress):
        for o in group:
            measured.append(o.concurrency)
            o.status, o.values["goodput"] = "complete", {"verdict": truth(o.concurrency)}

    out = search(ctx, {"mtbench": (None, [])}, outcomes, tmp_path, Progress(), run_group, lambda: None)
    return out, measured, outcomes


def test_probes_bisect_until_the_boundary_is_placed(tmp_path):
    out, measured, outcomes = run(lambda c: "met" if c <= 5 else "failed", [1, 2, 8], tmp_path=tmp_path)
    assert measured == [5, 6]  # 2..8: 5 (met), then 5..8: 6 (failed), 5..6 neighbours
    (ml,) = out["max_load"]
    assert (ml["max_concurrency"], ml["first_not_met"], ml["status"], ml["probed"]) == (5, 6, "exact", [5, 6])
    assert [o.row()["search_probe"] for o in outcomes if o.concurrency in (5, 6)] == [True, True]


def test_probes_are_capped_and_can_be_off(tmp_path):
    out, measured, _ = run(lambda c: "met" if c <= 37 else "failed", [1, 64], {"max_search_probes": 2},
                           tmp_path=tmp_path)
    assert measured == [32, 48] and out["max_load"][0]["status"] == "probes_exhausted"
    out, measured, _ = run(lambda c: "met" if c <= 37 else "failed", [1, 64], {"search": False},
                           tmp_path=tmp_path)
    assert measured == [] and out["max_search_probes"] == 0


def test_no_slo_no_search(tmp_path):
    assert search(context(None, tmp_path), {}, [], tmp_path, Progress(), None, None) is None
