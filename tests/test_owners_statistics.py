"""One owner per statistical rule and per name (issue 60), read from the code (AST over launcher/ and upload/):

- every interval and noise rule lives in launcher/stats/ (the t table, the repeats' summary and the
  noisy threshold, the paired difference, the acceptance sampling noise); no other module assigns
  their constants or defines their functions, and no other module is named stats.py;
- the SLO tie is defined once (launcher/speedup/slo.py); compare's thresholds read the noisy one;
- a response file's name is written once (launcher/results/layout.py);
- a job folder's readable name (model, method, parallel layout) is built once (launcher/login/plan.py).
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

OWNED_NAMES = {  # module-level constant -> the one file that assigns it
    "T975": "launcher/stats/repeats.py",
    "NOISY_REL_MAD": "launcher/stats/repeats.py",
    "Z": "launcher/stats/acceptance_noise.py",
    "TIE_REL": "launcher/speedup/slo.py",
    "RESPONSES_FILES": "launcher/results/layout.py",
}
OWNED_FUNCTIONS = {  # function -> the one file that defines it
    "t_critical": "launcher/stats/repeats.py",
    "summarize": "launcher/stats/repeats.py",
    "difference": "launcher/stats/repeats.py",
    "paired_interval": "launcher/stats/paired.py",
    "noise_tolerance": "launcher/stats/acceptance_noise.py",
    "standard_error": "launcher/stats/acceptance_noise.py",
    "_server_folder": "launcher/login/plan.py",
}


def _sources():
    for p in sorted(list((ROOT / "launcher").rglob("*.py")) + list((ROOT / "upload").rglob("*.py"))):
        yield str(p.relative_to(ROOT)), ast.parse(p.read_text(), str(p))


def test_each_statistical_constant_and_function_has_one_owner():
    where: dict[str, set[str]] = {}
    for rel, tree in _sources():
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, ast.AnnAssign) else [])
            for t in targets:
                if isinstance(t, ast.Name) and t.id in OWNED_NAMES:
                    where.setdefault(t.id, set()).add(rel)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name in OWNED_FUNCTIONS:
                where.setdefault(node.name, set()).add(rel)
    for name, owner in {**OWNED_NAMES, **OWNED_FUNCTIONS}.items():
        assert where.get(name) == {owner}, f"{name}: defined in {sorted(where.get(name, ()))}, its one owner is {owner}"


def test_statistics_have_one_home():
    others = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "launcher").rglob("stats.py"))
    assert not others, f"{others}: statistics live in launcher/stats/"
    for rel, tree in _sources():
        if rel.startswith("launcher/stats/"):
            mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
            assert all(not m.startswith("launcher.") or m.startswith("launcher.stats") for m in mods), \
                f"{rel}: launcher/stats/ is the ground floor and imports nothing else of the launcher"


def test_a_response_file_name_is_written_once():
    hits = sorted(rel for rel, tree in _sources() for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith("_responses.jsonl"))
    assert hits == ["launcher/results/layout.py"] * len(hits) and hits, hits


def test_a_job_folder_name_is_built_once():
    """The parallel layout's part of a folder name ("-tp<N>") appears in one f-string."""
    hits = [rel for rel, tree in _sources() for n in ast.walk(tree)
            if isinstance(n, ast.JoinedStr) and any(isinstance(v, ast.Constant) and "-tp" in str(v.value)
                                                     for v in n.values)]
    assert hits == ["launcher/login/plan.py"], hits


# Module names more than one package may use: each package's command line and printing, its
# errors, and the disagg parity's command (queued jobs name launcher.bench.disagg_parity) beside
# the verdict it writes (launcher.results.disagg_parity)
SHARED_MODULE_NAMES = {"cli.py", "console.py", "errors.py", "disagg_parity.py", "__init__.py", "__main__.py"}


def test_a_module_name_says_which_module_it_is():
    """One file name, one module: a newcomer who meets `point.py` or `outcome.py` in a traceback
    finds one file, not two (bench/point_files.py against results/point.py, node/point_status.py
    against bench/point_outcome.py, ...)."""
    seen: dict[str, list[str]] = {}
    for rel, _ in _sources():
        seen.setdefault(Path(rel).name, []).append(rel)
    twice = {name: paths for name, paths in seen.items() if len(paths) > 1 and name not in SHARED_MODULE_NAMES}
    assert not twice, f"module names used in more than one package (rename one so each says what it holds): {twice}"
