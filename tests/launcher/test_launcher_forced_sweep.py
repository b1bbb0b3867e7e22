"""sweep.forced_acceptance_lengths (one server per (k, forced length)), sweep.num_requests_per_concurrency
(a point's slice of the dataset), the local executor's one-at-a-time GPU jobs, and recipe=gpu_8b."""
from __future__ import annotations

import json

import pytest

from launcher.engines import forced_acceptance as fa
from launcher.bench import aiperf_runner as ar
from launcher.login.config.validate import validate
from launcher.login.plan import make_plan
from launcher.contracts.job import JobSpec
from tests.support.login import with_engine


@pytest.fixture
def mtbench80(tmp_path, monkeypatch):
    """An MT-Bench-format file of 80 questions (the real one's size) for recipe=gpu_8b."""
    path = tmp_path / "question.jsonl"
    path.write_text("".join(json.dumps({"question_id": 81 + i, "category": "writing",
                                        "turns": [f"question {i}", f"follow-up {i}"]}) + "\n" for i in range(80)))
    return path


@pytest.fixture
def gpu8b(compose, mtbench80, monkeypatch):
    monkeypatch.setenv("SPECDEC_MTBENCH", str(mtbench80))
    return lambda *ov: compose("recipe=gpu_8b", *ov)


def _forced(job) -> tuple:
    return job.num_speculative_tokens, job.speculative_config["synthetic_acceptance_length"]


def test_gpu_8b_plans_one_server_per_k_and_forced_length(gpu8b):
    cfg = gpu8b()
    assert validate(*with_engine(cfg)) == []
    plan = make_plan(*with_engine(cfg))
    assert [_forced(j) for j in plan.jobs] == [(3, 1.5), (3, 2.5), (3, 3.5), (3, 4.0),
                                               (5, 1.5), (5, 2.5), (5, 3.5), (5, 6.0)]  # k+1: 4 and 6
    assert all(j.speculative_config["rejection_sample_method"] == "synthetic" for j in plan.jobs)
    assert "-k3-fal2.5-" in plan.jobs[1].server_id and "-k5-fal6-" in plan.jobs[7].server_id
    assert len({j.job_dir for j in plan.jobs}) == 8
    assert plan.jobs[0].baseline.run_here and not any(j.baseline.run_here for j in plan.jobs[1:])
    assert "--speculative-config" not in plan.baseline.server_flags
    b = plan.jobs[0].bench
    assert b.requests_per_concurrency == {1: 16, 4: 32, 16: 64} and b.num_requests is None and b.max_turns == 1
    assert b.output_length == 256 and b.golden is None and b.runtime_params.sampling_kwargs["ignore_eos"] is True
    assert [p.concurrency for p in plan.jobs[0].points] == [1, 4, 16, 64]
    flags = plan.jobs[0].server_flags
    assert flags[flags.index("--kv-cache-memory-bytes") + 1] == "16G" and "--enforce-eager" not in flags
    assert flags[flags.index("--max-num-seqs") + 1] == "64"


def test_a_subset_lands_in_the_full_sweeps_folders(gpu8b):
    """Separate invocations (one device call each) write where launcher.speedup pairs them."""
    full = make_plan(*with_engine(gpu8b()))
    one = make_plan(*with_engine(gpu8b("sweep.num_speculative_tokens=[5]", "sweep.forced_acceptance_lengths=[k+1]",
                          "sweep.baseline=false")))
    assert [j.job_dir for j in one.jobs] == [full.jobs[7].job_dir] and one.baseline is None
    first = make_plan(*with_engine(gpu8b("sweep.num_speculative_tokens=[3]", "sweep.forced_acceptance_lengths=[2.5]")))
    assert first.jobs[0].job_dir == full.jobs[1].job_dir and first.baseline.job_dir == full.baseline.job_dir


@pytest.mark.parametrize("overrides,field,words", [
    (["sweep.forced_acceptance_lengths=[4.5]"], "sweep.forced_acceptance_lengths", "outside [1, k+1] = [1, 4] for k=3"),
    (["sweep.forced_acceptance_lengths=[2.5,2.5]"], "sweep.forced_acceptance_lengths", "more than once"),
    (["sweep.forced_acceptance_lengths=[fast]"], "sweep.forced_acceptance_lengths", "neither a number nor 'k+1'"),
    (["draft.forced_acceptance.length=2.5"], "sweep.forced_acceptance_lengths", "together with draft.forced_acceptance"),
    (["cluster.gpus_per_node=0"], "sweep.forced_acceptance_lengths", "no GPUs"),
    (["sweep.num_requests_per_concurrency={1:0}"], "sweep.num_requests_per_concurrency", "use 1 or more"),
    (["sweep.num_requests=70", "sweep.num_requests_per_concurrency={1:71}"], "sweep.num_requests_per_concurrency", "more than sweep.num_requests=70"),
    (["bench.aiperf_mode=point"], "sweep.num_requests_per_concurrency", "needs bench.aiperf_mode=phases"),
])
def test_bad_settings_are_one_line_errors(gpu8b, overrides, field, words):
    errs = validate(*with_engine(gpu8b(*overrides)))
    assert [e.field for e in errs] == [field], [e.line() for e in errs]
    assert words in errs[0].line() and "fix:" in errs[0].line() and "\n" not in errs[0].line()


def test_without_a_draft_the_axis_is_refused(gpu8b):
    errs = validate(*with_engine(gpu8b("draft=none", "sweep.baseline=false")))
    assert [e.field for e in errs] == ["sweep.forced_acceptance_lengths"] and "draft.method=none" in errs[0].line()


def test_resolve_and_check_lengths():
    assert fa.resolve_length("k+1", 3) == 4.0 and fa.resolve_length(" K + 1", 5) == 6.0
    assert fa.resolve_length(2.5, 5) == 2.5 and fa.resolve_length("1.5", 3) == 1.5
    assert fa.sweep_problems([1.0, "k+1"], [1, 7], "draft_model", None, None) == []
    probs = fa.sweep_problems([2.5], [1, 3], "draft_model", None, None)
    assert len(probs) == 1 and "k=1" in probs[0][1]
    assert fa.sweep_problems([True], [3], "eagle3", None, None)[0][1].startswith("contains True")


def test_a_point_sends_its_concurrencys_slice():
    assert ar.phase_sessions({1: 16, 4: 32}, 1, 80) == 16
    assert ar.phase_sessions({1: 16, 4: 32}, 64, 80) == 80  # not listed: the whole dataset
    assert ar.phase_sessions(["1=16", "4=32"], 4, 80) == 32  # the bench's C=N items
    assert ar.phase_sessions({1: 16}, 1, 8) == 8  # never more than the dataset


def test_per_concurrency_counts_survive_the_job_spec(gpu8b, tmp_path):
    from launcher.bench.bench_run import from_job
    from launcher.bench.cli import per_concurrency

    job = make_plan(*with_engine(gpu8b())).jobs[0]
    back = JobSpec.from_dict(json.loads(json.dumps(job.to_dict())))  # job.json keeps the keys as strings
    assert back.bench.requests_per_concurrency == {1: 16, 4: 32, 16: 64}
    run = from_job(back, "speculative", "http://127.0.0.1:1")
    assert run.bench.requests_per_concurrency == {1: 16, 4: 32, 16: 64}
    assert ar.phase_sessions(run.bench.requests_per_concurrency, 4, 80) == 32
    with pytest.raises(SystemExit, match="expected C=N"):
        per_concurrency(["16"])


def test_local_gpu_jobs_run_one_at_a_time(gpu8b, monkeypatch):
    """submitit's local executor starts every job at once: on one GPU the servers would share it."""
    import subprocess

    from launcher.login import cli, submit as submit_mod

    plan = make_plan(*with_engine(gpu8b("sweep.num_speculative_tokens=[3]", "sweep.forced_acceptance_lengths=[1.5,2.5]")))
    cfg = gpu8b()
    assert cli.one_at_a_time(cfg, plan, wait=True) and not cli.one_at_a_time(cfg, plan, wait=False)
    calls, running = [], []

    class Handle:
        job_id = "1"

    class Sub:
        def __init__(self, job):
            self.job, self.handle, self.job_id = job, Handle(), "1"

        def log_path(self):
            return "log"

    def fake_submit(c, p):
        assert not running, "a job was submitted while another ran"
        calls.append((p.jobs[0].server_id, p.baseline is not None))
        running.append(1)
        return [Sub(j) for j in p.jobs]

    def fake_follow(subs):
        running.clear()
        return True

    monkeypatch.setattr(submit_mod, "submit", fake_submit)
    monkeypatch.setattr(submit_mod, "follow", fake_follow)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: None)
    assert cli.run_one_at_a_time(cfg, plan) == 0
    assert calls == [(plan.jobs[0].server_id, True), (plan.jobs[1].server_id, False)]
    cpu = gpu8b("cluster.gpus_per_node=0", "sweep.forced_acceptance_lengths=[]")
    assert not cli.one_at_a_time(cpu, make_plan(*with_engine(cpu)), wait=True)
