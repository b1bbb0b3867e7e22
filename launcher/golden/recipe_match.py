"""Whether a recipe is the one a golden reference was made with (``bench.golden=<id>``): its
target, method, draft, k and dataset. Validation asks before anything runs; each problem is
(what is wrong, the fix). Standard library only, pure but for reading the table."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from launcher.golden import known_ids, lookup


def unknown_reference(gid: str) -> Optional[tuple[str, str]]:
    """(problem, fix) when no reference has this id, else None."""
    if lookup(gid) is not None:
        return None
    return f"unknown reference '{gid}'", f"use one of: {', '.join(known_ids())}"


def _name(ref: str) -> str:
    """The comparable part of an HF id or a local path: its last component, lowercased."""
    return Path(str(ref).rstrip("/")).name.lower()


def recipe_mismatches(gid: str, *, model: str, method: str, draft: Optional[str], ks: Sequence[int],
                      datasets: Sequence[str]) -> list[tuple[str, str]]:
    """(problem, fix) for each way the run differs from the known reference ``gid``: its target
    (``model``), ``method``, ``draft``, the ``ks`` it runs and the ``datasets`` of its sweep."""
    entry = lookup(gid)
    out = []
    if _name(model) != _name(entry["model"]):
        out.append((f"reference '{gid}' is for target {entry['model']}, model.path is {model}",
                    f"use model.path={entry['model']} (or a copy of it) or another reference"))
    if method != entry["method"]:
        out.append((f"reference '{gid}' is for method {entry['method']}, draft.method is {method}",
                    f"set draft.method={entry['method']}"))
    elif entry.get("draft") and _name(draft or "") != _name(entry["draft"]):
        out.append((f"reference '{gid}' is for draft {entry['draft']}, draft.model is {draft}",
                    f"set draft.model={entry['draft']}"))
    if entry["k"] not in ks:
        out.append((f"reference '{gid}' is for k={entry['k']}, the run uses k={list(ks)}",
                    f"set draft.num_speculative_tokens={entry['k']}"))
    if entry["dataset"] not in datasets:
        out.append((f"reference '{gid}' is on {entry['dataset']}, not in sweep.datasets",
                    f"add {entry['dataset']} (sweep=vllm_ci_mtbench reproduces it)"))
    return out
