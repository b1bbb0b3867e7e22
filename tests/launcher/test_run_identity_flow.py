"""Issue 52: the run identity is filled once by the planner into the job spec, carried by job.json,
written by the benchmark into configuration.json and summary.json, and read back by the one
reader (launcher.results.identity), which falls back for results written before it."""
from __future__ import annotations

import dataclasses
import io
import json
import shutil
from contextlib import redirect_stdout
from pathlib import Path
from types import SimpleNamespace

from launcher.bench.point_configuration import run_identity as written_identity
from launcher.compare.cli import main as compare_main
from tests.support.login import with_engine
from launcher.compare.diff import MISSING, compare_runs
from launcher.contracts.compare_thresholds import COMPARE_DEFAULTS
from launcher.contracts.job import JobSpec, recorded_job_from_dict
from launcher.login.plan import make_plan
from launcher.results.identity import run_identity
from launcher.results.job_dir import load_job, load_results

DATA = Path(__file__).resolve().parents[1] / "data"
PAIR = DATA / "h100_vllm026_async_pair"
PLAIN = "llama8b-shaped-draft_model-k3-fal3.5-tp1-77730b95"
ASYNC = "llama8b-shaped-draft_model-k3-fal3.5-tp1-7a7929ac"


def test_the_plan_fills_each_job_spec_with_its_identity(compose):
    plan = make_plan(*with_engine(compose("recipe=smoke", "sweep.num_speculative_tokens=[1,3]", "sweep.baseline=true",
                                          "server.extra_args=[--async-scheduling]")))
    ks = sorted(j.run_identity.k for j in plan.jobs)
    assert ks == [1, 3] and plan.baseline.run_identity.method == "none"
    for spec in [*plan.jobs, plan.baseline]:
        i = spec.run_identity
        assert i.model == spec.model and i.engine == "vllm" and i.serving["--async-scheduling"] == ""
        assert "--port" not in i.serving and "--host" not in i.serving
        back = JobSpec.from_dict(json.loads(spec.to_json()))  # job.json carries it
        assert back.run_identity == i and back.identity()["run_identity"]["fingerprint"] == i.fingerprint
    # the k sweep is one server configuration; the baseline's server has no speculative flags
    assert len({j.run_identity.fingerprint for j in plan.jobs}) == 1


def test_the_benchmark_writes_the_planned_identity_with_the_version_it_found(compose):
    spec = make_plan(*with_engine(compose("recipe=smoke"))).jobs[0]
    ctx = SimpleNamespace(job=spec, engine_version="0.26.0")
    d = written_identity(ctx)
    assert d["engine_version"] == "0.26.0" and d["fingerprint"] == spec.run_identity.fingerprint
    assert written_identity(SimpleNamespace(job=None, engine_version="0.26.0")) is None


def test_an_earlier_job_json_reads_without_its_identity_and_builds_the_same_one():
    raw = json.loads((PAIR / ASYNC / "job.json").read_text())
    spec = recorded_job_from_dict(raw)
    assert spec.run_identity is None
    built = spec.resolved_identity()
    assert built.serving["--async-scheduling"] == "" and built.forced == {"length": 3.5}
    assert run_identity(load_job(PAIR / ASYNC)).fingerprint == built.fingerprint


def test_the_reader_prefers_what_the_run_recorded(tmp_path):
    job_dir = shutil.copytree(PAIR / PLAIN, tmp_path / PLAIN)
    recorded = run_identity(load_job(PAIR / ASYNC)).to_dict()  # as if this job had recorded another server
    conf = job_dir / "mtbench" / "t0_c1" / "configuration.json"
    c = json.loads(conf.read_text())
    c["specdec_launcher"]["run_identity"] = recorded
    conf.write_text(json.dumps(c))
    job = load_job(job_dir)
    p1 = next(p for p in job.points if p.concurrency == 1)
    p4 = next(p for p in job.points if p.concurrency == 4)
    assert run_identity(job, p1).fingerprint == recorded["fingerprint"]
    assert run_identity(job, p4).fingerprint != recorded["fingerprint"]  # the others fall back to the files


def test_every_recorded_folder_still_reads_an_identity():
    tests = DATA.parent
    jobs = sorted({s.parent for s in tests.glob("*/data/**/summary.json")} | {s.parent for s in DATA.glob("**/summary.json")})
    assert len(jobs) >= 15
    for job_dir in jobs:
        for job in load_results(job_dir):
            for p in job.points:
                i = run_identity(job, p)
                assert i.model and i.method and len(i.fingerprint) == 8, (job_dir, p.dir)
                assert (i.method == "none") == (i.k == 0), (job_dir, p.dir)


def test_compare_pairs_the_two_servers_and_says_what_differs_on_the_line():
    a, b = load_results(PAIR / PLAIN), load_results(PAIR / ASYNC)
    diffs = compare_runs(a, b, COMPARE_DEFAULTS)
    assert [d.verdict for d in diffs].count(MISSING) == 0 and len(diffs) == 3
    for d in diffs:
        assert d.serving == "+ --async-scheduling" and "B's server: + --async-scheduling" in d.notes
        assert d.where.endswith("; B's server: + --async-scheduling]")
    assert all(d.serving is None for d in compare_runs(a, a, COMPARE_DEFAULTS))
    out = io.StringIO()
    with redirect_stdout(out):
        compare_main([str(PAIR / PLAIN), str(PAIR / ASYNC)])
    assert "3 point(s) compared" in out.getvalue() and "--async-schedul" in out.getvalue()


def test_compare_never_pairs_one_point_with_two_servers_of_a_side():
    """Both folders hold both servers (under other job names): each pairs with its own."""
    a = load_results(PAIR)
    b = [dataclasses.replace(j, summary={**j.summary, "server_id": j.name + "-rerun"}) for j in load_results(PAIR)]
    diffs = compare_runs(a, b, COMPARE_DEFAULTS)
    assert len(diffs) == 9 and all(d.verdict != MISSING and d.serving is None for d in diffs)


def test_the_speedup_gate_knows_a_speculative_b_without_a_speedup_json(tmp_path):
    """B ran speculatively but without its baseline (no speedup.json): the min_speedup gate says
    B has no speedup, read from B's run identity (compare once looked for a configuration.json key
    our files do not write, and let such a B pass); a baseline B is never gated."""
    src = DATA / "h100_vllm026_qwen3_eagle3_2starts"
    spec, base = "qwen3-8b-shaped-eagle3-k3-fal2-tp1-49dda453", "qwen3-8b-shaped-none-tp1-0dcb1aec"
    for job in (spec, base):
        shutil.copytree(src / job, tmp_path / job)
    for f in (tmp_path / spec).glob("*/*/speedup.json"):
        f.unlink()
    gate = dataclasses.replace(COMPARE_DEFAULTS, min_speedup={"mtbench": 1.1})
    jobs = load_results(tmp_path / spec)
    diffs = compare_runs(jobs, jobs, gate)
    assert len(diffs) == 4
    assert all(d.gate == "no throughput speedup for B (no speedup.json; gate min_speedup.mtbench=1.1)" for d in diffs)
    bases = load_results(tmp_path / base)
    assert all(d.gate is None for d in compare_runs(bases, bases, gate))
