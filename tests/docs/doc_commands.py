"""Collect the shell commands that README.md, upload/README.md and docs/*.md
show, so that tests can run each one as written.

What counts as a command:
- every line (with `\\` continuations joined) of a fenced block labelled
  bash/sh/shell/console, comment lines dropped;
- an inline code span that starts with a known entry point (python -m launcher,
  upload_to_s3, run.sh, ...);
- an inline code span that is a recipe override (`key.sub=value`), which is
  composed on its own;
- a synopsis (a usage line with `[--flag ...]` placeholders: an inline span, or a
  line of an unlabelled fenced block starting with an entry point, its indented
  `[...]` lines joined): never run, but its flags are compared with `--help`.

Marker for a command that cannot run in the test environment: an HTML comment
`<!-- doc-test: skip: REASON -->` (invisible when the Markdown is rendered) on
the line just before a fenced block (it covers the whole block) or just before an
inline span on the same line. The reason is required; the tests count and print
the marked commands.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

REPO_ROOT = Path(__file__).resolve().parents[2]
SHELL_LANGS = {"bash", "sh", "shell", "console"}
MARKER = re.compile(r"<!--\s*doc-test:\s*skip:\s*(?P<reason>[^>]*?)\s*-->")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\s*$")
INLINE = re.compile(r"(?P<marker><!--\s*doc-test:[^>]*-->\s*)?`(?P<code>[^`]+)`")
OVERRIDE = re.compile(r"^\+{0,2}[a-z_]+(?:\.[\w]+)+=\S+$")

# How a command line's entry point is recognised (after an optional VAR=value
# prefix). `python -m launcher` is "launcher"; `python -m launcher.X` is "X" (report,
# compare, bench, and any module added later, so a new one is caught too).
LAUNCHER_MODULE = re.compile(r"^\S*python3?\s+-m\s+launcher(?:\.(?P<sub>\w+))?(?:\s|$)")
OTHER_ENTRY_POINTS = {
    "upload": re.compile(r"^(?:upload_to_s3|\S*python3?\s+-m\s+upload)(?:\s|$)"),
    "run_sh": re.compile(r"^(?:bash\s+)?\S*common/specdec_aiperf/run\.sh(?:\s|$)"),
    "script": re.compile(r"^(?:\S*python3?|bash)\s+\S+\.(?:py|sh)(?:\s|$)"),
}
# run inside a job by run.sh, not typed by a user (its flags are still checked)
INTERNAL_MODULES = {"bench"}
NOT_A_MODULE = {"launcher", "override", None, *OTHER_ENTRY_POINTS}


def is_launcher_module(ep: Optional[str]) -> bool:
    """`python -m launcher.<ep>` (report, compare, bench, ...)."""
    return ep not in NOT_A_MODULE


def is_user_entry_point(ep: Optional[str]) -> bool:
    """An entry point a user types: its --help and the docs must list the same flags."""
    return ep in ("launcher", "upload") or (is_launcher_module(ep) and ep not in INTERNAL_MODULES)


def help_argv(ep: str) -> list[str]:
    """Interpreter arguments that print the entry point's --help (without --help)."""
    return {"launcher": ["-m", "launcher"], "upload": ["-m", "upload"]}.get(ep, ["-m", f"launcher.{ep}"])


@dataclass(frozen=True)
class DocCommand:
    source: str  # path relative to the repository
    line: int  # 1-based line of the command's first line
    text: str  # the command as written (continuations joined, trailing comment dropped)
    skip_reason: Optional[str] = None
    kind: str = "shell"  # "shell" (a command line), "override" (an inline key=value) or "synopsis"

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"

    @property
    def entry_point(self) -> Optional[str]:
        return "override" if self.kind == "override" else entry_point(self.text)


def strip_env_prefix(text: str) -> str:
    """`A=1 B=2 cmd ...` -> `cmd ...` (the command's own environment assignments)."""
    words = text.split()
    i = 0
    while i < len(words) and re.match(r"^[A-Z_][A-Z0-9_]*=", words[i]):
        i += 1
    return " ".join(words[i:])


def entry_point(text: str) -> Optional[str]:
    """Which entry point a command line runs (the last of `a && b` counts)."""
    last = strip_env_prefix(text.split("&&")[-1].strip())
    m = LAUNCHER_MODULE.match(last)
    if m:
        return m.group("sub") or "launcher"
    for name, pattern in OTHER_ENTRY_POINTS.items():
        if pattern.match(last):
            return name
    return None


def _drop_trailing_comment(line: str) -> str:
    """`cmd --x 1   # comment` -> `cmd --x 1` (a # inside quotes is kept)."""
    out, quote = [], None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            break
        out.append(ch)
    return "".join(out).rstrip()


def parse_markdown(text: str, source: str) -> list[DocCommand]:
    cmds: list[DocCommand] = []
    lines = text.splitlines()
    i = 0
    pending_skip: Optional[str] = None
    while i < len(lines):
        line = lines[i]
        m = FENCE.match(line.strip())
        if m:
            lang = m.group("lang").lower()
            j = i + 1
            body: list[tuple[int, str]] = []
            while j < len(lines) and not lines[j].strip().startswith("```"):
                body.append((j + 1, lines[j]))
                j += 1
            if lang in SHELL_LANGS:
                cmds += _block_commands(body, source, pending_skip)
            elif not lang:
                cmds += _block_synopses(body, source)
            pending_skip = None
            i = j + 1
            continue
        if _indented(line) and (i == 0 or not lines[i - 1].strip()):
            # an indented code block (4 spaces after a blank line): its lines that
            # run an entry point are commands
            j = i
            body = []
            while j < len(lines) and (_indented(lines[j]) or not lines[j].strip()):
                body.append((j + 1, lines[j]))
                j += 1
            cmds += [c for c in _block_commands(body, source, pending_skip) if c.entry_point not in (None, "script")]
            pending_skip = None
            i = j
            continue
        mk = MARKER.search(line)
        stripped = MARKER.sub("", line).strip()
        if mk and not stripped:
            pending_skip = mk.group("reason") or "no reason given"
        elif stripped:
            pending_skip = None
        # An inline code span may wrap onto the next lines of its paragraph: join
        # them until the backticks balance.
        j = i
        while line.count("`") % 2 and j + 1 < len(lines) and lines[j + 1].strip() \
                and not FENCE.match(lines[j + 1].strip()):
            j += 1
            line = f"{line} {lines[j].strip()}"
        cmds += _inline_commands(line, i + 1, source)
        i = j + 1
    return cmds


def _indented(line: str) -> bool:
    return line.startswith(("    ", "\t")) and bool(line.strip())


def _block_commands(body: list[tuple[int, str]], source: str, skip: Optional[str]) -> list[DocCommand]:
    out = []
    cur: list[str] = []
    start = 0
    for lineno, raw in body:
        s = raw.strip()
        if not cur and (not s or s.startswith("#")):
            continue
        if not cur:
            start = lineno
        if s.startswith("$ "):
            s = s[2:]
        if s.endswith("\\"):
            cur.append(s[:-1].strip())
            continue
        cur.append(s)
        text = _drop_trailing_comment(" ".join(cur)).strip()
        cur = []
        if text:
            out.append(DocCommand(source, start, text, skip, kind="synopsis" if is_synopsis(text) else "shell"))
    return out


def is_synopsis(text: str) -> bool:
    """A usage line, not a command to run: it has `[--flag X]` options, `<name>`
    placeholders or a bare `...` word."""
    return bool(re.search(r"\[-|<[^<>\s!][^<>]*>|(?:^|\s)\.\.\.(?:\s|$)", text))


def _block_synopses(body: list[tuple[int, str]], source: str) -> list[DocCommand]:
    out: list[DocCommand] = []
    for lineno, raw in body:
        s = raw.strip()
        if out and raw[:1].isspace() and s.startswith("["):
            last = out.pop()
            out.append(DocCommand(last.source, last.line, f"{last.text} {s}", None, "synopsis"))
        elif is_user_entry_point(entry_point(s)) and is_synopsis(s):
            out.append(DocCommand(source, lineno, _drop_trailing_comment(s), None, "synopsis"))
    return out


def _inline_commands(line: str, lineno: int, source: str) -> list[DocCommand]:
    out = []
    for m in INLINE.finditer(line):
        code = m.group("code").strip()
        mk = MARKER.search(m.group("marker") or "")
        skip = (mk.group("reason") or "no reason given") if mk else None
        if " " in code and entry_point(code) not in (None, "script"):
            out.append(DocCommand(source, lineno, code, skip, kind="synopsis" if is_synopsis(code) else "shell"))
        elif OVERRIDE.match(code) and "..." not in code and "<" not in code:
            out.append(DocCommand(source, lineno, code, skip, kind="override"))
    return out


def doc_files(root: Path = REPO_ROOT) -> list[Path]:
    return [root / "README.md", root / "upload" / "README.md", *sorted((root / "docs").glob("*.md"))]


def collect(root: Path = REPO_ROOT) -> list[DocCommand]:
    cmds = []
    for p in doc_files(root):
        if p.exists():
            cmds += parse_markdown(p.read_text(), str(p.relative_to(root)))
    return cmds


def flags(text: str) -> set[str]:
    """The --long flags a command line uses (values and `--` alone excluded)."""
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    return {w.strip("[]").split("=", 1)[0] for w in words if w.lstrip("[").startswith("--") and len(w.strip("[]")) > 2}


def bench_flags(text: str) -> set[str]:
    """The benchmark's flags in a run.sh command: those after `--`."""
    words = text.split()
    return flags(" ".join(words[words.index("--") + 1:])) if "--" in words else set()
