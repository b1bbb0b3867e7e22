"""docs/fleet.md "On one H100": its tables and sentences are the recorded folders' figures, worked out
again here from the per-point files (tests/speedup/fleet_by_hand.py), not read from the product's
output: a figure that drifts from the files fails here."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.speedup import fleet_by_hand as hand

DOC = (Path(__file__).resolve().parents[2] / "docs" / "fleet.md").read_text()
H100 = DOC.split("## On one H100", 1)[1].split("\n## ", 1)[0]
INTRO = DOC.split("## What is compared", 1)[0]

SERVERS = {  # the table's names -> (folder, job)
    "DFlash k=15, forced AL 4": ("h100_vllm026_dflash_2starts", 0),
    "Qwen3 EAGLE3 k=3, forced AL 3.5": ("h100_vllm026_qwen3_eagle3_2starts", 1),
    "Qwen3 EAGLE3 k=3, forced AL 2": ("h100_vllm026_qwen3_eagle3_2starts", 0),
    "Llama EAGLE3 k=3, forced AL 3.5": ("h100_vllm026_llama_eagle3_1start", 1),
    "Llama EAGLE3 k=3, forced AL 2": ("h100_vllm026_llama_eagle3_1start", 0),
}
COLUMNS = [  # the J-per-point table's columns after C -> (folder, job index or None for the baseline)
    ("h100_vllm026_dflash_2starts", None), ("h100_vllm026_dflash_2starts", 0),
    ("h100_vllm026_qwen3_eagle3_2starts", None), ("h100_vllm026_qwen3_eagle3_2starts", 1),
    ("h100_vllm026_qwen3_eagle3_2starts", 0), ("h100_vllm026_llama_eagle3_1start", None),
    ("h100_vllm026_llama_eagle3_1start", 1), ("h100_vllm026_llama_eagle3_1start", 0),
]


def _pts(folder: str, job) -> dict:
    jobs, base = hand.FOLDERS[folder]
    return hand.points(hand.DATA / folder / (base if job is None else jobs[job]))


def _at(folder: str, job: int) -> dict:
    return hand.at_baseline_points(_pts(folder, job), _pts(folder, None))


def _usd(v: float) -> str:
    return f"{v:.2f}" if v >= 1 else f"{v:.3f}"


def _iv(t: tuple, f=lambda v: f"{v:.2f}") -> str:
    return f"{f(t[0])} [{f(t[1])}, {f(t[2])}]"


def _rows(marker: str) -> list[list[str]]:
    return [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in H100.splitlines()
            if ln.startswith("| ") and marker(ln)]


def test_the_gain_table_is_the_recorded_files():
    rows = _rows(lambda ln: any(ln.startswith(f"| {s} |") for s in SERVERS))
    assert len(rows) == 12
    for server, speed, tps, gain, joules, usd in rows:
        folder, job = SERVERS[server]
        c = int(re.search(r"\(C=(\d+)\)", speed).group(1))
        w = _at(folder, job)[c]
        low = "≥ " if w["at_least"] else ""
        assert speed == f"{w['x']:.1f} (C={c})"
        assert tps == f"{low}{w['y_spec']:,.0f} vs {w['y_base']:,.0f}"
        assert gain == f"{low}{w['gain'][0]:.2f}x [{w['gain'][1]:.2f}, {w['gain'][2]:.2f}]"
        assert joules == f"{w['j_spec'][0]:.3f} vs {w['j_base'][0]:.3f}"
        assert usd == f"{_usd(w['usd_spec'][0])} vs {_usd(w['usd_base'][0])}"


def test_the_joules_per_point_table_is_the_recorded_files():
    rows = _rows(lambda ln: re.match(r"\| (1|4|16|64) \|", ln) is not None)
    assert [r[0] for r in rows] == ["1", "4", "16", "64"]
    per = [hand.per_point(_pts(f, j)) for f, j in COLUMNS]
    for c, *cells in rows:
        assert cells == [_iv(p[int(c)]["j"], lambda v: f"{v:.3f}") for p in per], c


def test_the_dflash_sentences_are_the_recorded_files():
    w = _at("h100_vllm026_dflash_2starts", 0)
    c64, c1 = w[64], w[1]
    head = f"{c64['gain'][0]:.2f}x [{c64['gain'][1]:.2f}, {c64['gain'][2]:.2f}]"
    assert head in INTRO and head in H100
    assert f"{c64['y_spec']:,.0f} against {c64['y_base']:,.0f} tok/s per GPU" in INTRO
    assert f"at {c64['j_spec'][0]:.3f} against {c64['j_base'][0]:.3f} J per token" in INTRO
    assert f"at {c1['x']:.0f} tok/s per" in INTRO and f"{c1['gain'][0]:.2f}x" in INTRO
    assert f"{round(100 * (1 - 1 / c64['gain'][0]))} % fewer GPUs" in H100
    assert f"${_usd(c64['usd_spec'][0])} against ${_usd(c64['usd_base'][0])}" in H100
    spec, base = _pts("h100_vllm026_dflash_2starts", 0), _pts("h100_vllm026_dflash_2starts", None)
    watts = [r["w"] for c in (16, 64) for r in spec[c]]
    assert f"{min(watts):.0f}–{max(watts):.0f} W" in H100
    bw = [r["w"] for r in base[64]]
    assert f"at C=64 {min(bw):.0f}–{max(bw):.0f} W" in H100
    sp = hand.per_point(spec)
    assert f"runs at {sp[64]['x']:.0f} tok/s per user" in H100 and f"C=16 ({sp[16]['x']:.0f} tok/s per user)" in H100
    assert f"from {c64['x']:.0f} to {c1['x']:.0f} tok/s per user" in H100
    assert f"up to {sp[1]['x']:.1f} at C=1" in H100 and f"about {round(c1['y_spec'], -2):,.0f} tok/s per GPU" in H100


def test_the_eagle3_sentences_are_the_recorded_files():
    qs, ls = _pts("h100_vllm026_qwen3_eagle3_2starts", 1), _pts("h100_vllm026_llama_eagle3_1start", 1)
    qb, lb = _pts("h100_vllm026_qwen3_eagle3_2starts", None), _pts("h100_vllm026_llama_eagle3_1start", None)
    slow = [hand.per_point(p)[64]["x"] for p in (qs, ls)]
    fast = [hand.per_point(p)[1]["x"] for p in (qb, lb)]
    assert f"({slow[0]:.0f} and {slow[1]:.0f} tok/s per\n  user at C=64)" in H100
    assert f"({fast[0]:.0f} and {fast[1]:.0f} at C=1)" in H100
    q, lw = _at("h100_vllm026_qwen3_eagle3_2starts", 1)[64], _at("h100_vllm026_llama_eagle3_1start", 1)[64]
    assert q["at_least"] and lw["at_least"]
    assert f"at least {q['gain'][0]:.2f}x (Qwen3) and {lw['gain'][0]:.2f}x (Llama)" in H100
    assert (f"{q['j_spec'][0]:.3f} and {lw['j_spec'][0]:.3f} J per token against "
            f"{q['j_base'][0]:.3f} and {lw['j_base'][0]:.3f}") in H100


@pytest.mark.parametrize("text", ["2.8–3.0 J", "3–9 samples"])
def test_the_ranges_are_the_recorded_files(text):
    bases = [_pts(f, None) for f in hand.FOLDERS]
    one = [hand.per_point(b)[1]["j"][0] for b in bases]
    samples = [r["samples"] for f, (jobs, _) in hand.FOLDERS.items()
               for p in [_pts(f, None)] + [_pts(f, i) for i in range(len(jobs))] for r in p[64]]
    want = {"2.8–3.0 J": f"{min(one):.1f}–{max(one):.1f} J", "3–9 samples": f"{min(samples)}–{max(samples)} samples"}
    assert want[text] == text and text in H100


def test_the_page_names_its_machine_and_is_linked():
    assert "NVIDIA H100 80GB HBM3" in H100 and "vLLM 0.26.0" in H100 and "forced" in H100
    for folder in hand.FOLDERS:
        assert "NVIDIA H100 80GB HBM3" in (hand.DATA / folder / "PROVENANCE.md").read_text()
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "(docs/fleet.md)" in readme
