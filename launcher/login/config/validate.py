"""Checks a composed recipe before anything is planned or submitted.

`validate` returns every problem found (not just the first), each a ConfigError
whose line names the field and the fix. Each check returns its own, by theme:
the speculation (check_speculation), what serves it (check_serving), the sweep
(check_sweep), the topology (check_topology), the engine (engine_check) and the files it
names (check_inputs). The engine is handed in: launcher.login.prepare resolves it once for
validation and the plan together.
"""
from __future__ import annotations

from typing import Optional

from launcher.login.config.check_inputs import input_path_problems, output_problems
from launcher.login.config.check_serving import (api_key_problems, cluster_problems, parallelism_problems,
                                                 server_problems)
from launcher.login.config.check_speculation import forced_acceptance_problems, golden_problems, speculation_problems
from launcher.login.config.check_sweep import gates_problems, slo_problems, sweep_problems
from launcher.login.config.check_topology import topology_problems
from launcher.engines import Engine
from launcher.login.config.engine_check import check_engine
from launcher.login.config.schema import LauncherConfig
from launcher.login.errors import ConfigError


def validate(cfg: LauncherConfig, eng: Optional[Engine]) -> list[ConfigError]:
    """Every problem with the recipe, one ConfigError each (empty: valid): one check per section.
    ``eng``: the recipe's engine as launcher.login.prepare resolved it (engine_check.known_engine;
    None: unknown, which the engine check reports)."""
    errs: list[ConfigError] = []
    errs += speculation_problems(cfg)
    errs += forced_acceptance_problems(cfg, eng)
    errs += golden_problems(cfg)
    errs += parallelism_problems(cfg)
    errs += cluster_problems(cfg)
    errs += sweep_problems(cfg)
    errs += slo_problems(cfg)
    errs += server_problems(cfg, eng)
    errs += check_engine(cfg, eng)
    errs += topology_problems(cfg, eng)
    errs += gates_problems(cfg)
    errs += api_key_problems(cfg, eng)
    errs += input_path_problems(cfg)
    errs += output_problems(cfg)
    return errs
