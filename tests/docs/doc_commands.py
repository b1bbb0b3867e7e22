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

# entry point -> how a command starting with it is recognised (after an optional
# `python`/`.venv/bin/python`, and VAR=value prefixes)
ENTRY_POINTS = {
    "launcher": re.compile(r"^(?:\S*python3?)\s+-m\s+launcher(?:\s|$)"),
    "report": re.compile(r"^(?:\S*python3?)\s+-m\s+launcher\.report(?:\s|$)"),
    "compare": re.compile(r"^(?:\S*python3?)\s+-m\s+launcher\.compare(?:\s|$)"),
    "bench": re.compile(r"^(?:\S*python3?)\s+-m\s+launcher\.bench(?:\s|$)"),
    "speedup": re.compile(r"^(?:\S*python3?)\s+-m\s+launcher\.speedup(?:\s|$)"),
    "upload": re.compile(r"^(?:upload_to_s3|\S*python3?\s+-m\s+upload)(?:\s|$)"),
    "run_sh": re.compile(r"^(?:bash\s+)?\S*common/specdec_aiperf/run\.sh(?:\s|$)"),
    "script": re.compile(r"^(?:\S*python3?|bash)\s+\S+\.(?:py|sh)(?:\s|$)"),
}


# the entry points a user types (their --help and the docs must list the same flags)
USER_ENTRY_POINTS = ("launcher", "report", "compare", "upload")


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
    """Which entry point a command line runs (the first of `a && b` counts)."""
    first = strip_env_prefix(text.split("&&")[-1].strip())
    for name in ("report", "compare", "bench", "speedup", "launcher", "upload", "run_sh", "script"):
        if ENTRY_POINTS[name].match(first):
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
            out.append(DocCommand(source, start, text, skip))
    return out


def is_synopsis(text: str) -> bool:
    """A usage line (`cmd A B [--flag X]`), not a command to run."""
    return bool(re.search(r"\[-", text))


def _block_synopses(body: list[tuple[int, str]], source: str) -> list[DocCommand]:
    out: list[DocCommand] = []
    for lineno, raw in body:
        s = raw.strip()
        if out and raw[:1].isspace() and s.startswith("["):
            last = out.pop()
            out.append(DocCommand(last.source, last.line, f"{last.text} {s}", None, "synopsis"))
        elif entry_point(s) in USER_ENTRY_POINTS and is_synopsis(s):
            out.append(DocCommand(source, lineno, _drop_trailing_comment(s), None, "synopsis"))
    return out


def _inline_commands(line: str, lineno: int, source: str) -> list[DocCommand]:
    out = []
    for m in INLINE.finditer(line):
        code = m.group("code").strip()
        mk = MARKER.search(m.group("marker") or "")
        skip = (mk.group("reason") or "no reason given") if mk else None
        if " " in code and entry_point(code) in ("launcher", "report", "compare", "bench", "upload", "run_sh"):
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
