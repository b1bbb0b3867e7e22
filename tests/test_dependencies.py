"""Dependencies point one way (docs/architecture.md). The parts of launcher/, lowest first:

    stats                every interval and noise rule (pure, standard library)
    golden, engines      the golden-reference rule; the engine seam
    runtime              what a job needs on a host (files, API key, processes, datasets, telemetry)
    contracts            the files passed between processes (job.json, server_ready.json)
    results              result files: typed models, writer, reader, validity
    bench                the benchmark (AIPerf driver) -> results
    node                 the node job -> bench
    login                compose, validate, plan, render, submit, follow
    speedup, compare, report, upload   tools that read results
    history              runs over time: reads what upload wrote, judges with compare

Every import in launcher/ and upload/ is checked, including imports inside functions,
and no two files may import each other in a loop. No exceptions are listed: a new
edge is either allowed here by design or moved.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LOW = {"stats", "engines", "golden"}
RUNTIME = LOW | {"runtime"}
CONTRACTS = RUNTIME | {"contracts"}
RESULTS = CONTRACTS | {"results"}
ALLOWED: dict[str, set[str]] = {
    "stats": set(),
    "engines": {"stats"},  # the forced-acceptance verdict's noise (launcher/stats/acceptance_noise.py)
    "golden": {"stats"},
    "runtime": LOW,
    "contracts": RUNTIME,
    "results": CONTRACTS,
    "bench": RESULTS,
    "node": RESULTS | {"bench"},
    "login": RESULTS,
    "__main__": {"login"},
    "speedup": RESULTS,
    "compare": RESULTS | {"speedup"},
    "report": RESULTS | {"speedup"},
    "upload": RESULTS,
    "history": RESULTS | {"compare", "speedup", "upload"},  # reads what upload wrote, judges with compare
}


# The one edge from the login side to the node's: submitit is handed the node's entry function
# (launcher/node/job_entry.py: run_job; the dry run renders its node_command). It is this module
# only, and it imports no other node module (test_the_login_side_imports_only_the_nodes_entry).
NODE_ENTRY = "launcher.node.job_entry"


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
            if theirs is None or theirs == mine or (mine == "login" and mod == NODE_ENTRY):
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


def test_server_ready_json_is_named_in_one_module():
    """server_ready.json is written and read through launcher/contracts/server_ready.py only."""
    assert _modules_naming("server_ready.json", "reference_server_ready.json",
                           "known_answer_server_ready.json") == ["launcher/contracts/server_ready.py"]


def test_job_json_is_named_in_one_module():
    """job.json is written (JobSpec.write) and read (JobSpec.read on the node, read_recorded_job
    by the tools that read results) through launcher/contracts/job.py only."""
    assert _modules_naming("job.json") == ["launcher/contracts/job.py"]


def test_summary_is_changed_through_one_function():
    """Only launcher/results/summary.py reads summary.json to write it back (change_summary):
    no other module calls both read_summary and write_summary."""
    both = []
    for path in sorted(list((ROOT / "launcher").rglob("*.py")) + list((ROOT / "upload").rglob("*.py"))):
        names = {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(ast.parse(path.read_text()))
                 if isinstance(n, (ast.Name, ast.Attribute))}
        if {"read_summary", "write_summary"} <= names or {"load_summary", "write_summary"} <= names:
            both.append(str(path.relative_to(ROOT)))
    assert both == ["launcher/results/summary.py"], both


def test_status_files_are_opened_in_one_module():
    """progress.json and logs/error.txt are read and written through launcher/results/status.py."""
    assert _modules_naming("progress.json", "error.txt") == ["launcher/results/status.py"]


def test_one_atomic_writer():
    """os.replace (the rename of an atomic write) appears in launcher/runtime/files.py only."""
    users = []
    for path in sorted(list((ROOT / "launcher").rglob("*.py")) + list((ROOT / "upload").rglob("*.py"))):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("replace", "rename") and \
                    isinstance(node.value, ast.Name) and node.value.id == "os":
                users.append(str(path.relative_to(ROOT)))
    assert users == ["launcher/runtime/files.py"], users


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


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """module -> the modules of this tree it imports (``from pkg import sub`` counts sub)."""
    paths = list((ROOT / "launcher").rglob("*.py")) + list((ROOT / "upload").rglob("*.py"))
    mods = {_module_of(p): p for p in paths}
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        out = set()
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for n in names:
                if n in mods and n != mod:
                    out.add(n)
        graph[mod] = out
    return graph


def test_no_import_cycle_between_files():
    """Tarjan's strongly connected components of the file import graph (imports inside
    functions and under TYPE_CHECKING counted; a package's __init__ is its own file)."""
    graph, index, low, stack, on, cycles = _import_graph(), {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, "files that import each other in a loop:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_launcher_top_level_holds_packages_only():
    loose = sorted(p.name for p in (ROOT / "launcher").glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert loose == [], f"modules at the top of launcher/ (put each in its part's package): {loose}"


MAX_CLASS_LINES, MAX_FUNCTION_LINES = 250, 80


def test_sizes_fit_in_a_head():
    """No class over 250 lines and no function over 80 in launcher/ and upload/."""
    big = []
    for path in sorted(list((ROOT / "launcher").rglob("*.py")) + list((ROOT / "upload").rglob("*.py"))):
        for node in ast.walk(ast.parse(path.read_text())):
            size = getattr(node, "end_lineno", 0) - getattr(node, "lineno", 0) + 1
            if isinstance(node, ast.ClassDef) and size > MAX_CLASS_LINES or \
                    isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and size > MAX_FUNCTION_LINES:
                big.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name} {size} lines")
    assert not big, "too long to hold in a head:\n" + "\n".join(big)


LAZY_REASON = "# lazy:"


def test_every_import_inside_a_function_says_why():
    """An import inside a function breaks a real cost (an optional or heavy dependency, a
    Python that lacks it) and says so on its line: ``import x  # lazy: REASON``."""
    bare = []
    for path in sorted(list((ROOT / "launcher").rglob("*.py")) + list((ROOT / "upload").rglob("*.py"))):
        lines = path.read_text().splitlines()
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and \
                        not any(LAZY_REASON in lines[i - 1] and lines[i - 1].split(LAZY_REASON, 1)[1].strip()
                                for i in range(node.lineno, node.end_lineno + 1)):
                    bare.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not bare, ("imports inside functions without a reason (move them to the top, or add "
                      "'# lazy: REASON' naming the cost they avoid):\n" + "\n".join(sorted(set(bare))))


IDENTITY_OWNER = "launcher/contracts/run_identity.py"  # the type, its builder, its labels
IDENTITY_READER = "launcher/results/identity.py"       # the one reader of results' identity (issue 52)
RESULT_TOOLS = ("launcher/report", "launcher/compare", "launcher/history", "launcher/speedup", "upload")


def _sources():
    for path in sorted(list((ROOT / "launcher").rglob("*.py")) + list((ROOT / "upload").rglob("*.py"))):
        yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text())


def _called(tree: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Call) and ((isinstance(n.func, ast.Name) and n.func.id == name)
                                            or (isinstance(n.func, ast.Attribute) and n.func.attr == name))
               for n in ast.walk(tree))


def _imports_from(tree: ast.AST, module: str) -> set[str]:
    return {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == module for a in n.names}


def test_one_module_builds_the_run_identity_and_one_reads_it_back():
    """RunIdentity is constructed in its own module only; its builder is called by the job spec (the
    planner's one fill, JobSpec.with_run_identity) and by the reader's fallback for earlier results;
    the recorded key is read back by the job spec (job.json) and launcher/results/identity.py only."""
    constructs = [rel for rel, tree in _sources() if _called(tree, "RunIdentity")]
    assert constructs == [IDENTITY_OWNER], constructs
    builders = [rel for rel, tree in _sources() if _imports_from(tree, "launcher.contracts.run_identity") & {"build"}]
    assert builders == ["launcher/contracts/job.py", IDENTITY_READER], builders
    readers = [rel for rel, tree in _sources() if rel != IDENTITY_OWNER and _called(tree, "from_dict")
               and "RunIdentity" in _imports_from(tree, "launcher.contracts.run_identity")]
    assert readers == ["launcher/contracts/job.py", IDENTITY_READER], readers
    planners = [rel for rel, tree in _sources() if _called(tree, "with_run_identity")]
    assert planners == ["launcher/login/plan.py"], planners


def test_the_tools_that_read_results_read_identity_through_the_one_reader():
    """Speedup, break-even, best k, SLO, compare, history, the report and the console take model,
    draft, method, k, the forced level and the server configuration from launcher.results.identity:
    none reads the speculative config, k or the forced acceptance of a job or point itself, or the
    recorded identity's key."""
    fields = {"speculative_config", "num_speculative_tokens", "forced_acceptance", "run_identity"}
    found = []
    for rel, tree in _sources():
        if not rel.startswith(RESULT_TOOLS):
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and n.attr in fields:
                found.append(f"{rel}:{n.lineno}: .{n.attr}")
            elif isinstance(n, ast.Constant) and n.value == "run_identity":
                found.append(f"{rel}:{n.lineno}: 'run_identity'")
    assert not found, "identity read outside launcher/results/identity.py:\n" + "\n".join(found)
    assert not any(rel == "launcher/speedup/analysis.py" and isinstance(n, ast.FunctionDef) and n.name.startswith("job_")
                   for rel, tree in _sources() for n in ast.walk(tree)), "analysis.py's own job_* identity readers"


def test_the_datasets_are_listed_in_one_module():
    """launcher/runtime/datasets.py lists the datasets (mtbench, specbench and SPEED-Bench's splits)
    and spells a split's dataset name (speed_<split>); validation, the benchmark and the readers ask
    it (known_dataset, speed_dataset, speed_split) instead of keeping a list of their own."""
    from launcher.runtime.datasets import SPEED_PREFIX, SPEED_SPLITS

    holders = []
    for path in sorted(list((ROOT / "launcher").rglob("*.py")) + list((ROOT / "upload").rglob("*.py"))):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    (node.value in SPEED_SPLITS or node.value.startswith(SPEED_PREFIX)):
                holders.append(str(path.relative_to(ROOT)))
                break
    assert holders == ["launcher/runtime/datasets.py"], holders


def test_the_login_side_imports_only_the_nodes_entry():
    """launcher/node/job_entry.py runs on the node (submitit's function) and reads results; the
    login side imports it to hand it to submitit, and nothing else of the node. The entry imports
    no other node module and the node package imports nothing, so the login process gets none of
    the node's machinery through it."""
    entry = ROOT / (NODE_ENTRY.replace(".", "/") + ".py")
    assert not [m for _, m in imports(entry) if area(m) in ("node", "login")], imports(entry)
    assert not imports(ROOT / "launcher" / "node" / "__init__.py")
    login_to_node = sorted({m for p in (ROOT / "launcher" / "login").rglob("*.py") for _, m in imports(p)
                            if area(m) == "node"})
    assert login_to_node == [NODE_ENTRY], login_to_node
