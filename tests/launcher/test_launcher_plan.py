"""The planner: content-derived IDs and folders, server-side vs client-side
changes, the num_speculative_tokens sweep, client points, job arrays."""
from __future__ import annotations

import copy
from dataclasses import asdict
import itertools
import json
import pickle
import re
from pathlib import Path

import pytest

from launcher.login import cli
from launcher.login.config.validate import validate
from launcher.login.plan import ClientPoint, make_plan
from launcher.contracts.job import point_dir_name
from launcher.contracts.job import JobSpec
from launcher.login.sbatch import render_sbatch
from tests.support.login import with_engine


@pytest.fixture
def base_cfg(qwen3_dflash_cfg):
    return qwen3_dflash_cfg


@pytest.fixture
def cfg(base_cfg):
    return copy.deepcopy(base_cfg)


def _ids(plan):
    return [j.server_id for j in plan.jobs]


def test_point_dir_name():
    assert point_dir_name("mtbench", 0.7, 8) == "mtbench/t0.7_c8"
    assert point_dir_name("mtbench", 0.0, 1) == "mtbench/t0_c1"
    assert point_dir_name("specbench", 1.0, 64) == "specbench/t1_c64"
    assert ClientPoint("speed_qualitative", 0.25, 512).id == "speed_qualitative/t0.25_c512"


def test_same_recipe_same_dirs(cfg, base_cfg):
    a, b = make_plan(*with_engine(cfg)), make_plan(*with_engine(copy.deepcopy(base_cfg)))
    assert a.results_dir == b.results_dir == str(Path(cfg.output_dir).resolve() / "qwen3_dflash")
    assert _ids(a) == _ids(b)
    assert [j.job_dir for j in a.jobs] == [j.job_dir for j in b.jobs]
    assert [p.id for p in a.jobs[0].points] == [p.id for p in b.jobs[0].points]
    job = a.jobs[0]
    assert re.fullmatch(r"qwen3-8b-dflash-k15-tp1-[0-9a-f]{8}", job.server_id), job.server_id
    assert Path(job.job_dir) == Path(a.results_dir) / job.server_id


def test_ids_are_stable_across_processes(cfg, launcher_cli):
    """A fresh interpreter (another hash seed) plans the same server_id: resume depends on it."""
    r = launcher_cli("recipe=qwen3_dflash", "dry_run=true", f"output_dir={cfg.output_dir}")
    assert r.returncode == 0, r.stderr
    job = make_plan(*with_engine(cfg)).jobs[0]
    assert f"\njob {job.server_id}  ->  {job.job_dir}\n" in r.stdout


def test_output_dir_moves_dirs_not_ids(cfg, tmp_path):
    a = make_plan(*with_engine(cfg))
    cfg.output_dir = str(tmp_path / "elsewhere")
    b = make_plan(*with_engine(cfg))
    assert _ids(a) == _ids(b)
    assert b.jobs[0].job_dir == str((tmp_path / "elsewhere" / "qwen3_dflash" / b.jobs[0].server_id).resolve())


SERVER_SIDE = [
    ("draft.num_speculative_tokens", lambda c: setattr(c.draft, "num_speculative_tokens", 7)),
    ("draft.model", lambda c: setattr(c.draft, "model", "someone/other-dflash")),
    ("draft.extra", lambda c: c.draft.extra.update({"attention_backend": "flash"})),
    ("model.max_model_len", lambda c: setattr(c.model, "max_model_len", 4096)),
    ("server.max_num_batched_tokens", lambda c: setattr(c.server, "max_num_batched_tokens", 8192)),
    ("server.kv_cache_memory_bytes", lambda c: setattr(c.server, "kv_cache_memory_bytes", "10G")),
    ("server.extra_args", lambda c: c.server.extra_args.extend(["--seed", "1"])),
    ("server.env", lambda c: c.server.env.update({"VLLM_USE_V1": "1"})),
    ("server.command", lambda c: setattr(c.server, "command", "python -m vllm.entrypoints.openai.api_server")),
    ("cluster.container_image", lambda c: setattr(c.cluster, "container_image", "vllm/vllm-openai:nightly")),
    ("parallel.draft_tp", lambda c: setattr(c.parallel, "draft_tp", 1)),
]


@pytest.mark.parametrize("name,change", SERVER_SIDE, ids=[s[0] for s in SERVER_SIDE])
def test_server_side_change_gives_new_server_id(name, change, cfg, base_cfg):
    change(cfg)
    before, after = make_plan(*with_engine(base_cfg)), make_plan(*with_engine(cfg))
    assert _ids(before) != _ids(after), f"{name} changes the server but not its id"
    assert before.jobs[0].job_dir != after.jobs[0].job_dir


CLIENT_SIDE = [
    ("sweep.concurrencies", lambda c: setattr(c.sweep, "concurrencies", [1, 2])),
    ("sweep.temperatures", lambda c: setattr(c.sweep, "temperatures", [0.0, 0.7])),
    ("sweep.datasets", lambda c: setattr(c.sweep, "datasets", ["mtbench", "specbench"])),
    ("sweep.output_length", lambda c: setattr(c.sweep, "output_length", 64)),
    ("sweep.num_requests", lambda c: setattr(c.sweep, "num_requests", 10)),
    ("sweep.runtime_params", lambda c: c.sweep.runtime_params.sampling_kwargs.update({"top_p": 0.5})),
    ("bench.point_timeout_s", lambda c: setattr(c.bench, "point_timeout_s", 60)),
]


@pytest.mark.parametrize("name,change", CLIENT_SIDE, ids=[s[0] for s in CLIENT_SIDE])
def test_client_side_change_keeps_server_id(name, change, cfg, base_cfg):
    change(cfg)
    before, after = make_plan(*with_engine(base_cfg)), make_plan(*with_engine(cfg))
    assert _ids(before) == _ids(after), f"{name} is client-side: the same server (and folder) must be reused"
    assert before.jobs[0].job_dir == after.jobs[0].job_dir
    assert before.jobs[0].bench != after.jobs[0].bench or before.jobs[0].points != after.jobs[0].points


def test_concurrency_change_changes_points(cfg, base_cfg):
    cfg.sweep.concurrencies = [1, 2]
    before, after = make_plan(*with_engine(base_cfg)), make_plan(*with_engine(cfg))
    assert _ids(before) == _ids(after)
    assert {p.id for p in after.jobs[0].points} == {"mtbench/t0_c1", "mtbench/t0_c2", "mtbench/t1_c1", "mtbench/t1_c2"}
    assert {p.id for p in before.jobs[0].points} != {p.id for p in after.jobs[0].points}


def test_spec_token_sweep_gives_one_job_per_value(cfg):
    cfg.sweep.num_speculative_tokens = [1, 3]
    plan = make_plan(*with_engine(cfg))
    assert len(plan.jobs) == 2
    assert [j.num_speculative_tokens for j in plan.jobs] == [1, 3]
    assert [j.speculative_config["num_speculative_tokens"] for j in plan.jobs] == [1, 3]
    assert len(set(_ids(plan))) == 2 and len({j.job_dir for j in plan.jobs}) == 2
    assert "-k1-" in plan.jobs[0].server_id and "-k3-" in plan.jobs[1].server_id
    for j in plan.jobs:
        argv = j.server_argv("h", 1, engine=plan.engine)  # built from the spec's fields: the speculative config once
        spec = json.loads(argv[argv.index("--speculative-config") + 1])
        assert spec["num_speculative_tokens"] == j.num_speculative_tokens
        assert "--speculative-config" not in j.server_flags and "num_speculative_tokens" not in " ".join(j.server_flags)
        assert len(j.points) == 8  # each server runs the whole client sweep
    assert plan.num_points == 16


def test_spec_token_sweep_value_equal_to_default_is_the_same_server(cfg, base_cfg):
    """k=15 via the sweep is the same server as draft.num_speculative_tokens=15: same folder, so results resume."""
    cfg.sweep.num_speculative_tokens = [15]
    assert _ids(make_plan(*with_engine(cfg))) == _ids(make_plan(*with_engine(base_cfg)))


def test_no_speculation_ignores_the_spec_token_sweep(cfg):
    cfg.draft.method, cfg.draft.model = "none", None
    cfg.sweep.num_speculative_tokens = [1, 3]
    plan = make_plan(*with_engine(cfg))
    assert len(plan.jobs) == 1
    job = plan.jobs[0]
    assert job.speculative_config is None and job.num_speculative_tokens is None
    assert "--speculative-config" not in job.server_flags
    assert re.fullmatch(r"qwen3-8b-none-tp1-[0-9a-f]{8}", job.server_id), job.server_id
    assert job.bench.preflight is False


def test_points_are_the_product(cfg):
    cfg.sweep.datasets = ["mtbench", "specbench"]
    cfg.sweep.dataset_paths["specbench"] = "/data/specbench.jsonl"
    cfg.sweep.temperatures = [0.0, 0.7]
    cfg.sweep.concurrencies = [1, 8, 32]
    plan = make_plan(*with_engine(cfg))
    ids = [p.id for p in plan.jobs[0].points]
    expected = [f"{d}/t{t:g}_c{c}" for d, t, c in itertools.product(["mtbench", "specbench"], [0.0, 0.7], [1, 8, 32])]
    assert ids == expected
    assert "mtbench/t0.7_c8" in ids and "specbench/t0_c1" in ids
    assert len(set(ids)) == 12 == plan.num_points
    pts = {p.id: p for p in plan.jobs[0].points}
    assert (pts["mtbench/t0.7_c8"].temperature, pts["mtbench/t0.7_c8"].concurrency) == (0.7, 8)
    bench = plan.jobs[0].bench
    assert {d.name: d.path for d in bench.datasets}["specbench"] == "/data/specbench.jsonl"
    assert list(dict.fromkeys(p.temperature for p in plan.jobs[0].points)) == [0.0, 0.7]
    assert "temperature" not in json.dumps(asdict(bench))  # once in the spec: on the points


def test_duplicate_sweep_values_do_not_make_duplicate_points(cfg):
    cfg.sweep.concurrencies = [8, 8]
    errors = validate(*with_engine(cfg))
    if any(e.field == "sweep.concurrencies" for e in errors):
        return  # rejected: fine
    ids = [p.id for p in make_plan(*with_engine(cfg)).jobs[0].points]
    assert len(ids) == len(set(ids)), ids


def test_job_plan_travels_as_plain_data(cfg):
    cfg.sweep.num_speculative_tokens = [1, 3]
    for job in make_plan(*with_engine(cfg)).jobs:
        d = job.to_dict()
        assert json.loads(json.dumps(d)) == d
        assert pickle.loads(pickle.dumps(d)) == d
        assert [p["id"] for p in d["points"]] == [p.id for p in job.points]
        assert JobSpec.from_dict(json.loads(job.to_json())) == job  # the node reads back what was planned


def test_two_jobs_render_an_array(cfg, tmp_path):
    cfg.sweep.num_speculative_tokens = [1, 3]
    plan = make_plan(*with_engine(cfg))
    lines = render_sbatch(cfg.cluster, plan.jobs, tmp_path, "specdec-x", plan.engine).splitlines()
    arrays = [ln for ln in lines if ln.startswith("#SBATCH --array=")]
    # submitit caps the parallelism at the number of tasks
    assert arrays == [f"#SBATCH --array=0-1%{min(2, cfg.cluster.array_parallelism)}"]
    cfg.cluster.array_parallelism = 1
    lines1 = render_sbatch(cfg.cluster, plan.jobs, tmp_path, "specdec-x", plan.engine).splitlines()
    assert "#SBATCH --array=0-1%1" in lines1
    assert "# --- array task 0" in lines and "# --- array task 1" in lines
    servers = [ln for ln in lines if ln.startswith("#   server: ")]
    assert len(servers) == 2
    assert '"num_speculative_tokens":1' in servers[0] and '"num_speculative_tokens":3' in servers[1]


def test_one_job_renders_no_array(cfg, tmp_path):
    plan = make_plan(*with_engine(cfg))
    lines = render_sbatch(cfg.cluster, plan.jobs, tmp_path, "specdec-x", plan.engine).splitlines()
    assert not any(ln.startswith("#SBATCH --array") for ln in lines)


def test_cli_dry_run_with_spec_token_sweep(cfg, recipe_env, tmp_path, capsys):
    """Through the CLI (in-process): the header counts jobs and points; the sbatch is an array."""
    rc = cli.main(["recipe=qwen3_dflash", "sweep.num_speculative_tokens=[1,3]", "dry_run=true",
                   f"output_dir={tmp_path}"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == "recipe qwen3_dflash: 2 job(s), 16 client point(s); cluster gb300 (slurm)"
    assert any(ln.startswith("#SBATCH --array=0-1%") for ln in lines)
    assert sum(ln.startswith("job qwen3-8b-dflash-k") for ln in lines) == 2
    assert list(tmp_path.iterdir()) == []


def test_draft_extra_cannot_override_method_or_k(cfg):
    cfg.draft.extra = {"num_speculative_tokens": 5}
    assert any(e.field == "draft.extra.num_speculative_tokens" for e in validate(*with_engine(cfg)))


def test_baseline_is_the_first_jobs_server_without_speculation(cfg):
    cfg.sweep.baseline = True
    cfg.sweep.num_speculative_tokens = [1, 3]
    cfg.bench.gates.min_acceptance_length = {"mtbench": 2.0}
    cfg.bench.gates.min_speedup = {"mtbench": 1.1}
    plan = make_plan(*with_engine(cfg))
    base, host, other = plan.baseline, plan.jobs[0], plan.jobs[1]
    assert len(plan.jobs) == 2 and base.role == "baseline" and base.method == "none"
    assert base.server_id.startswith("qwen3-8b-none-tp1-") and Path(base.job_dir).parent == Path(plan.results_dir)
    # the same server without the speculative flags, in the same order; the same points
    assert not any(f.startswith(("--speculative-config", "--per-request-spec-decode-metrics")) for f in base.server_flags)
    assert host.server_flags == base.server_flags  # the speculative flags are built from typed fields
    host_argv, base_argv = host.server_argv("h", 1, engine=plan.engine), base.server_argv("h", 1, engine=plan.engine)
    assert [f for f in host_argv if f in base_argv] == base_argv and len(host_argv) == len(base_argv) + 4
    assert base.points == host.points and plan.num_points == 3 * len(host.points)
    # no acceptance gates, no preflight, no lossless check; its own folder
    assert base.bench.preflight is False and base.bench.gates.min_acceptance_length == {}
    assert base.bench.save_dir == base.job_dir
    assert base.bench.lossless is None
    # the first job runs it (its spec holds the baseline's benchmark); every job knows where it is
    assert host.baseline.run_here and host.baseline.bench == base.bench and not other.baseline.run_here
    assert other.baseline.bench is None
    assert host.baseline.job_dir == other.baseline.job_dir == base.job_dir
    assert host.compare_thresholds["min_speedup"] == {"mtbench": 1.1}
    assert cfg.draft.method != "none"  # the recipe itself is untouched


def test_no_baseline_by_default(cfg):
    plan = make_plan(*with_engine(cfg))
    assert plan.baseline is None and all(j.baseline is None for j in plan.jobs)


def test_render_only_writes_the_job_folders_and_submits_nothing(recipe_env, tmp_path, capsys):
    """render_only=true: each job's job.json and standalone job.sbatch are written (the
    dry run's printed script then points at a spec that exists); nothing is submitted."""
    rc = cli.main(["recipe=qwen3_dflash", "sweep.num_speculative_tokens=[1,3]", "render_only=true",
                   f"output_dir={tmp_path}"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    jobs = sorted(p.parent for p in tmp_path.rglob("job.json"))
    assert len(jobs) == 2 and not list(tmp_path.rglob("_submitit"))
    for d in jobs:
        spec = JobSpec.read(d / "job.json")
        assert spec.job_dir == str(d) and spec.bench is not None
        script = (d / "job.sbatch").read_text()
        assert str(d / "job.json") in script
        assert f"sbatch {d}/job.sbatch" in out
    assert "nothing submitted" in out
