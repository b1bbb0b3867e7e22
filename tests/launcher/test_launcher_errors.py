"""Bad recipes and overrides: `python -m launcher ... dry_run=true` exits 2 with ONE
line on stderr that names the field and the fix, and never a traceback.

The subprocesses of all CLI cases run concurrently once per module (they are
independent); each case is still its own test. Further validation rules are
checked in-process against validate() (no subprocess: fast).
"""
from __future__ import annotations

import copy
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from launcher.login.config.validate import validate
from launcher.runtime.datasets import DATASETS, SPEED_SPLITS, speed_split
from tests.support.login import with_engine

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def case(cid: str, args: list[str], field: str, marks=()):
    return pytest.param(cid, args, field, id=cid, marks=marks)


# (id, overrides, the field the error line must name). "{tmp}" is a per-module temporary folder.
CLI_CASES = [
    case("unknown-key", ["model.foo=1"], "model.foo"),
    case("unknown-key-plus", ["+sweep.bogus=1"], "sweep.bogus"),
    case("wrong-type", ["draft.num_speculative_tokens=abc"], "draft.num_speculative_tokens"),
    case("unknown-recipe", ["recipe=no_such_recipe"], "recipe"),
    case("unknown-cluster", ["cluster=no_such_cluster"], "cluster"),
    case("tp-exceeds-gpus-per-node", ["recipe=qwen3_dflash", "parallel.tp=8"], "parallel.tp"),
    case("ep-not-tp-times-dp", ["recipe=qwen3_dflash", "parallel.tp=2", "parallel.ep=3"], "parallel.ep"),
    case("draft-tp-not-1-or-tp", ["recipe=qwen3_dflash", "parallel.tp=4", "parallel.draft_tp=2"],
         "parallel.draft_tp"),
    case("method-needs-draft", ["recipe=qwen3_dflash", "draft.method=eagle3", "draft.model=null"], "draft.model"),
    case("zero-spec-tokens", ["recipe=qwen3_dflash", "draft.num_speculative_tokens=0"],
         "draft.num_speculative_tokens"),
    case("temperature-out-of-range", ["recipe=qwen3_dflash", "sweep.temperatures=[0,2.5]"], "sweep.temperatures"),
    case("concurrency-zero", ["recipe=qwen3_dflash", "sweep.concurrencies=[0,8]"], "sweep.concurrencies"),
    case("unknown-dataset", ["recipe=qwen3_dflash", "sweep.datasets=[mtbench,alpaca]"], "sweep.datasets"),
    case("container-required", ["recipe=qwen3_dflash", "cluster=gb300", "cluster.container_image=null"],
         "cluster.container_image"),
    case("disagg-engine-without-it", ["engine=sglang", "topology=disagg"], "topology"),
    case("unwritable-output-dir-proc", ["output_dir=/proc/x"], "output_dir"),
    case("output-dir-under-a-file", ["output_dir={tmp}/a_file/sub"], "output_dir"),
    case("kv-cap-and-gpu-util", ["recipe=qwen3_dflash", "server.kv_cache_memory_bytes=20G",
                                 "server.gpu_memory_utilization=0.8"], "server.kv_cache_memory_bytes"),
    # Raised by the planner (server_args), not by validate: the same one-line contract.
    case("extra-args-memory-vs-kv-cap",
         ["recipe=llama31_eagle3", "server.extra_args=['--gpu-memory-utilization=0.5']"], "server.extra_args"),
]


@pytest.fixture(scope="module")
def results(tmp_path_factory, launcher_runner):
    tmp = tmp_path_factory.mktemp("errors")
    (tmp / "a_file").write_text("not a folder")
    from tests.launcher.conftest import stub_specdec_home
    home = stub_specdec_home(tmp_path_factory.mktemp("specdec_home"))

    def one(param):
        cid, args, _ = param.values
        args = [a.replace("{tmp}", str(tmp)) for a in args]
        # output_dir first, so a case's own output_dir (later on the command line) wins.
        return cid, launcher_runner([f"output_dir={tmp}", *args, "dry_run=true"], home)

    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as ex:
        return dict(ex.map(one, CLI_CASES))


def test_cases_are_distinct():
    assert len({p.id for p in CLI_CASES}) == len(CLI_CASES) >= 12
    assert len({tuple(p.values[1]) for p in CLI_CASES}) == len(CLI_CASES)


@pytest.mark.parametrize("cid,args,field", CLI_CASES)
def test_bad_input_is_one_line_naming_field_and_fix(cid, args, field, results):
    r = results[cid]
    combined = r.stdout + r.stderr
    assert "Traceback" not in combined, combined
    assert r.returncode == 2, f"exit {r.returncode}; stdout: {r.stdout[:300]!r}; stderr: {r.stderr!r}"
    lines = r.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}: {r.stderr!r}"
    line = lines[0]
    assert line.startswith(f"error: {field}: "), line
    assert "fix" in line, line
    assert r.stdout == "", "nothing is planned or printed for a bad recipe"


# --- the same contract through cli.main in-process (cheaper: no interpreter start-up)
INPROCESS_CASES = [
    case("unknown-top-level-key-plus", ["+foo=1"], "foo"),
    case("wrong-type-in-list", ["sweep.concurrencies=[1,x]"], "sweep.concurrencies[1]"),
    case("missing-required", ["model.path=???"], "model.path"),
    case("unknown-option", ["--verbose"], "--verbose"),
    case("override-syntax", ["model.path=[1"], "override"),
    case("delete-a-map-key-not-set", ["~bench.gates.min_acceptance_length.nope"],
         "bench.gates.min_acceptance_length.nope"),
    case("delete-a-schema-field", ["~bench.gates"], "bench.gates"),
    case("report-not-a-boolean", ["report=maybe"], "report"),
    case("group-chosen-twice", ["+recipe=smoke"], "recipe"),
]


@pytest.mark.parametrize("cid,args,field", INPROCESS_CASES)
def test_bad_input_in_process(cid, args, field, recipe_env, tmp_path, capsys):
    from launcher.login import cli

    rc = cli.main([f"output_dir={tmp_path}", *args, "dry_run=true"])
    out, err = capsys.readouterr()
    assert rc == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: ") and "fix" in lines[0], err


def test_every_problem_is_reported_on_its_own_line(recipe_env, tmp_path, capsys):
    from launcher.login import cli

    rc = cli.main(["recipe=qwen3_dflash", "sweep.temperatures=[3.0]", "sweep.concurrencies=[0]",
                   "parallel.tp=8", "dry_run=true", f"output_dir={tmp_path}"])
    assert rc == 2
    lines = capsys.readouterr().err.splitlines()
    fields = [ln.split(":", 2)[1].strip() for ln in lines]
    assert sorted(fields) == ["parallel.tp", "sweep.concurrencies", "sweep.temperatures"], lines
    assert all(ln.startswith("error: ") and "fix" in ln for ln in lines), lines


# --- more validation rules, in-process: (id, {dotted field: value}, the field the error names)
def _set(cfg, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    obj = cfg
    for p in parents:
        obj = getattr(obj, p)
    if isinstance(obj, dict):
        obj[last] = value
    else:
        setattr(obj, last, value)


VALIDATE_CASES = [
    ("unknown-method", {"draft.method": "medusa2"}, "draft.method"),
    ("tp-on-cpu-cluster", {"cluster.gpus_per_node": 0, "parallel.tp": 2}, "parallel.tp"),
    ("zero-dp", {"parallel.dp": 0}, "parallel.dp"),
    ("zero-in-spec-token-sweep", {"sweep.num_speculative_tokens": [0, 3]}, "sweep.num_speculative_tokens"),
    ("dataset-without-path", {"sweep.datasets": ["speed_throughput_1k"]}, "sweep.dataset_paths.speed_throughput_1k"),
    ("speed-path-wrong-split", {"sweep.datasets": ["speed_qualitative"],
                                "sweep.dataset_paths.speed_qualitative": "/d/throughput_1k.parquet"},
     "sweep.dataset_paths.speed_qualitative"),
    ("empty-temperatures", {"sweep.temperatures": []}, "sweep.temperatures"),
    ("empty-concurrencies", {"sweep.concurrencies": []}, "sweep.concurrencies"),
    ("empty-datasets", {"sweep.datasets": []}, "sweep.datasets"),
    ("zero-requests", {"sweep.num_requests": 0}, "sweep.num_requests"),
    ("zero-output-length", {"sweep.output_length": 0}, "sweep.output_length"),
    ("temperature-as-runtime-param", {"sweep.runtime_params.sampling_kwargs.temperature": 0.5},
     "sweep.runtime_params.sampling_kwargs.temperature"),
    ("gate-on-dataset-not-swept", {"bench.gates.min_acceptance_length.specbench": 2.0},
     "bench.gates.min_acceptance_length.specbench"),
    ("baseline-without-draft", {"sweep.baseline": True, "draft.method": "none", "draft.model": None}, "sweep.baseline"),
    ("speedup-gate-without-baseline", {"bench.gates.min_speedup": {"mtbench": 1.2}}, "bench.gates.min_speedup.mtbench"),
    ("speedup-gate-on-dataset-not-swept", {"sweep.baseline": True, "bench.gates.min_speedup": {"specbench": 1.2}},
     "bench.gates.min_speedup.specbench"),
    ("failed-fraction-above-1", {"bench.gates.max_failed_fraction": 1.5}, "bench.gates.max_failed_fraction"),
    ("gpu-util-above-1", {"server.gpu_memory_utilization": 1.5}, "server.gpu_memory_utilization"),
    ("port-out-of-range", {"server.port": 80}, "server.port"),
    ("zero-ready-timeout", {"server.ready_timeout_s": 0}, "server.ready_timeout_s"),
    ("unknown-spec-metrics", {"server.spec_decode_metrics": "verbose"}, "server.spec_decode_metrics"),
    ("empty-server-command", {"server.command": "  "}, "server.command"),
    ("unknown-executor", {"cluster.executor": "pbs"}, "cluster.executor"),
    ("multi-node", {"cluster.nodes": 2}, "cluster.nodes"),
    ("zero-time", {"cluster.time_min": 0}, "cluster.time_min"),
    ("zero-repeats", {"sweep.repeats": 0}, "sweep.repeats"),
    ("noisy-rel-mad-zero", {"bench.gates.noisy_rel_mad": 0.0}, "bench.gates.noisy_rel_mad"),
]


@pytest.fixture
def good_cfg(qwen3_dflash_cfg):
    return qwen3_dflash_cfg


@pytest.mark.parametrize("cid,changes,field", VALIDATE_CASES, ids=[c[0] for c in VALIDATE_CASES])
def test_validate_names_the_field_and_fix(cid, changes, field, good_cfg):
    cfg = copy.deepcopy(good_cfg)
    for k, v in changes.items():
        _set(cfg, k, v)
    errors = validate(*with_engine(cfg))
    assert [e.field for e in errors] == [field], [e.line() for e in errors]
    line = errors[0].line()
    assert line.startswith(f"{field}: ") and "\n" not in line
    assert errors[0].fix and line.endswith(f"(fix: {errors[0].fix})"), line


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_every_dataset_the_node_serves_validates(name, good_cfg):
    """Validation takes its list from the datasets' owner (launcher/runtime/datasets.py): each
    registered dataset, speed_throughput_4k among them, is accepted as the only one of a sweep."""
    cfg = copy.deepcopy(good_cfg)
    cfg.sweep.datasets = [name]
    split = speed_split(name)
    cfg.sweep.dataset_paths[name] = f"/not/on/this/machine/{split or name}.{'parquet' if split else 'jsonl'}"
    cfg.bench.gates.min_acceptance_length = {}
    cfg.bench.gates.min_speedup = {}
    assert validate(*with_engine(cfg)) == []


def test_an_unknown_split_is_refused_with_the_owners_list(good_cfg):
    cfg = copy.deepcopy(good_cfg)
    cfg.sweep.datasets = ["speed_throughput_3k"]
    errors = validate(*with_engine(cfg))
    assert [e.field for e in errors] == ["sweep.datasets"]
    assert all(s in errors[0].fix for s in SPEED_SPLITS), errors[0].fix


@pytest.mark.parametrize("args,says", [
    (["bench.gatez.x=1"], "check the spelling; fields of bench: "),
    (["+model.foo=1"], "check the spelling; fields of model: path, "),
    (["~bench.gates.min_acceptance_length.nope"], "drop ~bench.gates.min_acceptance_length.nope"),
    (["+recipe=smoke"], "drop the +: write recipe=NAME"),
])
def test_unknown_and_prefix_errors_give_the_right_fix(args, says, recipe_env, tmp_path, capsys):
    """A misspelt key names the fields it could be; a `+`/`~` that Hydra refuses says
    what to write instead (never "check the spelling" for a correctly spelt key)."""
    from launcher.login import cli

    rc = cli.main([f"output_dir={tmp_path}", *args, "dry_run=true"])
    err = capsys.readouterr().err
    assert rc == 2 and says in err, err
