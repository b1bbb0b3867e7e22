"""The doc-command collector, and the documentation against each entry point's
--help (no processes beyond `--help`)."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.docs.doc_commands import (REPO_ROOT, bench_flags, collect, entry_point, flags, help_argv,
                                     is_launcher_module, is_user_entry_point, parse_markdown)


def runnable(ep) -> bool:
    """Entry points the e2e test can run as written (tests/docs/test_doc_commands_run.py)."""
    return ep in ("launcher", "override", "upload") or (is_launcher_module(ep) and ep != "bench")


def test_blocks_inline_spans_markers_and_continuations():
    md = """Intro `python -m launcher recipe=smoke --cfg` and `draft.method=ngram`, not `results/x`.

```bash
# a comment line
python -m launcher.report results/smoke   # trailing words
upload_to_s3 results/smoke \\
    s3://b/p --dry-run
```

<!-- doc-test: skip: needs a GPU -->
```bash
python tests/benchmarks/gpu_telemetry_check.py
```

```text
python -m launcher not-a-shell-block
```
See <!-- doc-test: skip: placeholder paths --> `HF_MODEL_CKPT=/m bash common/specdec_aiperf/run.sh -- --x`.
"""
    cmds = parse_markdown(md, "X.md")
    got = [(c.line, c.text, c.skip_reason, c.entry_point) for c in cmds]
    assert got == [
        (1, "python -m launcher recipe=smoke --cfg", None, "launcher"),
        (1, "draft.method=ngram", None, "override"),
        (5, "python -m launcher.report results/smoke", None, "report"),
        (6, "upload_to_s3 results/smoke s3://b/p --dry-run", None, "upload"),
        (12, "python tests/benchmarks/gpu_telemetry_check.py", "needs a GPU", "script"),
        (18, "HF_MODEL_CKPT=/m bash common/specdec_aiperf/run.sh -- --x", "placeholder paths", "run_sh"),
    ]


def test_synopses_are_collected_but_not_commands():
    md = """Use `python -m launcher.compare A B [--al-threshold F]
[--allow-missing]` or so.

```
upload_to_s3 LOCAL_DIR s3://BUCKET/PREFIX [--dry-run]
             [--endpoint-url URL] [--jobs N]
python -m upload ...            # same command
```
"""
    got = [(c.line, c.kind, c.entry_point, sorted(flags(c.text))) for c in parse_markdown(md, "X.md")]
    assert got == [(1, "synopsis", "compare", ["--al-threshold", "--allow-missing"]),
                   (5, "synopsis", "upload", ["--dry-run", "--endpoint-url", "--jobs"]),
                   (7, "synopsis", "upload", [])]


def test_indented_blocks_and_placeholders():
    md = """Run:

    python -m launcher sweep.baseline=true 'sweep.num_speculative_tokens=[1,3]'
    ls results/

Then `python -m launcher.speedup results/<recipe> --job <its folder>` by hand.
"""
    got = [(c.line, c.kind, c.entry_point, c.text) for c in parse_markdown(md, "X.md")]
    assert got == [
        (3, "shell", "launcher", "python -m launcher sweep.baseline=true 'sweep.num_speculative_tokens=[1,3]'"),
        (6, "synopsis", "speedup", "python -m launcher.speedup results/<recipe> --job <its folder>"),
    ]


def test_a_marker_covers_only_the_next_block():
    md = "<!-- doc-test: skip: slow -->\n\ntext between\n```bash\npython -m launcher\n```\n"
    (cmd,) = parse_markdown(md, "X.md")
    assert cmd.skip_reason is None  # prose between the marker and the block ends it


@pytest.mark.parametrize("text,ep", [
    (".venv/bin/python -m launcher", "launcher"),
    ("bash common/setup/install.sh && .venv/bin/python -m launcher", "launcher"),
    ("python -m launcher.compare a b", "compare"),
    ("python -m upload x s3://b/p", "upload"),
    ("python -m launcher.speedup results/x", "speedup"),  # a module the list does not know yet
    ("python3 -m launcher.bench --url u", "bench"),
    ("ls -l", None),
])
def test_entry_point_classification(text, ep):
    assert entry_point(text) == ep


def test_every_documented_command_runs_or_is_marked_with_a_reason():
    cmds = collect()
    assert len(cmds) >= 10, [c.where for c in cmds]
    unrunnable = [c.where + ": " + c.text for c in cmds
                  if c.skip_reason is None and c.kind != "synopsis" and not runnable(c.entry_point)]
    assert not unrunnable, "mark these with <!-- doc-test: skip: REASON --> or make them runnable:\n" + \
        "\n".join(unrunnable)
    assert all(c.skip_reason.strip() for c in cmds if c.skip_reason is not None)


def help_options(module_argv: list[str]) -> list[set[str]]:
    """The long options `--help` lists, one set per option (a flag with its aliases,
    e.g. {--endpoint-url, --endpoint}); --help and --version left out."""
    out = subprocess.run([sys.executable, *module_argv, "--help"], capture_output=True, text=True, timeout=60,
                         cwd=REPO_ROOT)
    assert out.returncode == 0, out.stderr
    options = []
    for line in out.stdout.splitlines():
        m = re.match(r"^\s+(-[^\s].*?)(?:\s{2,}|$)", line)  # an option line: "  -j N, --jobs N   help"
        if m:
            names = set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", m.group(1))) - {"--help", "--version"}
            if names:
                options.append(names)
    assert options or module_argv[-1] == "launcher", out.stdout
    return options


def help_flags(module_argv: list[str]) -> set[str]:
    return set().union(*help_options(module_argv))


# every entry point the docs show, and those that must be documented anyway
DOC_ENTRY_POINTS = sorted({"launcher", "report", "compare", "upload", "bench"}
                          | {c.entry_point for c in collect() if is_launcher_module(c.entry_point)})
USER_ENTRY_POINTS = [ep for ep in DOC_ENTRY_POINTS if is_user_entry_point(ep)]


def documented_flags(ep: str) -> set[str]:
    """Flags the docs use with an entry point: in its commands and synopses, and for
    the benchmark also after `--` in run.sh commands."""
    out: set[str] = set()
    for c in collect():
        if c.entry_point == ep:
            out |= flags(c.text)
        elif ep == "bench" and c.entry_point == "run_sh":
            out |= bench_flags(c.text)
    return out


def test_help_options_are_parsed_with_aliases():
    opts = help_options(help_argv("upload"))
    assert {"--endpoint-url", "--endpoint"} in opts and {"--dry-run"} in opts


@pytest.mark.parametrize("ep", DOC_ENTRY_POINTS)
def test_flags_shown_in_the_docs_exist_in_help(ep):
    unknown = documented_flags(ep) - help_flags(help_argv(ep))
    assert not unknown, f"the docs use {sorted(unknown)} but `{ep} --help` does not list them"


@pytest.mark.parametrize("ep", USER_ENTRY_POINTS)
def test_every_help_flag_is_in_the_docs(ep):
    """Each option of a user-facing entry point appears (under one of its names) in a
    documented command or synopsis of that entry point."""
    documented = documented_flags(ep)
    missing = [sorted(o) for o in help_options(help_argv(ep)) if not o & documented]
    assert not missing, f"`{ep} --help` lists {missing}; no command or synopsis in the docs shows them"


def test_documented_top_level_keys_exist_in_the_schema():
    """docs/recipes.md's "Top-level keys:" paragraph (the README links it) names keys of the schema."""
    from omegaconf import OmegaConf

    from launcher.login.config.compose import GROUPS
    from launcher.login.config.schema import LauncherConfig

    text = (REPO_ROOT / "docs" / "recipes.md").read_text()
    m = re.search(r"Top-level keys:(.*?)\n\n", text, re.S)
    assert m, "docs/recipes.md has no 'Top-level keys:' paragraph"
    schema = OmegaConf.structured(LauncherConfig)
    keys = [k for k in re.findall(r"`([a-z_.*]+)`", m.group(1))]
    assert len(keys) >= 10
    for key in keys:
        path = key.rstrip(".*").rstrip(".")
        if path in GROUPS:  # a Hydra config group (recipe=, cluster=, ...)
            continue
        assert OmegaConf.select(schema, path, default="<absent>") != "<absent>" or path in schema, key
