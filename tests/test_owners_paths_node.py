"""One owner for a job's paths and for the node job's engine; the node job built by
composition (issue 42, items 1 on the node, 3 and 6; docs/architecture.md "Owners").

* A job folder's layout (the ``logs`` folder) and the names of the job's own logs and scripts
  are written in launcher/contracts/job_paths.py only; everyone else asks ``JobPaths``.
* On the node the engine is resolved once, by the job's context: no other module of
  launcher/node/ looks an engine up by name (step_record.py runs as its own process, a
  multi-node rank's, and resolves the one engine its command line names).
* The node job's parts are held, not inherited, and no Protocol carries a method body.
* run.sh's configuration reads the environment through one reader.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from launcher.contracts import job_paths
from launcher.contracts.job import JobSpec
from launcher.contracts.job_paths import JobPaths
from launcher.engines import get_engine
from launcher.node import job_context as node_context
from launcher.node.job_context import JobContext
from launcher.results.status import read_error, write_error

ROOT = Path(__file__).resolve().parents[1]
PATHS_OWNER = "launcher/contracts/job_paths.py"


def _sources() -> list[Path]:
    return sorted(list((ROOT / "launcher").rglob("*.py")) + list((ROOT / "upload").rglob("*.py")))


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body and \
                isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant):
            out.add(id(n.body[0].value))
    return out


def _string_templates(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string of the code but docstrings, an f-string as its text with ``{}`` for each
    value it formats: (line, text)."""
    docs, inside_f = _docstrings(tree), set()
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            inside_f.update(id(v) for v in n.values)
            out.append((n.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in n.values)))
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs | inside_f:
            out.append((n.lineno, n.value))
    return out


# The job's own files as the code would spell them (``{}``: a value formatted in).
OWN_FILES = (*job_paths.OWN_NAMES, "server.node{}.log", "rank{}.json", "slurm-%j.{}")


def _names_a_job_path(text: str) -> bool:
    """The string is the logs folder, a path in it, or one of the job's own files (bare, or
    as the end of a path); a sentence that mentions a name in passing is not."""
    if text == job_paths.LOGS_DIR or re.search(rf"(^|[\s(]){job_paths.LOGS_DIR}/", text):
        return True
    return any(text == name or text.startswith(name) and "{}" in name or "/" + name in text for name in OWN_FILES)


def test_only_the_paths_owner_spells_the_jobs_paths():
    found = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        if rel == PATHS_OWNER:
            continue
        for line, text in _string_templates(ast.parse(path.read_text())):
            if _names_a_job_path(text):
                found.append(f"{rel}:{line}: {text[:80]!r}")
    assert not found, "a job's path spelled outside launcher/contracts/job_paths.py (use JobPaths):\n" + \
        "\n".join(found)


@pytest.mark.parametrize("text,names", [
    ("logs", True), ("logs/error.txt", True), ("{}/job.sbatch (plain `sbatch` runs it", True),
    (" (and {} more in logs/job.log)", True), ("server.node{}.log", True), ("rank{}.json", True),
    ("{}/slurm-%j.{}", True), ("job.log", True),
    ("written to job.json, the logs and the process list", False), ("; logs in ", False),
    ("(job.json; on Slurm job.sbatch); submit nothing", False), ("rank", False), ("server.log_name", False),
])
def test_the_path_check_tells_a_path_from_a_sentence(text, names):
    """The check above can fail: it finds the spellings the code had before JobPaths."""
    assert _names_a_job_path(text) is names


def test_job_paths_keep_every_file_name():
    """JobPaths moves no file: each path is where the job folder had it."""
    p = JobPaths("/j")
    assert (p.spec, p.server_ready(), p.server_ready("lossless"), p.gpu_telemetry, p.standalone_script) == (
        Path("/j/job.json"), Path("/j/server_ready.json"), Path("/j/lossless/reference_server_ready.json"),
        Path("/j/gpu_telemetry.json"), Path("/j/job.sbatch"))
    assert (p.logs, p.job_log, p.server_log, p.node_server_log(2), p.server_log_named("decode0")) == (
        Path("/j/logs"), Path("/j/logs/job.log"), Path("/j/logs/server.log"), Path("/j/logs/server.node2.log"),
        Path("/j/logs/decode0.log"))
    assert (p.rank_record(1), p.run_sh_spec, p.machine_samples, p.in_logs("error.txt")) == (
        Path("/j/logs/rank1.json"), Path("/j/logs/run_sh.job.json"), Path("/j/logs/machine_samples.jsonl"),
        Path("/j/logs/error.txt"))
    assert p.slurm_output("err") == "/j/logs/slurm-%j.err"
    assert p.shown(p.server_log_named("router")) == "logs/router.log" and p.shown("/elsewhere/x.log") == "/elsewhere/x.log"


def test_the_failure_line_lies_in_the_jobs_logs(tmp_path):
    assert write_error(tmp_path, "the server  failed\nbadly") == "the server failed badly"
    assert (tmp_path / "logs" / "error.txt").read_text() == "the server failed badly\n"
    assert read_error(tmp_path) == "the server failed badly"


# -- the engine, resolved once on the node

ENGINE_RESOLVERS = {
    "launcher/node/job_context.py",  # the job's context: JobContext.engine
    "launcher/node/step_record.py",  # a multi-node rank's own process (python -m ... --engine NAME)
    "launcher/node/run_sh.py",  # run.sh's own process: it serves vLLM (RUN_SH_ENGINE)
}


def _engine_lookups(tree: ast.AST) -> list[int]:
    """Lines that look an engine up by name: get_engine(...), ENGINES[...] or ENGINES.get(...)."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name == "get_engine" or name == "get" and isinstance(f, ast.Attribute) and \
                    isinstance(f.value, ast.Name) and f.value.id == "ENGINES":
                out.append(n.lineno)
        elif isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == "ENGINES":
            out.append(n.lineno)
    return out


def test_the_node_looks_the_engine_up_only_in_its_context():
    found = []
    for path in sorted((ROOT / "launcher" / "node").glob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        found += [f"{rel}:{line}" for line in _engine_lookups(ast.parse(path.read_text()))
                  if rel not in ENGINE_RESOLVERS]
    assert not found, "an engine looked up by name on the node (use the job context's engine):\n" + "\n".join(found)
    context = ast.parse((ROOT / "launcher/node/job_context.py").read_text())
    assert len(_engine_lookups(context)) == 1, "the context looks its engine up in one place"


def make_spec(job_dir: str, engine: str = "vllm") -> JobSpec:
    return JobSpec(recipe="r", server_id="s", job_dir=job_dir, model="/m", served_name="t",
                   server_command="vllm serve", server_flags=[], engine=engine)


def test_the_context_resolves_its_engine_once(monkeypatch):
    calls = []
    monkeypatch.setattr(node_context, "get_engine", lambda name: calls.append(name) or get_engine(name))
    ctx = JobContext(make_spec("/tmp/j"))
    first = ctx.engine
    ctx.spec = ctx.spec  # the engine check and the parity server replace the spec
    assert ctx.engine is first and ctx.engine is first and calls == ["vllm"]
    with pytest.raises(ValueError, match="engine is vllm"):
        ctx.spec = make_spec("/tmp/j", engine="sglang")


# -- the node job by composition

NODE_JOB_PARTS = {
    "launcher/node/job_context.py": "JobContext",
    "launcher/node/servers.py": "ServerGroup",
    "launcher/node/client.py": "ClientRun",
    "launcher/node/phases.py": "Phases",
    "launcher/node/serve_and_bench.py": "NodeJob",
}


def _class(rel: str, name: str) -> ast.ClassDef:
    tree = ast.parse((ROOT / rel).read_text())
    return next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)


def test_the_node_jobs_parts_inherit_nothing():
    based = [f"{rel}: {name}({', '.join(ast.unparse(b) for b in _class(rel, name).bases)})"
             for rel, name in NODE_JOB_PARTS.items() if _class(rel, name).bases]
    assert not based, "the node job's parts are held by the job, not inherited:\n" + "\n".join(based)


def test_the_node_job_holds_its_parts():
    init = next(n for n in _class("launcher/node/serve_and_bench.py", "NodeJob").body
                if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    built = {ast.unparse(n.func) for n in ast.walk(init) if isinstance(n, ast.Call)}
    assert {"JobContext", "ServerGroup", "ClientRun", "Phases"} <= built


def test_no_protocol_carries_a_method_body():
    """A Protocol states what its users need; a body there is a copy of the real one."""
    found = []
    for path in _sources():
        for cls in ast.walk(ast.parse(path.read_text())):
            if not isinstance(cls, ast.ClassDef) or not any("Protocol" in ast.unparse(b) for b in cls.bases):
                continue
            for fn in cls.body:
                body = fn.body[1:] if isinstance(fn, ast.FunctionDef) and fn.body and \
                    isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) else \
                    getattr(fn, "body", [])
                if isinstance(fn, ast.FunctionDef) and not all(
                        isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) for s in body):
                    found.append(f"{path.relative_to(ROOT)}:{fn.lineno}: {cls.name}.{fn.name}")
    assert not found, "Protocol methods with a body:\n" + "\n".join(found)


def test_run_sh_reads_its_environment_through_one_reader():
    """NodeConfig.from_env asks the reader (EnvReader) for each variable: no lookup and no
    parse of its own; the reader is the one place that reads the mapping."""
    tree = ast.parse((ROOT / "launcher/node/run_sh.py").read_text())
    from_env = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "from_env")
    own = [ast.unparse(n)[:60] for n in ast.walk(from_env)
           if isinstance(n, ast.Try) or isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
           and n.func.attr == "get"]
    assert not own, f"from_env reads the environment itself: {own}"
    lookups = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "get"]
    assert len(lookups) == 1, f"the environment is read at lines {lookups}; one reader reads it"
