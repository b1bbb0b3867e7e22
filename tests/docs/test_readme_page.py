"""README.md is the newcomer's page (issue 42): short, the two commands CI runs, the
marks the results table prints, and a way to every docs page. The internals live in docs/."""
from __future__ import annotations

import re

from launcher.report.console import MARK_WORDS
from tests.docs.doc_commands import REPO_ROOT, collect

README = REPO_ROOT / "README.md"
MAX_LINES = 150
SECTIONS = ("The two commands", "What the output means", "First run on your cluster", "Where to read more")


def readme() -> str:
    return README.read_text()


def test_the_readme_is_short():
    n = len(readme().splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines (at most {MAX_LINES}): move internals to docs/"


def test_the_readme_has_the_newcomers_sections():
    # recipes/cluster/{gb300,h100}.yaml send the reader to "First run on your cluster"
    headings = re.findall(r"^## (.+)$", readme(), re.M)
    assert list(SECTIONS) == [h for h in headings if h in SECTIONS], headings


def test_every_docs_page_is_linked_from_the_readme():
    linked = set(re.findall(r"\]\((docs/[\w-]+\.md)\)", readme()))
    pages = {f"docs/{p.name}" for p in (REPO_ROOT / "docs").glob("*.md")}
    assert pages - linked == set(), "add a line for each page under 'Where to read more'"
    assert linked <= pages, f"links to pages that do not exist: {sorted(linked - pages)}"


def test_ci_runs_the_readme_test_command():
    """The README's second command is the suite, and .ci/run is that command."""
    shown = [c.text for c in collect() if c.source == "README.md" and c.text.endswith("-m pytest")]
    assert len(shown) == 1, shown
    ci = [line.strip() for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith(("#", "set ", "cd "))]
    assert ci == shown, (ci, shown)


def test_every_mark_the_results_table_prints_is_explained():
    """The marks table of 'What the output means' names each mark of the console legend."""
    section = readme().split("## What the output means", 1)[1].split("\n## ", 1)[0]
    explained = set(re.findall(r"^\| `([^`]+)` \|", section, re.M))
    printed = {("n=N" if sym == "n" else sym) for sym in MARK_WORDS}
    assert printed - explained == set(), f"marks printed but not explained in the README: {printed - explained}"
