"""The login side's engine for a test that validates or plans a composed recipe by hand, found the
way launcher.login.prepare finds it (engine_check.known_engine): ``validate(*with_engine(cfg))``."""
from __future__ import annotations

from launcher.login.config.engine_check import known_engine


def with_engine(cfg):
    """(cfg, the recipe's engine, None when no engine has its name)."""
    return cfg, known_engine(cfg.server.engine)
