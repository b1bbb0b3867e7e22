"""sweep.server_starts on the benchmark's side: a later start takes the earlier starts' repeats
(and their AIPerf folders) before its own join them, and resume counts every start's repeats."""
import json
from types import SimpleNamespace

from launcher.bench import bench_run, repeat_runs, resume
from launcher.bench.bench_run import BenchRun
from launcher.bench.run_context import PointContext, PointGroup
from launcher.contracts.job import SERVER_START_ENV, BenchSpec
from launcher.contracts.server_ready import ServerReady
from launcher.engines import get_engine
from launcher.results.repeats import record


def _point_with_first_start(tmp_path, held=2):
    d = tmp_path / "mtbench" / "t0_c1"
    per = [{"repeat": i, "phase": f"p0_c1_r{i}", "server_start": 1, "Output TPS": 100.0 + i} for i in (1, 2, 3)]
    (d / "aiperf").mkdir(parents=True)
    (d / "aiperf" / "profile_export.jsonl").write_text(f"held {held}\n")
    for i in (1, 2, 3):
        if i != held:
            (d / record.REPEATS_ARTIFACTS / f"r{i}").mkdir(parents=True)
            (d / record.REPEATS_ARTIFACTS / f"r{i}" / "profile_export.jsonl").write_text(f"r{i}\n")
    (d / record.REPEATS_FILE).write_text(json.dumps(record.build(per, held - 1)))
    return d


def test_the_second_start_takes_the_first_starts_repeats_and_folders(tmp_path, monkeypatch):
    d = _point_with_first_start(tmp_path)
    monkeypatch.setenv(SERVER_START_ENV, "2")
    per, srcs, origins = repeat_runs.earlier_starts(d)
    assert origins == [d / record.REPEATS_ARTIFACTS / "r1", d / "aiperf", d / record.REPEATS_ARTIFACTS / "r3"]
    assert [(r["repeat"], r["server_start"], r["Output TPS"]) for r in per] == [(1, 1, 101.0), (2, 1, 102.0),
                                                                                (3, 1, 103.0)]
    assert [s.read_text() for s in (x / "profile_export.jsonl" for x in srcs)] == ["r1\n", "held 2\n", "r3\n"]
    assert not (d / "aiperf").exists() and not list((d / record.REPEATS_ARTIFACTS).iterdir())


def test_the_first_start_takes_nothing(tmp_path, monkeypatch):
    d = _point_with_first_start(tmp_path)
    monkeypatch.setenv(SERVER_START_ENV, "1")
    assert repeat_runs.earlier_starts(d) == ([], [], [])
    assert (d / "aiperf" / "profile_export.jsonl").exists()
    monkeypatch.delenv(SERVER_START_ENV)
    assert bench_run.server_start() == 1


def test_resume_skips_a_point_only_with_every_starts_repeats(tmp_path, monkeypatch):
    d = _point_with_first_start(tmp_path)
    monkeypatch.setattr(resume, "is_complete", lambda p: True)
    monkeypatch.setattr(resume, "load_point_values", lambda p: {})
    o = SimpleNamespace(dir="mtbench/t0_c1", status=None, reason=None, values={})
    two_starts = BenchSpec(model="tiny", tokenizer="/tok", save_dir=str(tmp_path), repeats=3, server_starts=2)
    assert resume.resume([o], tmp_path, two_starts) == [o]            # 3 of 6 repeats: measure
    one_start = BenchSpec(model="tiny", tokenizer="/tok", save_dir=str(tmp_path), repeats=3, server_starts=1)
    assert resume.resume([o], tmp_path, one_start) == [] and o.status == "skipped"


def test_a_later_start_that_fails_puts_the_earlier_folders_back(tmp_path, monkeypatch):
    d = _point_with_first_start(tmp_path)
    monkeypatch.setenv(SERVER_START_ENV, "2")
    bench = BenchSpec(model="tiny", tokenizer="/tok", save_dir=str(tmp_path), repeats=1, server_starts=2)
    ctx = PointContext(run=BenchRun(bench, "http://127.0.0.1:1"), engine_version=None, server_ready=ServerReady(),
                       job=None, engine=get_engine("vllm"))
    o = SimpleNamespace(dir="mtbench/t0_c1", status=None, reason=None, values={})
    done = []
    progress = SimpleNamespace(point_done=lambda *a: done.append(a))
    runs = [("p0_c1_r1", tmp_path / "nowhere", "AIPerf exited with code 1 before this point finished")]
    why = repeat_runs.finish_repeats(PointGroup(ctx, None, [], "mtbench", 0.0, tmp_path, progress), o, runs)
    assert why.startswith("AIPerf exited") and o.status == "failed" and done
    assert (d / "aiperf" / "profile_export.jsonl").read_text() == "held 2\n"
    assert sorted(p.name for p in (d / record.REPEATS_ARTIFACTS).iterdir()) == ["r1", "r3"]
    assert not list((d / ".earlier_starts").iterdir())


def test_a_repeat_that_lost_requests_fails_the_point_through_its_reason(tmp_path, monkeypatch):
    """The held repeat passes the rule, another lost 4 of 40 requests: the point's reason names
    that repeat (process_point joins it to its own), and repeats.json keeps every count."""
    monkeypatch.setenv(SERVER_START_ENV, "1")
    failed = {"r1": 0, "r2": 0, "r3": 4}
    monkeypatch.setattr(repeat_runs, "measure", lambda ctx, spec, q, export, dst, cfg: (
        {}, {"Output TPS": {"r1": 100.0, "r2": 101.0, "r3": 90.0}[dst.name],
             "specdec_launcher": {"failed_requests": failed[dst.name], "num_turns": 40 - failed[dst.name]}}, []))
    seen = {}
    monkeypatch.setattr(repeat_runs, "finish_point", lambda g, o, src, why: seen.update(held=src.name,
                                                                                    problems=o.repeat_problems))
    bench = BenchSpec(model="tiny", tokenizer="/tok", save_dir=str(tmp_path), repeats=3)
    ctx = PointContext(run=BenchRun(bench, "http://127.0.0.1:1"), engine_version=None, server_ready=ServerReady(),
                       job=None, engine=get_engine("vllm"))
    from launcher.bench.point_outcome import PointOutcome
    o = PointOutcome("mtbench", 0.0, 1)
    runs = []
    for r in ("r1", "r2", "r3"):
        (tmp_path / "runs" / r).mkdir(parents=True)
        runs.append((f"p0_c1_{r}", tmp_path / "runs" / r, None))
    repeat_runs.finish_repeats(PointGroup(ctx, None, [], "mtbench", 0.0, tmp_path, SimpleNamespace()), o, runs)
    assert seen == {"held": "r1", "problems": ["repeat 3 (p0_c1_r3): 4 of 40 requests failed (> 5%)"]}
    doc = json.loads((tmp_path / o.dir / record.REPEATS_FILE).read_text())
    assert [(r["failed_requests"], r["succeeded_requests"]) for r in doc["per_repeat"]] == [(0, 40), (0, 40), (4, 36)]


def test_the_points_reason_carries_its_other_repeats_problems():
    from launcher.bench.point_files import check_point
    tim = {"Output TPS": 100.0, "specdec_launcher": {"failed_requests": 0, "num_turns": 40,
                                                     "total_output_tokens": 1000}}
    args = ({}, tim, "mtbench", False, {}, None, 0.05)
    assert check_point(*args) is None                       # the held repeat alone passes
    assert check_point(*args, repeat_problems=["repeat 3 (p0_c1_r3): 4 of 40 requests failed (> 5%)"]) == \
        "repeat 3 (p0_c1_r3): 4 of 40 requests failed (> 5%)"
