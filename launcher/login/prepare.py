"""The login side's one pass from a composed recipe to a plan: the recipe's engine resolved once
(engine_check.known_engine) and handed to validation and to the plan; each server configuration's
flags built once, by the plan (which refuses what the engine cannot take)."""
from __future__ import annotations

from launcher.login.config.engine_check import known_engine
from launcher.login.config.schema import LauncherConfig
from launcher.login.config.validate import validate
from launcher.login.errors import ConfigError
from launcher.login.plan import Plan, make_plan


class Invalid(Exception):
    """The recipe's problems, every one (each a one-line ConfigError)."""

    def __init__(self, errors: list[ConfigError]):
        super().__init__("; ".join(e.line() for e in errors))
        self.errors = errors


def prepare(cfg: LauncherConfig) -> Plan:
    """The recipe validated and planned with one engine; Invalid with every problem validation
    finds, or a ConfigError (a UserError: one line) where the plan's flags are refused."""
    eng = known_engine(cfg.server.engine)
    errors = validate(cfg, eng)
    if errors:
        raise Invalid(errors)
    return make_plan(cfg, eng)
