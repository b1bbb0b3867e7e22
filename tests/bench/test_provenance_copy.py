"""issue 41 item 5: provenance from a copy of the repository without .git, not installed,
on PYTHONPATH (the GPU machine; an archive unpacked on a cluster's shared filesystem). The
version is read from the copy's own source and the commit is said to be unknown."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from launcher.report.html import provenance
from launcher.results.job_dir import load_job

ROOT = Path(__file__).resolve().parents[2]
PROBE = ("import json; from launcher.bench import point_files; from launcher.runtime import source; "
         "print(json.dumps({'file': point_files.__file__, 'version': source.tool_version(), 'sha': source.git_sha()}))")


def _copy(dst: Path, version: str) -> Path:
    shutil.copytree(ROOT / "launcher", dst / "launcher", ignore=shutil.ignore_patterns("__pycache__"))
    text = (ROOT / "pyproject.toml").read_text()
    (dst / "pyproject.toml").write_text(re.sub(r'^version = "([^"]+)"', rf'version = "\1+{version}"', text, count=1,
                                               flags=re.M))
    return dst


def _probe(copy: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=copy.parent, env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_a_copy_without_git_reads_its_own_version(tmp_path):
    copy = _copy(tmp_path / "unpacked", "copytest")
    got = _probe(copy)
    assert got["file"].startswith(str(copy))             # the copy runs, not an installed launcher
    assert got["version"].endswith("+copytest")           # the copy's pyproject.toml, not a distribution's
    assert got["sha"] is None                             # not a git checkout: the commit is unknown


def test_a_copy_inside_another_repository_does_not_take_its_commit(tmp_path):
    outer = tmp_path / "outer"
    outer.mkdir()
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    subprocess.run(["git", "-C", str(outer), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)
    got = _probe(_copy(outer / "vendored", "vendored"))
    assert got["sha"] is None and got["version"].endswith("+vendored")


def test_the_report_says_the_commit_is_unknown(tmp_path):
    job = shutil.copytree(ROOT / "tests" / "report" / "data" / "smoke_run1", tmp_path / "job")
    for conf in job.glob("*/*/configuration.json"):
        c = json.loads(conf.read_text())
        c["specdec_launcher"].update(tool_version="0.1.0", git_sha=None)
        conf.write_text(json.dumps(c))
    rows = dict(provenance(load_job(job)))
    assert rows["tool version / git"] == "0.1.0 / commit unknown (not a git checkout)"
