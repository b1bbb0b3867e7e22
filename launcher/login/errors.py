"""Errors a user can fix. Each renders as one line: what is wrong, where, and the fix."""
from __future__ import annotations


class UserError(Exception):
    """A problem with the user's input; printed as one line, exit code 2."""

    exit_code = 2

    def __init__(self, field: str, problem: str, fix: str | None = None):
        self.field, self.problem, self.fix = field, problem, fix
        super().__init__(self.line())

    def line(self) -> str:
        msg = f"{self.field}: {self.problem}"
        return f"{msg} (fix: {self.fix})" if self.fix else msg


class ConfigError(UserError):
    """A recipe or override that cannot be run."""


class Problems(list):
    """The ConfigErrors one check of a recipe finds (launcher.login.config.validate): a list."""

    def add(self, field: str, problem: str, fix: str | None = None) -> None:
        self.append(ConfigError(field, problem, fix))
