"""docs/speedup.md "Why a speedup is what it is": its H100 table and figures are what the product's
analysis gives on the recorded folders (tests/speedup/recorded.py): a number that drifts fails here."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from launcher.results.job_dir import load_results
from launcher.speedup.analysis import analyse
from tests.speedup.recorded import (ASYNC_PAIR, DFLASH, DFLASH_BASE, DFLASH_JOB, DRAFT_JOB, model_prediction,
                                    output_tokens, repeat_parts, results_copy)

DOC = Path(__file__).resolve().parents[2] / "docs" / "speedup.md"
SECTION = DOC.read_text().split("## Why a speedup is what it is", 1)[1].split("\n## ", 1)[0]
JOBS = {"DFlash k=15, forced AL 4": DFLASH_JOB, "1B draft_model k=3, forced AL 3.5": DRAFT_JOB}


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    out = {}
    for src in (DFLASH, ASYNC_PAIR):
        res = analyse(load_results(results_copy(src, tmp_path_factory.mktemp("doc") / src.name)))
        out.update({(r["job"], r["concurrency"]): r for r in res["points"]})
        out[src.name] = res
    return out


def table_rows() -> list[list[str]]:
    lines = [ln for ln in SECTION.splitlines() if ln.startswith("| ") and any(k in ln for k in JOBS)]
    assert len(lines) == 5, lines
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]


def test_the_table_is_the_analysis(analysed):
    for server, c, speedup, al, cost, causes in table_rows():
        r = analysed[(JOBS[server], int(c))]
        d = r["decomposition"]
        assert speedup == f"{d['speedup']:.2f}x" and al == f"{d['al']:.2f}"
        assert cost == f"{d['step_cost']:.2f} [{d['lo']:.2f}, {d['hi']:.2f}]"
        assert causes == " ".join(x["word"] for x in r["causes"])


def test_the_at_al_example_is_the_files(analysed):
    """The --at-al example: DFlash's one forced level at C=1, the request time model computed from
    its repeats.json (tests/speedup/recorded.py), and the step cost beside it."""
    cost = next(c for c in analysed[DFLASH.name]["step_costs"] if c["concurrency"] == 1)
    text = " ".join(SECTION.split())
    step_cost = f"{cost['step_cost']:.2f} [{cost['lo']:.2f}, {cost['hi']:.2f}]"
    assert f"C=1 (forced 4 only, 3 repeats; step cost {step_cost})" in text
    m = re.search(r"AL 2\.7 gives (\S+)x \[(\S+), (\S+)\] and AL 4\.25 gives (\S+)x \[(\S+), (\S+)\]", text)
    assert m, "the --at-al example is missing"
    reps, n = repeat_parts(DFLASH, DFLASH_JOB, DFLASH_BASE, 1), output_tokens(DFLASH, DFLASH_JOB, 1)
    for al, got in ((2.7, m.groups()[:3]), (4.25, m.groups()[3:])):
        assert got == tuple(f"{x:.2f}" for x in model_prediction(reps, n, al, len(reps)))


def test_the_sentences_ranges_are_the_files(analysed):
    r1, r16 = analysed[(DFLASH_JOB, 1)], analysed[(DFLASH_JOB, 16)]
    assert "0.64–0.78 cores" in SECTION and "0.64–0.78 cores" in r1["causes"][0]["sentence"]
    capped = next(c["sentence"] for c in r16["causes"] if c["word"] == "clock-capped")
    assert "1,635–1,732 MHz" in capped and "1,635–1,732 MHz" in SECTION
    assert "83%–100%" in capped and "83–100 %" in SECTION
