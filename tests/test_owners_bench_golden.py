"""issue 42 (the benchmark's typed state, golden, a point's folder name, a run's identity):
each rule has one owner, and the others use it.

- the benchmark reads its settings from the typed run (launcher/bench/bench_run.py), never
  from an argparse namespace past its command line; an outcome's fields are declared;
- AIPerf is started by one driver (launcher/bench/aiperf_group.py);
- golden's table is opened in one module and read once; the report writes golden's texts
  with golden's own functions;
- a point's folder name is defined once (launcher/contracts/job.py);
- a run's identity is read by launcher/results/identity.py, and the report, the console
  table, history and compare give the same identity for the same files.
"""
from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from launcher.bench.cli import parse_args, run_of_flags
from launcher.bench.point_outcome import PointOutcome

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "launcher" / "bench"
SMOKE = ROOT / "tests" / "report" / "data" / "smoke_run1"


def _sources(*parts: str):
    for part in parts:
        for path in sorted((ROOT / part).rglob("*.py")):
            yield path, ast.parse(path.read_text(), str(path))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _calls(tree, name: str):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == name) or (isinstance(f, ast.Attribute) and f.attr == name):
                yield node


# ------------------------------------------------------------------ the benchmark's typed state

def test_the_benchmark_reads_no_namespace_past_its_command_line():
    """No ``ctx.args``, no ``getattr(<namespace>, "setting", default)``, no Namespace built
    from the job spec: only launcher/bench/cli.py parses flags, into a BenchRun."""
    bad = []
    for path, tree in _sources("launcher/bench"):
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "args" and isinstance(node.value, ast.Name) \
                    and node.value.id == "ctx":
                bad.append(f"{_rel(path)}:{node.lineno}: ctx.args")
        for call in _calls(tree, "Namespace"):
            bad.append(f"{_rel(path)}:{call.lineno}: an argparse Namespace built")
        for call in _calls(tree, "getattr"):
            target = call.args[0] if call.args else None
            if isinstance(target, (ast.Name, ast.Attribute)) and ast.unparse(target) in ("args", "ctx.args", "a"):
                bad.append(f"{_rel(path)}:{call.lineno}: {ast.unparse(call)}")
        if path.name != "cli.py":  # the benchmark's flags are parsed in cli.py, and read nowhere else
            for fn in ast.walk(tree):
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and "args" in [a.arg for a in fn.args.args] \
                        and fn.name != "main":
                    bad.append(f"{_rel(path)}:{fn.lineno}: {fn.name}(args, ...) takes the command line's namespace")
    assert not bad, "\n".join(bad)


def test_an_outcome_declares_its_fields():
    """slo_repeats and search_probe are fields of PointOutcome, read as attributes; one that is
    not declared cannot be set (slots)."""
    o = PointOutcome("mtbench", 0.0, 4)
    assert (o.search_probe, o.slo_repeats) == (False, None)
    with pytest.raises(AttributeError):
        o.undeclared = True  # type: ignore[attr-defined]
    assert PointOutcome("mtbench", 0.0, 4, search_probe=True, status="complete").row()["search_probe"] is True
    bad = [f"{_rel(path)}:{call.lineno}: {ast.unparse(call)}" for path, tree in _sources("launcher", "upload")
           for fn in ("getattr", "setattr", "hasattr") for call in _calls(tree, fn)
           if len(call.args) > 1 and isinstance(call.args[1], ast.Constant)
           and call.args[1].value in ("slo_repeats", "search_probe")]
    assert not bad, "\n".join(bad)


def test_both_forms_of_the_command_line_give_one_typed_run(tmp_path):
    """The flag form becomes the same BenchSpec as run.sh's job spec (the save_dir as given, not resolved)."""
    from launcher.bench.cli import spec_from_argv

    argv = ["--mtbench", "/q/question.jsonl", "--save_dir", "rel/out", "--model", "tiny", "--tokenizer", "/tok",
            "--temperature", "0", "0.7", "--concurrency", "1", "4", "--repeats", "3", "--warmup",
            "--requests_per_concurrency", "1=2", "--min_acceptance_length", "mtbench=1.5", "--phase_gap_s", "1.0"]
    run = run_of_flags(parse_args([*argv, "--url", "http://127.0.0.1:8000/"]))
    spec, points = spec_from_argv(argv)
    assert run.bench == spec.__class__(**{**spec.__dict__, "save_dir": "rel/out"})
    assert (run.temperatures, run.concurrencies) == ((0.0, 0.7), (1, 4))
    assert [(p.temperature, p.concurrency) for p in points] == [(0.0, 1), (0.0, 4), (0.7, 1), (0.7, 4)]
    assert run.base_url == "http://127.0.0.1:8000" and run.gates == {"mtbench": 1.5} and run.phase_gap_s == 1.0
    assert run.bench.requests_per_concurrency == {1: 2} and run.speculative


def test_one_aiperf_driver():
    """Only launcher/bench/aiperf_group.py starts AIPerf (both modes, with or without repeats)."""
    starters = sorted({_rel(path) for path, tree in _sources("launcher", "upload")
                       for call in _calls(tree, "run_aiperf")})
    assert starters == ["launcher/bench/aiperf_group.py"]


# ------------------------------------------------------------------ golden

def test_the_golden_table_is_opened_in_one_module_and_read_once(monkeypatch):
    from launcher.golden import table

    holders = sorted({_rel(path) for path, tree in _sources("launcher", "upload") for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and isinstance(node.value, str)
                      and (node.value == "references.json" or node.value.endswith("/references.json"))})
    assert holders == ["launcher/golden/table.py"]
    reads = []
    real = table.json.loads
    monkeypatch.setattr(table.json, "loads", lambda text: reads.append(1) or real(text))
    table._entries.cache_clear()
    ids = table.known_ids()
    for gid in ids * 3:
        entry = table.lookup(gid)
        entry["workload"]["temperature"] = -1.0  # a caller's change stays its own
    assert len(reads) == 1
    assert all(table.lookup(gid)["workload"]["temperature"] >= 0 for gid in ids)


def test_the_report_writes_golden_with_goldens_words():
    """The platform keys and the tolerance rule are golden's (launcher/golden/text.py); the
    report names neither."""
    from launcher.golden.text import tolerance_rule
    from launcher.report.golden_section import golden_block

    for path, tree in _sources("launcher/report"):
        words = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not {w for w in words if "cpu_kernel" in w or "standard errors" in w}, _rel(path)
    v = {"point": "mtbench/t0_c1", "verdict": "pass", "rtol": 0.05, "z": 4.5, "al": None, "positions": []}
    html = golden_block({"id": "x", "verdict": "pass", "entry": {"recorded_on": {"engine": "vllm", "cpu_kernel": "amx"}},
                         "points": [v]})
    assert tolerance_rule(0.05, 4.5) in html and "recorded on engine vllm, cpu_kernel amx" in html


def test_golden_platform_keys_have_one_definition():
    """golden's Platform (launcher/golden/verdict.py) defines where a run was recorded; the point's
    recorded_on fills one rather than spelling its keys again."""
    from launcher.bench.recorded_on import recorded_on
    from launcher.engines import get_engine
    from launcher.golden import PLATFORM_KEYS

    def platform_like(d: ast.Dict) -> bool:  # a dict literal with most of the platform's keys
        keys = {k.value for k in d.keys if isinstance(k, ast.Constant)}
        return len(keys & set(PLATFORM_KEYS)) > len(PLATFORM_KEYS) // 2

    spelled = sorted({_rel(path) for path, tree in _sources("launcher", "upload") for n in ast.walk(tree)
                      if isinstance(n, ast.Dict) and platform_like(n)})
    assert spelled == [], spelled
    got = recorded_on(engine=get_engine("vllm"), version="0.32.0", gpu="NVIDIA H100", server_argv=[],
                      config={"torch_dtype": "bfloat16"}, flags=set())
    assert tuple(got) == PLATFORM_KEYS and got["build"] == "cuda" and got["dtype"] == "bfloat16"


# ------------------------------------------------------------------ a point's folder

def test_a_points_folder_name_has_one_definition():
    defs = [f"{_rel(path)}:{node.lineno}" for path, tree in _sources("launcher", "upload") for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and node.name == "point_dir_name"]
    assert len(defs) == 1 and defs[0].startswith("launcher/contracts/job.py:"), defs
    # and no module spells its format again: an f-string "<...>/t<...>_c<...>"
    spelled = []
    for path, tree in _sources("launcher", "upload"):
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                texts = [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
                if any(t.endswith("/t") for t in texts) and any(t.startswith("_c") for t in texts):
                    spelled.append(f"{_rel(path)}:{node.lineno}")
    assert [s.split(":")[0] for s in spelled] == ["launcher/contracts/job.py"], spelled


# ------------------------------------------------------------------ a run's identity

IDENTITY_KEYS = {"speculative_algorithm", "draft_length", "draft_model_dir"}


def test_identity_keys_are_read_in_one_module():
    """Of the tools that read results, only launcher/results/identity.py reads specdec_bench's
    identity keys of configuration.json."""
    readers = sorted({_rel(path) for path, tree in _sources("launcher/report", "launcher/compare",
                                                           "launcher/history", "launcher/speedup",
                                                           "launcher/results")
                      for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in IDENTITY_KEYS})
    assert readers == ["launcher/results/identity.py", "launcher/results/point.py"], readers
    # results/point.py reads speculative_algorithm only to say whether the point speculated (not who it is)
    point_src = (ROOT / "launcher/results/point.py").read_text()
    assert "draft_length" not in point_src and "draft_model_dir" not in point_src


def _as_specdec_bench(point_dir: Path) -> None:
    """The point's files as specdec_bench writes them: configuration.json's flat keys, the
    metric files without our extension, no COMPLETE marker."""
    conf = point_dir / "configuration.json"
    c = json.loads(conf.read_text())
    c.pop("specdec_launcher")
    c.pop("serving_config", None)
    conf.write_text(json.dumps(c))
    for name in ("acceptance_rate.json", "timing.json"):
        docs = json.loads((point_dir / name).read_text())
        (point_dir / name).write_text(json.dumps([{k: v for k, v in d.items() if k != "specdec_launcher"}
                                                  for d in docs], indent=4))
    (point_dir / "COMPLETE").unlink(missing_ok=True)


@pytest.mark.parametrize("origin", ["specdec_launcher", "specdec_bench"])
def test_the_four_readers_give_one_identity_for_the_same_files(tmp_path, origin):
    from launcher.compare.match import workload_key
    from launcher.history.series import build_history
    from launcher.history.run_source import local_runs
    from launcher.report.console import job_title
    from launcher.report.html import provenance
    from launcher.results.identity import describe, identity
    from launcher.results.job_dir import load_job

    run = tmp_path / "runs" / "one"
    shutil.copytree(SMOKE / "mtbench" / "t0_c2", run)  # one point folder, as history and the uploader see it
    if origin == "specdec_bench":
        _as_specdec_bench(run)
    job = load_job(run)
    (p,) = job.points
    ident = identity(job, p)
    # specdec_bench names the method by its speculative_algorithm (DRAFT_TARGET)
    assert (ident.origin, ident.method, ident.k) == (origin, {"specdec_launcher": "draft_model",
                                                              "specdec_bench": "draft_target"}[origin], 3)
    # report
    rows = dict(provenance(job))
    assert (rows["method"], rows["k (num_speculative_tokens)"]) == (ident.method, str(ident.k))
    assert rows["draft"] == (ident.draft if ident.draft not in ("-", "none") else "–")
    # console
    assert describe(ident) in job_title(job)
    # history
    (series,) = build_history(local_runs(tmp_path / "runs").runs).series
    assert series.key[:5] == (ident.model, ident.draft, ident.method, ident.k, ident.forced)
    # compare
    assert workload_key(job, p) == (p.dataset, round(float(p.temperature), 6), int(p.concurrency), ident.k,
                                    ident.forced)
