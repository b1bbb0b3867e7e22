"""Validation of the files a recipe names, where this (login) machine can see them: the checks
the node runs again before its server starts (launcher.runtime.inputs), and the output folder."""
from __future__ import annotations

from pathlib import Path

from launcher.login.config.schema import LauncherConfig, METHODS_WITHOUT_DRAFT_CKPT
from launcher.login.errors import ConfigError
from launcher.runtime.datasets import known_dataset
from launcher.runtime.inputs import visible_input_problems, writable_here


def input_path_problems(cfg: LauncherConfig) -> list[ConfigError]:
    """Model, draft, tokenizer and dataset files, where this machine can see them: the same
    checks the node runs (launcher.runtime.inputs), one line each."""
    d, sw = cfg.draft, cfg.sweep
    found = visible_input_problems(
        cfg.cluster.executor, model=cfg.model.path, tokenizer=cfg.model.tokenizer,
        draft=d.model if d.method not in METHODS_WITHOUT_DRAFT_CKPT else None,
        datasets=[(ds, sw.dataset_paths.get(ds)) for ds in sw.datasets if known_dataset(ds)],
        num_requests=sw.num_requests)
    return [ConfigError(field, problem) for field, problem in found]


def output_problems(cfg: LauncherConfig) -> list[ConfigError]:
    """Output."""
    if writable_here(Path(cfg.output_dir)):
        return []
    return [ConfigError("output_dir", f"'{cfg.output_dir}' cannot be written",
                        "choose a folder you can write, e.g. output_dir=./results")]
