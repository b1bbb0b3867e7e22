"""Which launcher produced a result: its version and git commit, read from the source that runs.

The version comes from the source itself: the ``pyproject.toml`` beside the ``launcher``
package (a checkout, a copy without ``.git`` on PYTHONPATH, an archive unpacked on a shared
filesystem), else the installed distribution's metadata. The commit is read only where the
source is a git checkout of its own (a ``.git`` at its root); elsewhere it is unknown (None),
and never the commit of some repository the copy happens to sit in.
"""
from __future__ import annotations

import subprocess
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Optional

from launcher.runtime.files import REPO_ROOT

DISTRIBUTION = "specdec-launcher"
UNKNOWN_VERSION = "0+unknown"
UNKNOWN_COMMIT = "commit unknown (not a git checkout)"  # what a reader shows for a null git_sha


def tool_version(root: Path = REPO_ROOT) -> str:
    """The launcher's version: the source's pyproject.toml, else the distribution, else 0+unknown."""
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text()).get("project") or {}
        if project.get("name") == DISTRIBUTION and project.get("version"):
            return str(project["version"])
    except (OSError, tomllib.TOMLDecodeError):
        pass
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return UNKNOWN_VERSION


def git_sha(root: Path = REPO_ROOT) -> Optional[str]:
    """HEAD of the source's own git checkout; None where the source is not one."""
    if not (root / ".git").exists():  # a directory, or a worktree's file
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
