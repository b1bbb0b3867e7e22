"""Inputs checked on the node before the server starts (minutes of a GPU node
are not spent on a run that cannot succeed).

Each check returns problems as one line each: the input, what is wrong, the
fix. What is checked:

- datasets: the file exists and parses into at least ``--num_requests``
  requests (launcher.common.datasets, the benchmark's own readers);
- model and draft: a local path exists (a folder with config.json), or the
  name is a Hugging Face id (``org/name``), found in the local cache when
  HF_HUB_OFFLINE=1;
- tokenizer: a local folder holds tokenizer files;
- output folder: a file can be created in it;
- AIPerf: the executable is found and ``aiperf --version`` runs.

Standard library only; launcher.common.datasets is stdlib too (pyarrow is
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
    from launcher.common.datasets import DatasetError, get_dataset

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


# ---------------------------------------------------------------- from the job's arguments


def _values(args: Sequence[str], flag: str) -> list[str]:
    out, args = [], list(args)
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            out.append(args[i + 1])
        elif a.startswith(flag + "="):
            out.append(a.split("=", 1)[1])
    return out


def _last(args: Sequence[str], flag: str) -> Optional[str]:
    v = _values(args, flag)
    return v[-1] if v else None


def draft_model(server_args: Sequence[str]) -> Optional[str]:
    raw = _last(server_args, "--speculative-config") or _last(server_args, "--speculative_config")
    if not raw:
        return None
    try:
        return (json.loads(raw) or {}).get("model")
    except (ValueError, AttributeError):
        return None


def check_job_inputs(model: str, server_args: Sequence[str], bench_args: Sequence[str], *,
                     env: Mapping[str, str], bench_is_launcher: bool = True) -> list[str]:
    """Every problem with the job's inputs, one line each (empty: all good)."""
    errs: list[str] = []
    add = errs.append
    e = check_model(model, "model", "model.path", env)
    if e:
        add(e)
    d = draft_model(server_args)
    if d:
        e = check_model(d, "draft", "draft.model", env)
        if e:
            add(e)
    tok = _last(server_args, "--tokenizer")
    if tok:
        e = check_tokenizer(tok)
        if e:
            add(e)
    if not bench_is_launcher:
        return errs
    n_s = _last(bench_args, "--num_requests")
    try:
        n = int(n_s) if n_s else None
    except ValueError:
        n = None
    for name in ("mtbench", "specbench"):
        for path in _values(bench_args, f"--{name}"):
            e = check_dataset(name, path, n, f"sweep.dataset_paths.{name}")
            if e:
                add(e)
    for path in _values(bench_args, "--speed"):
        ds = f"speed_{Path(path).stem}"
        e = check_dataset(ds, path, n, f"sweep.dataset_paths.{ds}")
        if e:
            add(e)
    btok = _last(bench_args, "--tokenizer")
    if btok and btok != tok:
        e = check_tokenizer(btok)
        if e:
            add(e)
    save = _last(bench_args, "--save_dir")
    if save:
        e = check_writable(save)
        if e:
            add(e)
    e = check_aiperf(_last(bench_args, "--aiperf") or "aiperf", env)
    if e:
        add(e)
    return errs
