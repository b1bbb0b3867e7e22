"""Fixtures for the launcher's pure and CLI tests (no servers, no cluster).

`launcher_cli` runs `python -m launcher ...` as a subprocess in a clean
environment: the variables the recipes read (CONTAINER_IMAGE, SLURM_ACCOUNT,
SPECDEC_DATA) are removed so the YAML defaults apply, and SPECDEC_HOME points
at a temporary folder. SPECDEC_RECIPES_DIR is kept: it selects the recipe tree
under test.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.login import with_engine

REPO_ROOT = Path(__file__).resolve().parents[2]
# Variables the recipes or the composer read; a developer's shell must not change what the tests see.
RECIPE_ENV_VARS = ("CONTAINER_IMAGE", "SLURM_ACCOUNT", "SPECDEC_DATA", "SPECDEC_HOME", "SPECDEC_MTBENCH", "SPECDEC_SPECBENCH")


def clean_env(specdec_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in RECIPE_ENV_VARS}
    env["SPECDEC_HOME"] = str(specdec_home)
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("PYTHONHASHSEED", None)  # IDs must not depend on hash randomisation
    return env


def run_launcher(args: list[str], specdec_home: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "launcher", *args], cwd=REPO_ROOT, env=clean_env(specdec_home),
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def launcher_runner():
    """run_launcher(args, specdec_home) for module- or session-scoped fixtures."""
    return run_launcher


def stub_specdec_home(home: Path) -> Path:
    """The tiny models' folders as the login-side input checks see them (config.json,
    tokenizer files): recipes pointing at them validate without the real models."""
    for name in ("tiny-target", "tiny-draft-noisy", "tiny-draft-identical", "tiny-target-context-free", "shaped-8b/target", "shaped-8b/draft",
                 "shaped-8b/eagle3", "shaped-qwen3-8b/target", "shaped-qwen3-8b/dflash", "shaped-qwen3-8b/eagle3"):
        d = home / "models" / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.json").write_text("{}")
        (d / "tokenizer_config.json").write_text("{}")
    return home


@pytest.fixture
def specdec_home(tmp_path_factory) -> Path:
    return stub_specdec_home(tmp_path_factory.mktemp("specdec_home"))


@pytest.fixture
def launcher_cli(specdec_home):
    """launcher_cli(*args) -> CompletedProcess of `python -m launcher *args`."""
    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return run_launcher(list(args), specdec_home, timeout)
    return run


@pytest.fixture
def recipe_env(monkeypatch, specdec_home):
    """The same clean environment for in-process composition."""
    for k in RECIPE_ENV_VARS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("SPECDEC_HOME", str(specdec_home))
    return specdec_home


@pytest.fixture
def compose(recipe_env, tmp_path):
    """compose(*overrides) -> LauncherConfig, with output_dir=tmp_path unless given."""
    from launcher.login.config.compose import compose_recipe

    def _compose(*overrides: str):
        ov = list(overrides)
        if not any(o.startswith("output_dir=") for o in ov):
            ov.append(f"output_dir={tmp_path}")
        return compose_recipe(ov)
    return _compose


@pytest.fixture(scope="session")
def qwen3_dflash_cfg(tmp_path_factory):
    """qwen3_dflash, composed once (Hydra composition is the slow part) and checked to be
    valid; tests deep-copy it before changing it."""
    from launcher.login.config.compose import compose_recipe
    from launcher.login.config.validate import validate

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPECDEC_HOME", str(stub_specdec_home(tmp_path_factory.mktemp("specdec_home"))))
        for k in ("CONTAINER_IMAGE", "SLURM_ACCOUNT", "SPECDEC_DATA"):
            mp.delenv(k, raising=False)
        cfg = compose_recipe(["recipe=qwen3_dflash", f"output_dir={tmp_path_factory.mktemp('out')}"])
    assert validate(*with_engine(cfg)) == []
    return cfg
