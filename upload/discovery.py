"""Find the run directories under LOCAL_DIR and the files each run owns.

A run directory is any folder holding configuration.json, timing.json or
acceptance_rate.json.  A file belongs to the deepest run directory above it;
files that sit in no run directory (job-level files such as summary.json or
logs/) are reported, not uploaded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from launcher.results.layout import RUN_FILES
from upload.errors import UsageError
from upload.manifest import MANIFEST_NAME

RUN_MARKERS = RUN_FILES  # launcher.results: the one definition of a run folder


@dataclass(frozen=True)
class LocalFile:
    rel: str  # POSIX path relative to the run directory
    path: Path


@dataclass
class LocalRun:
    root: Path
    rel: str  # POSIX path relative to LOCAL_DIR; "" when LOCAL_DIR is the run
    source_name: str  # LOCAL_DIR's base name
    files: list[LocalFile] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.source_name}/{self.rel}" if self.rel else self.source_name

    def file(self, rel: str) -> LocalFile | None:
        for f in self.files:
            if f.rel == rel:
                return f
        return None


@dataclass
class Discovery:
    local_dir: Path
    name: str
    runs: list[LocalRun]
    outside: list[str]  # files in no run directory, relative to LOCAL_DIR


def _posix_rel(path: Path, base: Path) -> str:
    rel = path.relative_to(base).as_posix()
    return "" if rel == "." else rel


def discover(local_dir: str | os.PathLike) -> Discovery:
    base = Path(local_dir)
    if not base.exists():
        raise UsageError(f"LOCAL_DIR {str(base)!r} does not exist; pass a results folder")
    if not base.is_dir():
        raise UsageError(f"LOCAL_DIR {str(base)!r} is not a folder; pass a results folder")
    name = base.resolve().name
    if not name:
        raise UsageError(f"LOCAL_DIR {str(base)!r} has no base name to key the upload by; pass a subfolder")

    def fail(err: OSError) -> None:
        raise UsageError(f"cannot read {err.filename!r}: {err.strerror}; fix its permissions")

    runs: dict[str, LocalRun] = {}
    owner: dict[str, LocalRun | None] = {}
    outside: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base, onerror=fail):
        dirnames.sort()
        here = Path(dirpath)
        rel_dir = _posix_rel(here, base)
        if any(m in filenames and (here / m).is_file() for m in RUN_MARKERS):
            run = LocalRun(root=here, rel=rel_dir, source_name=name)
            runs[rel_dir] = run
            owner[rel_dir] = run
        else:
            parent = rel_dir.rpartition("/")[0] if "/" in rel_dir else ("" if rel_dir else None)
            owner[rel_dir] = owner.get(parent) if parent is not None else None
        run = owner[rel_dir]
        for fname in sorted(filenames):
            fpath = here / fname
            if not fpath.is_file():  # broken link, socket, ...
                continue
            if run is None:
                outside.append(_posix_rel(fpath, base))
                continue
            rel = _posix_rel(fpath, run.root)
            if rel == MANIFEST_NAME:  # a manifest fetched from S3 earlier; we write our own
                continue
            run.files.append(LocalFile(rel=rel, path=fpath))
    ordered = [runs[k] for k in sorted(runs)]
    return Discovery(local_dir=base, name=name, runs=ordered, outside=outside)
