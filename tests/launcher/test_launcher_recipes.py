"""Every recipe composes, validates, plans and renders; the acceptance dry run on GB300/H100."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from launcher.login.config.compose import available, recipes_dir
from launcher.login.config.validate import validate
from launcher.login.plan import make_plan
from launcher.login.sbatch import describe_commands, render_sbatch
from tests.support.login import with_engine

# Every recipes/recipe/*.yaml (or $SPECDEC_RECIPES_DIR/recipe/*.yaml): a new recipe is tested without listing it.
RECIPES = available("recipe")
HEADER = re.compile(r"^recipe (\S+): (\d+) job\(s\), (\d+) client point\(s\); cluster (\S+) \((local|slurm)\)$")
STANDALONE_MARK = "# ---- standalone script"
SBATCH_MARK = "# ---- sbatch script (submitit) ----"


def test_recipe_glob_finds_the_shipped_recipes():
    # Guards the parametrisation below against a silently empty glob.
    assert {"smoke", "qwen3_dflash"} <= set(RECIPES), f"recipes found under {recipes_dir()}: {RECIPES}"


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_composes_validates_plans_and_renders(recipe, compose, tmp_path):
    cfg = compose(f"recipe={recipe}")
    assert cfg.name == recipe, f"{recipes_dir()}/recipe/{recipe}.yaml sets name={cfg.name!r}: results would go to the wrong folder"
    errors = validate(*with_engine(cfg))
    assert errors == [], "\n".join(e.line() for e in errors)

    plan = make_plan(*with_engine(cfg))
    assert plan.jobs
    assert Path(plan.results_dir) == tmp_path.resolve() / recipe
    sw = cfg.sweep
    for job in plan.jobs:
        assert Path(job.job_dir).parent == Path(plan.results_dir)
        assert len(job.points) == len(sw.datasets) * len(sw.temperatures) * len(sw.concurrencies)
        assert any(line.startswith("#   server: ") for line in describe_commands(job, plan.engine))
    if cfg.cluster.executor == "slurm":
        text = render_sbatch(cfg.cluster, plan.jobs, tmp_path / "_submitit", f"specdec-{recipe}", plan.engine)
        assert text.startswith("#!/bin/bash")
        assert any(line.startswith("srun ") for line in text.splitlines())


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_dry_run_cli(recipe, recipe_env, tmp_path, capsys):
    """The dry-run CLI (cli.main, in-process; the subprocess path is covered by the acceptance test)."""
    from launcher.login import cli

    out = tmp_path / "results"
    out.mkdir()
    rc = cli.main([f"recipe={recipe}", "dry_run=true", f"output_dir={out}"])
    stdout, stderr = capsys.readouterr()
    assert rc == 0, stderr
    assert stderr == ""
    m = HEADER.match(stdout.splitlines()[0])
    assert m, stdout.splitlines()[0]
    assert m.group(1) == recipe and int(m.group(2)) >= 1 and int(m.group(3)) >= 1
    assert list(out.iterdir()) == [], "a dry run must not create anything"


def _sbatch(stdout: str) -> list[str]:
    assert SBATCH_MARK in stdout, stdout
    return stdout.split(SBATCH_MARK, 1)[1].split(STANDALONE_MARK, 1)[0].splitlines()


def _flag_value(argv: list[str], flag: str) -> str:
    hits = [i for i, a in enumerate(argv) if a == flag]
    assert len(hits) == 1, f"{flag} appears {len(hits)} times in {argv}"
    return argv[hits[0] + 1]


@pytest.mark.parametrize("cluster,gpus", [("gb300", 4), ("h100", 8)])
def test_acceptance_qwen3_dflash_dry_run(cluster, gpus, launcher_cli, tmp_path):
    r = launcher_cli("recipe=qwen3_dflash", f"cluster={cluster}", "dry_run=true", f"output_dir={tmp_path}")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    lines = _sbatch(r.stdout)
    assert f"#SBATCH --gpus-per-node={gpus}" in lines
    assert "#SBATCH --partition=batch" in lines
    assert "#SBATCH --time=240" in lines
    assert "#SBATCH --nodes=1" in lines
    assert "#SBATCH --ntasks-per-node=1" in lines
    assert "#SBATCH --account=specdec" in lines
    assert not any(ln.startswith("#SBATCH --array") for ln in lines), "one server configuration: no array"
    if cluster == "gb300":
        assert "#SBATCH --segment=1" in lines

    srun = [ln for ln in lines if ln.startswith("srun ")]
    assert len(srun) == 1
    srun_argv = shlex.split(srun[0])
    # the job runs from this checkout's environment; only the server step is in the container
    assert not any(a.startswith("--container") for a in srun_argv), srun_argv
    assert "--mpi=pmix" not in srun_argv
    assert srun_argv[-4:-1] == ["-u", "-m", "submitit.core._submit"]

    servers = [ln for ln in lines if ln.startswith("#   server: ")]
    assert len(servers) == 1
    step = shlex.split(servers[0][len("#   server: "):])
    i = step.index("vllm")
    prefix, argv = step[:i], step[i:]
    assert prefix[:2] == ["srun", "--overlap"] and "--ntasks=1" in prefix and "--nodes=1" in prefix
    assert f"--gpus-per-node={gpus}" in prefix
    assert "--container-image=vllm/vllm-openai:v0.32.0" in prefix  # a vLLM with per-request spec stats
    assert "--container-mounts=/lustre:/lustre" in prefix
    assert argv[:3] == ["vllm", "serve", "Qwen/Qwen3-8B"]  # the model is positional for `vllm serve`
    spec = json.loads(_flag_value(argv, "--speculative-config"))
    assert spec == {"method": "dflash", "model": "z-lab/Qwen3-8B-DFlash-b16", "num_speculative_tokens": 15}
    assert _flag_value(argv, "--per-request-spec-decode-metrics") == "detailed"
    assert _flag_value(argv, "--tensor-parallel-size") == "1"
    assert _flag_value(argv, "--host") == "0.0.0.0"


def test_cfg_prints_the_composed_recipe(recipe_env, capsys):
    from launcher.login import cli

    rc = cli.main(["recipe=qwen3_dflash", "sweep.concurrencies=[2,4]", "--cfg"])
    stdout, stderr = capsys.readouterr()
    assert rc == 0, stderr
    assert "${" not in stdout, "interpolations must be resolved"
    cfg = yaml.safe_load(stdout)
    assert cfg["name"] == "qwen3_dflash"
    assert cfg["draft"]["method"] == "dflash"
    assert cfg["cluster"]["gpus_per_node"] == 4
    assert cfg["sweep"]["concurrencies"] == [2, 4]
    assert cfg["sweep"]["dataset_paths"]["mtbench"] == "/lustre/datasets/mt_bench/question.jsonl"


def test_smoke_recipe_uses_specdec_home(compose, recipe_env):
    cfg = compose("recipe=smoke")
    assert cfg.model.path == f"{recipe_env}/models/tiny-target"
    assert cfg.server.command.startswith(f"{recipe_env}/venvs/vllm/bin/python -m ")
