"""Validation's engine check: the one place the login side finds the recipe's engine (the name is
tested against the registry before it is resolved; launcher.login.prepare hands it to validation
and the plan), and what the engine, at the recipe's version, cannot take from the recipe."""
from __future__ import annotations

from typing import Optional

from launcher.engines import ENGINES, AcceptanceSource, Engine, RecipeFacts, get_engine, parse_version
from launcher.login.config.schema import LauncherConfig
from launcher.login.errors import ConfigError
from launcher.login.server_args import acceptance_source


def known_engine(name: str) -> Optional[Engine]:
    """The engine a recipe names (server.engine), None for a name no engine has."""
    return get_engine(name) if name in ENGINES else None


def check_engine(cfg: LauncherConfig, eng: Optional[Engine]) -> list[ConfigError]:
    """The engine exists (``eng``: known_engine's answer) and, at the recipe's version, has what
    the recipe asks of it."""

    srv = cfg.server
    if eng is None:
        return [ConfigError("server.engine", f"is '{srv.engine}'", f"use one of: {', '.join(sorted(ENGINES))}")]
    if srv.engine_version is not None and parse_version(srv.engine_version) is None:
        return [ConfigError("server.engine_version", f"is '{srv.engine_version}'", "give a version such as 0.32.0")]
    choices = ("auto",) + tuple(s.value for s in AcceptanceSource)
    if cfg.bench.acceptance_source not in choices:
        return [ConfigError("bench.acceptance_source", f"is '{cfg.bench.acceptance_source}'",
                            f"use one of: {', '.join(choices)}")]
    try:
        acceptance_source(cfg, eng)
    except ConfigError as e:
        return [e]
    return _engine_fit(cfg, eng)


def _engine_fit(cfg: LauncherConfig, eng: Engine) -> list[ConfigError]:
    """What the engine cannot take from the recipe, by its own checks. Its flags are built once, by
    the plan (launcher.login.server_args.server_flags), which refuses what they cannot take."""

    srv, b = cfg.server, cfg.bench
    facts = RecipeFacts(container_image=cfg.cluster.container_image, draft_method=cfg.draft.method,
                        known_answer=bool(b.known_answer), known_answer_allow_fail=bool(b.known_answer_allow_fail),
                        temperatures=tuple(cfg.sweep.temperatures), engine_version=srv.engine_version,
                        server_env={str(k): str(v) for k, v in (srv.env or {}).items()})
    problems = eng.recipe_problems(facts)
    return [ConfigError(*problems[0])] if problems else []
