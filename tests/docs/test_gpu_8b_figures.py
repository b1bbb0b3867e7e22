"""docs/gpu.md's 8B-shaped figures are the H200 run's files (tests/data/h200_vllm026_8b,
PROVENANCE.md there), read through the product's own readers: a number in the page that
drifts from the evidence fails here."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import pytest

from launcher.results.job_dir import read_json
from launcher.results.summary import read_summary
from launcher.speedup.collect import SUMMARY_FILE, forced_table

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "data" / "h200_vllm026_8b"
DOC = ROOT / "docs" / "gpu.md"
CONCURRENCIES = (1, 4, 16, 64)


# ------------------------------------------------------------------ the evidence

def speedup_summary() -> dict:
    doc = read_json(H200 / SUMMARY_FILE)
    assert isinstance(doc, dict), f"{H200 / SUMMARY_FILE}: missing or unreadable"
    return doc


def job_summaries() -> dict[str, dict]:
    out = {}
    for d in sorted(p for p in H200.iterdir() if p.is_dir()):
        s = read_summary(d)
        assert s is not None, f"{d}: no summary.json"
        out[d.name] = s
    return out


def baseline_summary(summaries: dict[str, dict]) -> dict:
    (base,) = [s for s in summaries.values() if s.get("method") == "none"]
    return base


def job_label(s: dict) -> str:
    """The row name the page gives a job: 'baseline' or 'k=3, forced 2.5'."""
    if s.get("method") == "none":
        return "baseline"
    (length,) = {p["forced_acceptance"]["length"] for p in s["points"]}
    return f"k={s['num_speculative_tokens']}, forced {length:g}"


def by_c(summary: dict, field: str) -> dict[int, float]:
    return {p["concurrency"]: p[field] for p in summary["points"]}


def ratio(x: float) -> str:
    return f"{x:.2f}×"


def al_range(xs: list[float]) -> str:
    lo, hi = f"{min(xs):.2f}", f"{max(xs):.2f}"
    return lo if lo == hi else f"{lo}–{hi}"


def forced_rows(spd: dict) -> dict[tuple[int, float], list[dict]]:
    out: dict[tuple[int, float], list[dict]] = {}
    for r in spd["forced"]:
        out.setdefault((r["k"], float(r["forced"]["length"])), []).append(r)
    return out


def expected_tps_rows(spd: dict) -> dict[tuple[int, float], list[str]]:
    """(k, forced AL) -> [measured AL, server AL, speedup at C=1, 4, 16, 64]."""
    out = {}
    for key, rows in forced_rows(spd).items():
        c = {r["concurrency"]: r["speedup"] for r in rows}
        out[key] = [al_range([r["measured_al"] for r in rows]), al_range([r["server_al"] for r in rows])] + \
            [ratio(c[x]) for x in CONCURRENCIES]
    return out


def expected_decode_rows(summaries: dict[str, dict]) -> dict[tuple[int, float], list[str]]:
    """(k, forced AL) -> per-user decode speed (median decode tok/s per request) over the baseline's."""
    base = by_c(baseline_summary(summaries), "Decode tok/s median")
    out = {}
    for s in summaries.values():
        if s.get("method") == "none":
            continue
        (length,) = {p["forced_acceptance"]["length"] for p in s["points"]}
        spec = by_c(s, "Decode tok/s median")
        out[(s["num_speculative_tokens"], float(length))] = [ratio(spec[c] / base[c]) for c in CONCURRENCIES]
    return out


def break_even(points: list[tuple[float, float]]) -> Optional[float]:
    """The server AL at which the speedup first crosses 1 going up the forced levels:
    linear between the last level under 1 and the next one. ``points``: (server AL, speedup)
    in increasing forced AL."""
    for (a0, s0), (a1, s1) in zip(points, points[1:]):
        if s0 < 1 <= s1:
            return a0 + (1 - s0) * (a1 - a0) / (s1 - s0)
    return None


def expected_break_even(spd: dict, k: int) -> dict[int, str]:
    out = {}
    for c in CONCURRENCIES:
        pts = sorted((r["forced"]["length"], r["server_al"], r["speedup"]) for r in spd["forced"]
                     if r["k"] == k and r["concurrency"] == c)
        be = break_even([(al, sp) for _, al, sp in pts])
        out[c] = f"{be:.2f}" if be is not None else "none"
    return out


# ------------------------------------------------------------------ the page

def section_8b() -> str:
    text = DOC.read_text()
    start = text.index("## Speculative decoding on an 8B-shaped model")
    return text[start:text.index("## The tiny model", start)]


def table_after(anchor: str) -> list[list[str]]:
    """The cells of the first markdown table after the line holding ``anchor`` (header and rule dropped)."""
    sec = section_8b()
    assert anchor in sec, f"docs/gpu.md: the 8B section has no {anchor!r}"
    lines = sec[sec.index(anchor):].splitlines()[1:]
    rows, started = [], False
    for ln in lines:
        if ln.startswith("|"):
            started = True
            rows.append([c.strip() for c in ln.strip().strip("|").split("|")])
        elif started:
            break
    assert len(rows) > 2, f"docs/gpu.md: no table after {anchor!r}"
    return rows[2:]


def assert_not_run(row: list[str]) -> None:
    """A row no file holds says so: 'not run' in its speedup cells, '—' (or 'not run') elsewhere."""
    cells = row[2:]
    assert set(cells) <= {"not run", "—"} and cells[-1] == "not run", \
        f"docs/gpu.md: row {row} has figures no file holds"


def k_al(row: list[str]) -> tuple[int, float]:
    return int(row[0]), float(row[1].split()[0])


# ------------------------------------------------------------------ tests

def test_the_stored_forced_table_is_what_launcher_speedup_derives_from_the_points():
    spd = speedup_summary()
    assert forced_table(spd["points"]) == spd["forced"]
    assert len(spd["forced"]) == 20 and spd["baseline_jobs"] == ["llama8b-shaped-none-tp1-9724f184"]


def test_output_tps_table_matches_speedup_summary():
    spd = speedup_summary()
    want = expected_tps_rows(spd)
    rows = table_after("**Output TPS over the baseline's**")
    seen = set()
    for row in rows:
        key = k_al(row)
        if key in want:
            assert row[2:] == want[key], f"docs/gpu.md Output TPS row k={key[0]} AL {key[1]:g}"
            seen.add(key)
        else:
            assert_not_run(row)
    assert seen == set(want), f"docs/gpu.md: Output TPS rows missing for {sorted(set(want) - seen)}"


def test_decode_table_matches_job_summaries():
    want = expected_decode_rows(job_summaries())
    rows = table_after("**Per-user decode speed over the baseline's**")
    seen = set()
    for row in rows:
        key = k_al(row)
        if key in want:
            assert row[2:] == want[key], f"docs/gpu.md decode row k={key[0]} AL {key[1]:g}"
            seen.add(key)
        else:
            assert_not_run(row)
    assert seen == set(want), f"docs/gpu.md: decode rows missing for {sorted(set(want) - seen)}"


def test_baseline_line_matches_its_summary():
    base = baseline_summary(job_summaries())
    tps, dec = by_c(base, "Output TPS"), by_c(base, "Decode tok/s median")
    want = "Baseline: " + ", ".join(f"C={c} {tps[c]:.0f} tok/s ({dec[c]:.0f} per user)" for c in CONCURRENCIES)
    assert want in section_8b()


def test_break_even_line_matches_the_interpolation():
    be = expected_break_even(speedup_summary(), 3)
    want = "Break-even server AL at k=3: " + ", ".join(f"C={c} {be[c]}" for c in CONCURRENCIES)
    assert want in section_8b()


@pytest.mark.parametrize("s0,s1,a0,a1,expect", [(0.5, 1.5, 2.0, 3.0, 2.5), (0.9, 1.1, 2.5, 3.5, 3.0)])
def test_break_even_is_linear_between_the_bracketing_levels(s0, s1, a0, a1, expect):
    assert break_even([(1.5, 0.2), (a0, s0), (a1, s1), (4.0, 0.9)]) == pytest.approx(expect)
    assert break_even([(1.5, 0.2), (2.5, 0.9)]) is None


def test_server_start_and_memory_table_matches_the_job_files():
    rows = {r[0]: r for r in table_after("**Server start and peak GPU memory**")}
    for name, s in job_summaries().items():
        label = job_label(s)
        assert label in rows, f"docs/gpu.md: no server-start row for {label}"
        ready = read_json(H200 / name / "server_ready.json")
        tel = read_json(H200 / name / "gpu_telemetry.json")
        assert rows[label][1] == f"{ready['startup_s']:.0f} s"
        assert rows[label][-1] == f"{tel['peak_total_gib']:.1f} GiB"
        assert tel["kv_cache_cap_gib"] == 16.0


def test_model_build_times_match_models_json():
    m = read_json(H200 / "models.json")["models"]
    for role in ("target", "draft"):
        want = f"{role} {m[role]['seconds']:.1f} s ({m[role]['bytes'] / 1e9:.2f} GB"
        assert want in section_8b(), want


def test_the_evidence_stays_small():
    total = sum(p.stat().st_size for p in H200.rglob("*") if p.is_file())
    assert total < 1_000_000
    assert re.search(r"commit [0-9a-f]{7}", (H200 / "PROVENANCE.md").read_text())
