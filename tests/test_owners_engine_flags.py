"""One owner per rule (issue 42 items 1, 2 and 5), read from the code (AST over launcher/ and upload/):

- the engine is resolved (``get_engine``) only where a process resolves it: engine_check.known_engine
  on the login side (launcher/login/prepare.py hands it to validation and the plan), the node's
  context; the rest is handed it;
- the server's speculative and acceptance flags are built in one module
  (launcher/engines/speculation.py); the planner builds a job's once, the job spec carries them;
- the recipe's memory-flag conflict is written once (launcher/login/server_args.py);
- compare's thresholds are defined once (launcher/contracts/compare_thresholds.py);
- validation's checks return their problems: none takes ``add``/``errs``, none unpacks what it
  does not use.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Where an engine is resolved: one place per process.
RESOLVERS = {
    "launcher/engines/__init__.py": "defines get_engine",
    "launcher/login/config/engine_check.py": "the login process: known_engine tests the name, then resolves it; "
                                             "launcher/login/prepare.py hands it to validation and the plan",
    "launcher/node/job_context.py": "the node process: the job's context holds it",
    "launcher/node/step_record.py": "a multi-node rank's own process, before it execs the server",
    "launcher/node/run_sh.py": "run.sh's own process: it serves vLLM (RUN_SH_ENGINE), resolved once",
    "launcher/speedup/like_for_like.py": "the speedup process: a recorded job's engine, for its serving settings",
    "launcher/bench/cli.py": "the benchmark process: its one resolution, held by its context",
    "launcher/bench/known_answer.py": "the known-answer probe's own process (its main)",
}
# Call sites of other slices of issue 42, to go (the lead removes an entry when its module stops).
NOT_YET_HANDED: dict = {}
FLAG_BUILDER = "launcher/engines/speculation.py"
FLAG_METHODS = ("speculative_flags", "acceptance_flags")
NOT_YET_BUILT_THERE = {
    "launcher/node/engine_preflight.py": "the acceptance flags re-resolved after the version probe (helper B)",
}
VALIDATION = ROOT / "launcher" / "login" / "config"


def _modules():
    for path in sorted(list((ROOT / "launcher").rglob("*.py")) + list((ROOT / "upload").rglob("*.py"))):
        yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text())


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    """Calls of ``name`` (a function, or a method on anything)."""
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        (isinstance(n.func, ast.Name) and n.func.id == name) or
        (isinstance(n.func, ast.Attribute) and n.func.attr == name))]


def test_the_engine_is_resolved_only_where_a_process_resolves_it():
    where = {rel: len(_calls(tree, "get_engine")) for rel, tree in _modules() if _calls(tree, "get_engine")}
    stray = sorted(set(where) - set(RESOLVERS) - set(NOT_YET_HANDED))
    assert not stray, f"get_engine called outside the modules that resolve the engine: {stray}"
    login = {rel: n for rel, n in where.items() if rel.startswith("launcher/login/")}
    assert login == {"launcher/login/config/engine_check.py": 1}, login


def test_validation_tests_the_engine_name_before_resolving_it():
    tree = ast.parse((VALIDATION / "engine_check.py").read_text())
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "known_engine"]
    (call,) = _calls(fn, "get_engine")
    guard = [n for n in ast.walk(fn) if isinstance(n, ast.IfExp) and any(c is call for c in ast.walk(n.body))]
    assert guard and isinstance(guard[0].test, ast.Compare) and isinstance(guard[0].test.ops[0], ast.In)
    for rel, tree in _modules():  # no other way of finding an engine by name in validation
        if rel.startswith("launcher/login/config/"):
            gets = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr == "get" and isinstance(n.func.value, ast.Name) and n.func.value.id == "ENGINES"]
            assert not gets, f"{rel}: ENGINES.get finds an engine a second way (use engine_check.known_engine)"


def test_only_the_owner_builds_a_servers_speculative_and_acceptance_flags():
    found = []
    for rel, tree in _modules():
        for name in FLAG_METHODS:
            for call in _calls(tree, name):
                on_self = isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) \
                    and call.func.value.id == "self"
                if rel == FLAG_BUILDER or rel in NOT_YET_BUILT_THERE or (on_self and rel.startswith("launcher/engines/")):
                    continue
                found.append(f"{rel}:{call.lineno}: {ast.unparse(call)[:70]}")
    assert not found, f"server flags built outside {FLAG_BUILDER}:\n" + "\n".join(found)


def test_the_job_spec_carries_the_flags_and_the_plan_drops_no_copy():
    job = ast.parse((ROOT / "launcher/contracts/job.py").read_text())
    (spec,) = [n for n in job.body if isinstance(n, ast.ClassDef) and n.name == "JobSpec"]
    fields = {n.target.id for n in spec.body if isinstance(n, ast.AnnAssign)}
    assert {"speculative_flags", "acceptance_flags"} <= fields
    (argv,) = [n for n in spec.body if isinstance(n, ast.FunctionDef) and n.name == "server_argv"]
    assert not any(_calls(argv, m) for m in FLAG_METHODS), "JobSpec.server_argv rebuilds the flags it carries"
    plan = ast.parse((ROOT / "launcher/login/plan.py").read_text())
    for name in ("drop_flags", "pick_flags", "build_server_flags"):
        assert not _calls(plan, name), f"launcher/login/plan.py calls {name}: the flags are built once (server_args)"


def test_the_memory_flag_conflict_is_written_once():
    text = "is set together with server.gpu_memory_utilization"
    holders = [rel for rel, tree in _modules() if any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and text in n.value for n in ast.walk(tree))]
    assert holders == ["launcher/login/server_args.py"], holders


def test_compare_thresholds_are_defined_once():
    """No dict literal spells compare's threshold keys outside their owner; compare reads them there."""
    keys = {"single_run_tps", "run_floor"}
    holders = sorted({rel for rel, tree in _modules() for n in ast.walk(tree) if isinstance(n, ast.Dict) and keys & {
        k.value for k in n.keys if isinstance(k, ast.Constant)}})
    assert holders == [], holders
    for rel, tree in _modules():  # job.json's compare_thresholds read by key: only through the owner
        reads = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "compare_thresholds"
                 and isinstance(getattr(n, "ctx", None), ast.Load)]
        if rel.startswith("launcher/compare/"):
            src = (ROOT / rel).read_text()
            assert not reads or "CompareThresholds" in src, f"{rel} reads compare_thresholds by hand"


def test_compare_thresholds_and_their_defaults_have_one_class():
    """No class but CompareThresholds holds compare's threshold fields (compare/diff.py's own
    Thresholds is gone); its defaults are the recipe's and compare's, and --help says them."""
    import dataclasses
    import subprocess
    import sys

    from launcher.contracts.compare_thresholds import COMPARE_DEFAULTS, CompareThresholds
    from launcher.login.config.schema import GatesConfig

    classes = sorted(f"{rel}:{n.name}" for rel, tree in _modules() for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
                     and {"single_run_tps", "run_floor"} <= {a.target.id for a in n.body if isinstance(a, ast.AnnAssign)
                                                             and isinstance(a.target, ast.Name)})
    assert classes == ["launcher/contracts/compare_thresholds.py:CompareThresholds"], classes
    g = GatesConfig()
    assert (g.compare_al_threshold, g.compare_tps_threshold, g.compare_single_run_tps_threshold, g.noisy_rel_mad) == (
        COMPARE_DEFAULTS.al, COMPARE_DEFAULTS.tps, COMPARE_DEFAULTS.single_run_tps, COMPARE_DEFAULTS.noisy_rel_mad)
    shown = dataclasses.replace(COMPARE_DEFAULTS, al=0.0123, run_floor=0.0456)
    flags, recipe = CompareThresholds(al=0.5), CompareThresholds(tps=0.25, min_speedup={"mtbench": 1.1})
    th = CompareThresholds.first_set(flags, recipe, shown)
    assert (th.al, th.tps, th.run_floor, th.min_speedup) == (0.5, 0.25, 0.0456, {"mtbench": 1.1})
    helptext = " ".join(subprocess.run([sys.executable, "-m", "launcher.compare", "--help"], capture_output=True,
                                       text=True, cwd=ROOT, check=True).stdout.split())
    for key, flag in (("al", "compare_al_threshold"), ("tps", "compare_tps_threshold"),
                      ("single_run_tps", "compare_single_run_tps_threshold"), ("run_floor", "compare_run_floor")):
        assert f"bench.gates.{flag}, else {getattr(COMPARE_DEFAULTS, key):g}" in helptext, (key, helptext)


def test_validations_checks_return_their_problems():
    bad = []
    for path in sorted(VALIDATION.glob("*.py")):
        text = path.read_text()
        if "noqa: F841" in text:
            bad.append(f"{path.name}: an unpacking line kept for names it does not use")
        for fn in ast.walk(ast.parse(text)):
            if isinstance(fn, ast.FunctionDef):
                params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
                if params & {"add", "errs"}:
                    bad.append(f"{path.name}:{fn.lineno}: {fn.name} takes {sorted(params & {'add', 'errs'})}")
                if fn.name.endswith("_problems") and fn.returns is not None and "list" not in ast.unparse(fn.returns):
                    bad.append(f"{path.name}:{fn.lineno}: {fn.name} returns {ast.unparse(fn.returns)}")
    assert not bad, "\n".join(bad)


def test_validation_has_no_filesystem_probe_or_golden_table_of_its_own():
    """Paths are probed in launcher/runtime/inputs.py, golden references matched in launcher/golden/."""
    for path in sorted([VALIDATION / "validate.py", VALIDATION / "engine_check.py", *VALIDATION.glob("check_*.py")]):
        tree = ast.parse(path.read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
        assert not imported & {"tempfile", "os"}, f"{path.name} probes the filesystem itself"
        for n in ast.walk(tree):
            assert not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "lookup"
                        and isinstance(n.func.value, ast.Name) and n.func.value.id == "golden"), \
                f"{path.name}:{n.lineno}: matches a golden reference itself (launcher.golden.recipe_match)"


def test_the_engine_seam_is_composed_of_parts_each_caller_names():
    from launcher.engines import ENGINES, Engine
    from launcher.engines.parts import PARTS

    assert set(PARTS) <= set(Engine.__mro__)
    assert all(isinstance(e, part) for e in ENGINES.values() for part in PARTS)
    seam = {m for part in PARTS for m in [*vars(part), *vars(part).get("__annotations__", {})] if not m.startswith("_")}
    for part in PARTS:  # each part is a small piece of the seam: split, not renamed
        mine = {m for m in [*vars(part), *vars(part).get("__annotations__", {})] if not m.startswith("_")}
        assert len(mine) <= len(seam) // 3, (part.__name__, sorted(mine))
    apikey = ast.parse((ROOT / "launcher/runtime/apikey.py").read_text())
    annotations = {ast.unparse(a.annotation) for n in ast.walk(apikey) if isinstance(n, ast.FunctionDef)
                   for a in n.args.args if a.annotation is not None}
    assert "ApiKey" in annotations and "Engine" not in annotations


# Where DEFAULT_ENGINE may be read: the one default a user sees, never a caller's fallback.
DEFAULT_ENGINE_READERS = {
    "launcher/engines/__init__.py": "defines it",
    "launcher/login/config/schema.py": "server.engine's default: the recipe's, documented in recipes/engine/vllm.yaml",
    "launcher/node/run_sh.py": "run.sh serves vLLM (docs/sglang.md)",
    "launcher/bench/cli.py": "the benchmark's flag form without --engine (its --help says so)",
}
ENGINE_TYPES = {"Engine", "MetricNames", "KvTransferMetrics"}


def _annotated_with_an_engine(annotation) -> bool:
    return annotation is not None and bool(
        ENGINE_TYPES & {n.id if isinstance(n, ast.Name) else n.value for n in ast.walk(annotation)
                        if isinstance(n, ast.Name) or isinstance(n, ast.Constant) and isinstance(n.value, str)})


def _gives_a_default(value) -> bool:
    """A field's value that is a default: anything but field(...) without default or default_factory."""
    return not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "field"
                and not {k.arg for k in value.keywords} & {"default", "default_factory"})


def test_nothing_falls_back_to_a_default_engine():
    """An engine, or its counter names, is always handed: no parameter or field typed with one has a
    default (an SGLang caller that forgot it read vLLM's counters), no module keeps a
    default_engine(), and DEFAULT_ENGINE is read only where a user meets it as a documented default."""
    found = []
    for rel, tree in _modules():
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = n.args
                positional = a.posonlyargs + a.args
                defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
                for arg, default in list(zip(positional, defaults)) + list(zip(a.kwonlyargs, a.kw_defaults)):
                    if default is not None and _annotated_with_an_engine(arg.annotation):
                        found.append(f"{rel}:{n.lineno}: {n.name}({arg.arg}={ast.unparse(default)})")
            elif isinstance(n, ast.AnnAssign) and n.value is not None and _annotated_with_an_engine(n.annotation) \
                    and _gives_a_default(n.value) and ast.unparse(n.target) not in ("ENGINES", "kv_transfer_metrics"):
                # the registry, and an engine's own KV-transfer names (None: that engine has none)
                found.append(f"{rel}:{n.lineno}: {ast.unparse(n.target)} = {ast.unparse(n.value)}")
            elif isinstance(n, (ast.Name, ast.Attribute)) and (n.id if isinstance(n, ast.Name) else n.attr) \
                    == "default_engine":
                found.append(f"{rel}:{n.lineno}: default_engine")
            elif isinstance(n, ast.FunctionDef) and n.name == "default_engine":
                found.append(f"{rel}:{n.lineno}: def default_engine")
        readers = {n.lineno for n in ast.walk(tree) if isinstance(n, (ast.Name, ast.alias))
                   and getattr(n, "id", getattr(n, "name", None)) == "DEFAULT_ENGINE"}
        if readers and rel not in DEFAULT_ENGINE_READERS:
            found.append(f"{rel}:{min(readers)}: reads DEFAULT_ENGINE")
    assert not found, "a default engine stands in for one a caller should hand:\n" + "\n".join(found)
