"""How a documented command runs in the tests (tests/docs/doc_commands.py says which lines are
commands): the line as run, its environment, and what a failure says."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.docs.doc_commands import REPO_ROOT, DocCommand, collect, is_launcher_module

COMMANDS = collect()
RUN = [c for c in COMMANDS if c.skip_reason is None and c.kind != "synopsis"]
MARKED = [c for c in COMMANDS if c.skip_reason is not None]


def needs_results(ep) -> bool:
    """report, compare, upload_to_s3 and any later `python -m launcher.X` (but the
    benchmark) run in a folder holding the smoke run's results as results/{smoke,a,b}."""
    return ep == "upload" or (is_launcher_module(ep) and ep != "bench")


def as_run(cmd: DocCommand) -> str:
    """The command line the test runs: the interpreter is this venv's, and a
    launcher command that would submit becomes a dry run."""
    text = cmd.text.split("&&")[-1].strip() if cmd.entry_point == "launcher" else cmd.text
    if cmd.kind == "override":
        text = f"python -m launcher {text}"
    if cmd.entry_point in ("launcher", "override") and "--cfg" not in text and "dry_run=" not in text:
        text += " dry_run=true"
    words = shlex.split(text)
    if re.fullmatch(r"\S*python3?", words[0]):
        words[0] = sys.executable
    return shlex.join(words)


def run_env(extra: dict) -> dict:
    env = {**os.environ, **extra}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("COLUMNS", "200")
    return env


def run_line(line: str, cwd: Path, extra: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=run_env(extra or {}), capture_output=True, text=True,
                          timeout=600)


def failure(cmd: DocCommand, line: str, p: subprocess.CompletedProcess) -> str:
    return f"{cmd.where}: `{cmd.text}` (run as `{line}`) exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
