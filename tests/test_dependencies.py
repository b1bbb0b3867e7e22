"""Dependencies point one way (docs: README "Layout"):

    login side (config, plan, render, submit) -> spec <- node -> bench -> results
                                                   results <- report / compare / speedup / upload
                                 history -> compare, upload (its S3 settings)

plus a base every part may use (launcher.common, engines, errors, telemetry,
forced_acceptance, golden), which imports nothing above it. Every import in
launcher/ and upload/ is checked, including imports inside functions. No
exceptions are listed: a new edge is either allowed here by design or moved.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BASE = {"common", "engines", "errors", "telemetry", "forced_acceptance", "golden"}
LOGIN = {"config", "plan", "server_args", "sbatch", "submit", "job", "cli", "__main__"}
ALLOWED: dict[str, set[str]] = {
    **{b: BASE for b in BASE},
    "spec": BASE,
    "results": BASE,
    "bench": BASE | {"spec", "results"},
    "node": BASE | {"spec", "results", "bench"},
    **{name: BASE | LOGIN | {"spec", "results"} for name in LOGIN},
    "speedup": BASE | {"results"},
    "compare": BASE | {"results", "speedup"},
    "report": BASE | {"results", "speedup"},
    "upload": BASE | {"results"},
    "history": BASE | {"results", "compare", "speedup", "upload"},  # reads what upload wrote, judges with compare
}


def area(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "upload":
        return "upload"
    if parts[0] != "launcher" or len(parts) == 1 or parts[1] == "__init__":
        return None
    return parts[1]


def imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "launcher":  # from launcher import x
                out += [(node.lineno, f"launcher.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, node.module))
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            raise AssertionError(f"{path}:{node.lineno}: relative import; write the absolute module")
    return out


def test_every_area_is_known():
    areas = {area(".".join(p.relative_to(ROOT).with_suffix("").parts))
             for p in list((ROOT / "launcher").rglob("*.py")) + list((ROOT / "upload").rglob("*.py"))}
    unknown = sorted(a for a in areas - set(ALLOWED) if a is not None)
    assert not unknown, f"new top-level part(s) {unknown}: give them a layer in tests/test_dependencies.py"


def test_dependencies_point_one_way():
    bad = []
    for path in sorted(list((ROOT / "launcher").rglob("*.py")) + list((ROOT / "upload").rglob("*.py"))):
        mine = area(".".join(path.relative_to(ROOT).with_suffix("").parts))
        for line, mod in imports(path):
            theirs = area(mod)
            if theirs is None or theirs == mine:
                continue
            if theirs not in ALLOWED.get(mine, set()):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {mine} imports {mod} ({theirs})")
    assert not bad, "imports against the one-way layering:\n" + "\n".join(bad)


def _modules_naming(*names: str) -> list[str]:
    """The modules with a string constant equal to, or a path ending in, one of ``names``."""
    holders = []
    for path in sorted(list((ROOT / "launcher").rglob("*.py")) + list((ROOT / "upload").rglob("*.py"))):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    any(node.value == n or node.value.endswith("/" + n) for n in names):
                holders.append(str(path.relative_to(ROOT)))
                break
    return holders


def test_summary_json_is_opened_in_one_module():
    """Only launcher/results/summary.py names summary.json; every other module reads it through there."""
    assert _modules_naming("summary.json") == ["launcher/results/summary.py"]


def test_status_files_are_opened_in_one_module():
    """progress.json and logs/error.txt are read and written through launcher/results/status.py."""
    assert _modules_naming("progress.json", "error.txt") == ["launcher/results/status.py"]


def test_one_atomic_writer():
    """os.replace (the rename of an atomic write) appears in launcher/common/files.py only."""
    users = []
    for path in sorted(list((ROOT / "launcher").rglob("*.py")) + list((ROOT / "upload").rglob("*.py"))):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("replace", "rename") and \
                    isinstance(node.value, ast.Name) and node.value.id == "os":
                users.append(str(path.relative_to(ROOT)))
    assert users == ["launcher/common/files.py"], users


ARGV_READER = ("launcher/engines/flags.py",)  # the one reader of hand-written argv lists
# Comparisons and searches that read an argv by hand: a flag-looking string literal
# compared with, searched in or split off a list element.
_FLAG_LITERAL = ("--", "-h")


def _reads_argv(node: ast.AST) -> bool:
    def flaglike(n):
        return isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith(_FLAG_LITERAL)

    if isinstance(node, ast.Compare):  # a == "--x", "--x" in argv, argv[:1] == ["--x"]
        parts = [node.left, *node.comparators]
        return any(flaglike(p) or (isinstance(p, (ast.List, ast.Tuple)) and any(flaglike(e) for e in p.elts))
                   for p in parts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("startswith", "index", "partition") and node.args:
        a = node.args[0]
        return flaglike(a) or (isinstance(a, ast.Tuple) and any(flaglike(e) for e in a.elts))
    return False


def _redacts_only(path: Path, node: ast.AST, tree: ast.AST) -> bool:
    """The redactor of what the benchmark records (launcher.bench.result_files.mask_argv)
    masks secret values in an argv; it reads no setting from it."""
    if path.relative_to(ROOT).as_posix() != "launcher/bench/result_files.py":
        return False
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and fn.name == "mask_argv":
            return any(n is node for n in ast.walk(fn))
    return False


def test_no_hand_written_argv_reader_outside_engines_flags():
    found = []
    for path in sorted(list((ROOT / "launcher").rglob("*.py")) + list((ROOT / "upload").rglob("*.py"))):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ARGV_READER:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if _reads_argv(node) and not _redacts_only(path, node, tree):
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert not found, "argv read by hand (use argparse, a typed spec field, or launcher.engines.flags):\n" + \
        "\n".join(found)
