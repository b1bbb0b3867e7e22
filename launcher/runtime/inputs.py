"""Inputs checked on the node before the server starts (minutes of a GPU node
are not spent on a run that cannot succeed).

Each check returns problems as one line each: the input, what is wrong, the
fix. What is checked:

- datasets: the file exists and parses into at least ``--num_requests``
  requests (launcher.runtime.datasets, the benchmark's own readers);
- model and draft: a local path exists (a folder with config.json), or the
  name is a Hugging Face id (``org/name``), found in the local cache when
  HF_HUB_OFFLINE=1;
- tokenizer: a local folder holds tokenizer files;
- output folder: a file can be created in it;
- AIPerf: the executable is found and ``aiperf --version`` runs.

The login side runs the same checks first, on the paths it can see (``visible_input_problems``).

Standard library only; launcher.runtime.datasets is stdlib too (pyarrow is
imported for SPEED-Bench parquet only, and a missing pyarrow is not an error
here: the benchmark reports it).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path
from typing import Mapping, Optional, Sequence

from launcher.runtime.datasets import DatasetError, get_dataset

HF_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt")



def hf_cache_has(repo_id: str, env: Mapping[str, str]) -> bool:
    hub = env.get("HF_HUB_CACHE") or os.path.join(
        env.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface"), "hub")
    return Path(hub, "models--" + repo_id.replace("/", "--")).is_dir()


def check_model(name: str, what: str, fix_field: str, env: Mapping[str, str]) -> Optional[str]:
    """A model or draft: local folder with config.json, or an HF id."""
    p = Path(os.path.expanduser(name))
    if p.exists():
        if p.is_dir() and not (p / "config.json").is_file():
            return f"{what} {name}: folder has no config.json (fix: point {fix_field} at a model folder)"
        return None
    if HF_ID.match(name) and not name.startswith(("/", ".", "~")):
        if env.get("HF_HUB_OFFLINE", "") in ("1", "true", "True", "YES", "yes") and not hf_cache_has(name, env):
            return (f"{what} {name}: not in the Hugging Face cache and HF_HUB_OFFLINE=1 "
                    f"(fix: download it first, or set {fix_field} to a local folder)")
        return None
    return f"{what} {name}: no such file or folder (fix: set {fix_field} to an existing path or an HF id org/name)"


def check_tokenizer(name: str, fix_field: str = "model.tokenizer") -> Optional[str]:
    p = Path(os.path.expanduser(name))
    if not p.exists():
        if HF_ID.match(name):
            return None
        return f"tokenizer {name}: no such folder (fix: set {fix_field} to a folder with tokenizer files or an HF id)"
    if p.is_dir() and not any((p / f).is_file() for f in TOKENIZER_FILES):
        return (f"tokenizer {name}: no tokenizer files ({', '.join(TOKENIZER_FILES[:3])}) in the folder "
                f"(fix: set {fix_field} to the model folder that has them)")
    if p.is_dir() and (p / "tokenizer_config.json").is_file():
        try:
            json.loads((p / "tokenizer_config.json").read_text())
        except (OSError, ValueError) as e:
            return f"tokenizer {name}: tokenizer_config.json does not parse ({e}) (fix: repair or re-download it)"
    return None


def check_dataset(name: str, path: str, num_requests: Optional[int], field: str) -> Optional[str]:
    if not Path(path).is_file():
        return f"{field}: {path}: no such file (fix: point {field} at the dataset file)"
    try:
        with warnings.catch_warnings():  # the benchmark reports a category disagreement itself
            warnings.simplefilter("ignore")
            questions = get_dataset(name).reader(Path(path), num_requests)
    except ImportError as e:  # pyarrow missing on this Python: the benchmark's side reads it
        return None if path.endswith(".parquet") else f"{field}: {path}: cannot be read ({e})"
    except (DatasetError, OSError, UnicodeDecodeError) as e:
        msg = " ".join(str(e).split())
        return f"{field}: {msg}" + ("" if "fix" in msg else f" (fix: correct the file or point {field} at another)")
    if not questions:
        return f"{field}: {path}: no questions (fix: point {field} at a non-empty dataset)"
    if num_requests is not None and len(questions) < num_requests:
        return (f"{field}: {path} has {len(questions)} question(s), fewer than num_requests={num_requests} "
                f"(fix: lower sweep.num_requests, or null for the whole file)")
    return None


def check_writable(folder: str, field: str = "output_dir") -> Optional[str]:
    p = Path(folder)
    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=p, prefix=".specdec-write-check-"):
            pass
    except OSError as e:
        return f"{field}: {folder} cannot be written ({e.strerror or e}) (fix: choose a folder you can write)"
    return None


def check_aiperf(aiperf: str, env: Optional[Mapping[str, str]] = None, timeout_s: float = 120) -> Optional[str]:
    argv = aiperf.split()
    if not argv or shutil.which(argv[0], path=(env or os.environ).get("PATH")) is None:
        return (f"bench.aiperf: {aiperf!r} not found on this node (fix: install AIPerf where the job runs, "
                f"or set bench.aiperf to its full path)")
    try:
        r = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=timeout_s,
                           env=dict(env) if env is not None else None)
    except (OSError, subprocess.SubprocessError) as e:
        return f"bench.aiperf: {aiperf!r} does not run ({e}) (fix: reinstall AIPerf or set bench.aiperf)"
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]
        return (f"bench.aiperf: `{aiperf} --version` exited with {r.returncode}: {tail[0][:200]} "
                f"(fix: reinstall AIPerf or set bench.aiperf)")
    return None


# ---------------------------------------------------------------- the job's inputs


def check_job_inputs(*, model: str, draft: Optional[str], tokenizer: Optional[str], env: Mapping[str, str],
                     bench=None) -> list[str]:
    """Every problem with the job's inputs, one line each (empty: all good). ``bench`` is
    the job spec's bench section (launcher.contracts.job.BenchSpec) when our benchmark runs."""
    errs: list[str] = []
    add = errs.append
    e = check_model(model, "model", "model.path", env)
    if e:
        add(e)
    if draft:
        e = check_model(draft, "draft", "draft.model", env)
        if e:
            add(e)
    if tokenizer:
        e = check_tokenizer(tokenizer)
        if e:
            add(e)
    if bench is None:
        return errs
    for ds in bench.datasets:
        e = check_dataset(ds.name, ds.path, bench.num_requests, f"sweep.dataset_paths.{ds.name}")
        if e:
            add(e)
    if bench.tokenizer and bench.tokenizer != tokenizer:
        e = check_tokenizer(bench.tokenizer)
        if e:
            add(e)
    if bench.save_dir:
        e = check_writable(bench.save_dir)
        if e:
            add(e)
    e = check_aiperf(bench.aiperf or "aiperf", env)
    if e:
        add(e)
    return errs


# ---------------------------------------------------------------- what the login node can see


def visible_here(path: str, executor: str) -> bool:
    """Whether this (login) machine can judge ``path``: always for the local
    executor; on Slurm only for a relative path or one whose top-level folder
    exists here (a shared filesystem such as /lustre), never for an HF id."""
    if executor == "local":
        return True
    p = Path(os.path.expanduser(path))
    if not p.is_absolute():
        return True
    parts = p.parts
    return len(parts) > 1 and Path(parts[0], parts[1]).exists()


def is_hf_id(name: str) -> bool:
    """An HF id (org/name) that is not also a path here."""
    return bool(HF_ID.match(name)) and not Path(os.path.expanduser(name)).exists()


def _strip(line: str, prefix: str) -> str:
    return line[len(prefix):] if line.startswith(prefix) else line


def visible_input_problems(executor: str, *, model: Optional[str], draft: Optional[str], tokenizer: Optional[str],
                           datasets: Sequence[tuple[str, str]], num_requests: Optional[int]) -> list[tuple[str, str]]:
    """(field, problem) for the model, draft, tokenizer and dataset files this machine can see
    (HF ids are left to the node): the checks the node runs, one each. ``draft``: the draft
    checkpoint (None: the method has none); ``datasets``: (name, path) of the known datasets."""
    out: list[tuple[str, str]] = []

    def seen(path: Optional[str]) -> bool:
        return bool(path) and not is_hf_id(path) and visible_here(path, executor)

    def problem(field: str, line: Optional[str]) -> None:
        if line:
            out.append((field, _strip(line, f"{field}: ")))

    if seen(model):
        problem("model.path", check_model(model, "model", "model.path", {}))
    if seen(draft):
        problem("draft.model", check_model(draft, "draft", "draft.model", {}))
    if seen(tokenizer):
        problem("model.tokenizer", check_tokenizer(tokenizer))
    for name, path in datasets:
        if path and visible_here(path, executor):
            field = f"sweep.dataset_paths.{name}"
            problem(field, check_dataset(name, path, num_requests, field))
    return out


def writable_here(path: Path) -> bool:
    """Try it: create (and remove) a file in the folder, or in its nearest existing
    parent. os.access alone says yes to root even where nothing can be created."""
    p = path.resolve()
    while not p.exists():
        if p.parent == p:
            return False
        p = p.parent
    if not p.is_dir():
        return False
    try:
        with tempfile.NamedTemporaryFile(dir=p, prefix=".specdec-write-check-"):
            return True
    except OSError:
        return False
