"""docs/gpu.md's "Which drafter pays at which acceptance" (issue 50): every figure of its tables is
what launcher.speedup gives over the recorded H100 folders (tests/data/h100_vllm026_dflash_2starts,
h100_vllm026_qwen3_eagle3_2starts, h100_vllm026_llama_eagle3_1start, h100_vllm026_dflash_explained, h100_vllm026_seed_shaped,
h100_vllm026_async_pair), read through the product's readers; the forced-6 columns (a job cut
short, which the readers count as pending) from its repeats.json."""
from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from statistics import mean

import pytest

from launcher.speedup.cli import main
from tests.speedup.recorded import DATA, results_copy

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "gpu.md").read_text()
SECTION = DOC[DOC.index("## Which drafter pays at which acceptance"):DOC.index("## Figures that reproduce")]
M1, M2, M3 = (DATA / "h100_vllm026_dflash_2starts", DATA / "h100_vllm026_dflash_explained",
              DATA / "h100_vllm026_seed_shaped" / "qwen3_dflash")
M4 = DATA / "h100_vllm026_qwen3_eagle3_2starts"
M6 = DATA / "h100_vllm026_llama_eagle3_1start"
SIX = "qwen3-8b-shaped-dflash-k15-fal6-tp1-53a238db"
FOUR = "qwen3-8b-shaped-dflash-k15-fal4-tp1-9ee4b6e7"
BASE = "qwen3-8b-shaped-none-tp1-9035ec93"


def _table(heading: str) -> list[list[str]]:
    part = SECTION[SECTION.index(heading):]
    rows = [line for line in part.splitlines() if line.startswith("|")]
    out = []
    for line in rows[2:]:
        out.append([c.strip() for c in line.strip("|").split("|")])
        if part[part.index(line) + len(line):].lstrip("\n")[:1] != "|":
            break
    return out


def _nums(cell: str) -> list[float]:
    return [float(x) for x in re.findall(r"\d+\.\d+|\d+", cell.replace(",", ""))]


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    root = tmp_path_factory.mktemp("drafters")
    dirs = [results_copy(src, root / name) for name, src in
            (("m1", M1), ("m2", M2), ("m3", M3), ("m4", M4), ("m6", M6), ("pair", DATA / "h100_vllm026_async_pair"))]
    out = root / "c.json"
    assert main([*map(str, dirs), "--out", str(out)]) == 0
    comp = json.loads(out.read_text())
    name = {str(root / n): n for n in ("m1", "m2", "m3", "m4", "m6", "pair")}
    rows = {}
    for r in comp["rows"]:
        rows[(name[r["folder"]], r["drafter"], r["concurrency"])] = r
    return comp, rows


DFLASH, DRAFT = "dflash (dflash k=15)", "draft (draft_model k=3)"  # the recipe's server (no flag added)
EAGLE3 = "eagle3 (eagle3 k=3)"


def _r2(x: float) -> float:
    return round(x + 1e-12, 2)


def test_the_step_cost_table_is_the_recorded_runs(comparison):
    _, rows = comparison
    table = _table("### Step cost and speedup, one H100")
    assert len(table) == 5
    for cells in table:
        c = int(cells[2])
        r = rows[("pair", DRAFT, c)] if cells[0].startswith("draft model") else rows[("m1", DFLASH, c)]
        cost = r["step_cost"]
        assert _nums(cells[3]) == [_r2(cost["mean"]), _r2(cost["lo"]), _r2(cost["hi"])], cells
        level = "3.5" if cells[0].startswith("draft model") else "4"
        sp = r["levels"][level]["speedup"]
        assert _nums(cells[4])[-3:] == [_r2(sp["mean"]), _r2(sp["lo"]), _r2(sp["hi"])], cells


def _first_start(job: str, c: int) -> list[dict]:
    doc = json.loads((M1 / job / "mtbench" / f"t0_c{c}" / "repeats.json").read_text())
    return [r for r in doc["per_repeat"] if r["server_start"] == 1]


def _al(reps: list[dict]) -> float:
    return mean(1 + r["num_accepted_draft_tokens"] / r["num_spec_steps"] for r in reps)


def test_the_forced_six_column_is_its_first_start_over_the_baselines_first_start():
    for cells in _table("### Step cost and speedup, one H100")[:4]:
        c = int(cells[2])
        six, base = _first_start(SIX, c), _first_start(BASE, c)
        assert len(six) == 3 and len(base) == 3
        ratios = [s["Output TPS"] / b["Output TPS"] for s, b in zip(six, base)]
        assert _nums(cells[5]) == [_r2(mean(ratios)), _r2(_al(six) / mean(ratios))], cells


def _decode_cost(job: str, c: int) -> float:
    spec, base = _first_start(job, c), _first_start(BASE, c)
    return _al(spec) * mean(s["TPOT s"] / b["TPOT s"] for s, b in zip(spec, base))


def test_the_decode_only_column_is_the_first_starts_tpot_ratio_times_the_al():
    """Forced 4 and forced 6 on the same footing (first starts only): AL x TPOT / the baseline's."""
    table = _table("### Step cost and speedup, one H100")[:4]
    for cells in table:
        c = int(cells[2])
        assert _nums(cells[6]) == [_r2(_decode_cost(FOUR, c)), _r2(_decode_cost(SIX, c))], cells
    four = {int(r[2]): _decode_cost(FOUR, int(r[2])) for r in table}
    six = {int(r[2]): _decode_cost(SIX, int(r[2])) for r in table}
    assert all(abs(six[c] / four[c] - 1) < 0.01 for c in (1, 4, 16))  # "the same at both within 1 %"
    m = re.search(r"decode-only (\d+) % above", SECTION)
    assert int(m.group(1)) == round(100 * (six[64] / four[64] - 1))


def _fig(f: dict) -> list[float]:
    return [_r2(f["mean"]), _r2(f["lo"]), _r2(f["hi"])]


@pytest.mark.parametrize("heading,folder", [("### Qwen3 EAGLE3 at two levels", "m4"),
                                            ("### Llama EAGLE3 at two levels", "m6")])
def test_each_eagle3_table_is_the_comparisons_rows(comparison, heading, folder):
    _, rows = comparison
    table = _table(heading)
    assert [int(r[0]) for r in table] == [1, 4, 16, 64]
    for cells in table:
        r = rows[(folder, EAGLE3, int(cells[0]))]
        assert r["baseline"] == "own"
        assert _nums(cells[1]) == _fig(r["step_cost"]), cells
        assert _nums(cells[2])[-3:] == _fig(r["levels"]["2"]["speedup"]), cells
        assert _nums(cells[3])[-3:] == _fig(r["levels"]["3.5"]["speedup"]), cells
        assert _nums(cells[4]) == [_r2(r["levels"][lv]["step_cost"]["mean"]) for lv in ("2", "3.5")], cells
        assert _nums(cells[5]) == [_r2(r["levels"][lv]["decode_step_cost"]["mean"]) for lv in ("2", "3.5")], cells


def test_the_qwen3_eagle3_levels_agree_as_written(comparison):
    _, rows = comparison
    agree = [rows[("m4", EAGLE3, c)]["levels_agree"] for c in (1, 4, 16, 64)]
    m = re.search(r"throughput costs are (\d\.\d) to (\d\.\d) % apart, with intervals that do not overlap", SECTION)
    assert [float(x) for x in m.groups()] == [round(100 * f(a["step_cost"]["spread_rel"] for a in agree), 1)
                                              for f in (min, max)]
    assert not any(a["step_cost"]["intervals_overlap"] for a in agree)
    m = re.search(r"decode-only costs are (\d) to (\d\.\d) % apart \(the same within their intervals at C = 4, 16, 64\)",
                  SECTION)
    assert [float(x) for x in m.groups()] == [round(100 * f(a["decode_step_cost"]["spread_rel"] for a in agree), 1)
                                              for f in (min, max)]
    assert [a["decode_step_cost"]["intervals_overlap"] for a in agree] == [False, True, True, True]


def test_which_drafter_pays_compares_the_two_step_costs(comparison):
    _, rows = comparison
    e3 = {c: rows[("m4", EAGLE3, c)]["step_cost"]["mean"] for c in (1, 4, 16, 64)}
    df = {c: rows[("m1", DFLASH, c)]["step_cost"]["mean"] for c in (1, 4, 16, 64)}
    m = re.search(r"costs (\d\.\d\d) to (\d\.\d\d) baseline steps from C = 1 to 64; a DFlash step \(k = 15: 16 tokens\) "
                  r"(\d\.\d\d) to (\d\.\d\d)", SECTION.replace("\n", " "))
    assert [float(x) for x in m.groups()] == [_r2(e3[1]), _r2(e3[64]), _r2(df[1]), _r2(df[64])]
    m = re.search(r"At C = 1 DFlash needs an AL (\d+) % higher than EAGLE3 for the same speedup; at C = 64, (\d\.\d) "
                  r"times as high", SECTION.replace("\n", " "))
    assert int(m.group(1)) == round(100 * (df[1] / e3[1] - 1))
    assert float(m.group(2)) == round(df[64] / e3[64], 1)
    # with the published ALs: DFlash pays more at C <= 16, EAGLE3 at C = 64
    assert all(4.24 / df[c] > 2.26 / e3[c] for c in (1, 4, 16)) and 4.24 / df[64] < 2.26 / e3[64]


def test_the_across_machines_table_is_the_comparisons_spread(comparison):
    comp, rows = comparison
    table = _table("### Across machines (DFlash at forced AL 4)")
    assert [int(r[0]) for r in table] == [1, 4, 16, 64]
    for cells in table:
        c = int(cells[0])
        for col, m in ((1, "m1"), (2, "m2"), (3, "m3")):
            r = rows.get((m, DFLASH, c))
            if r is None:
                assert cells[col] == "—"
                continue
            sp = r["levels"]["4"]["speedup"]
            want = [_r2(sp["mean"])]
            if sp.get("lo") is not None:
                want.append(round(100 * (sp["hi"] - sp["lo"]) / 2 / sp["mean"], 1))
            assert _nums(cells[col]) == want, (c, m, cells[col])
        spread = next(s for s in comp["spread"] if s["concurrency"] == c and s["figure"] == "speedup at forced AL 4")
        assert _nums(cells[4]) == [round(100 * spread["between_machines_rel"], 1)]
        assert _nums(cells[5]) == [round(100 * spread["within_machine_rel_max"], 1)]


@pytest.fixture(scope="module")
def at_al(comparison):
    """What `python -m launcher.speedup FOLDER --at-al ...` prints for each folder the section predicts
    from: {(folder, drafter, C, AL): (speedup, lo, hi)} (the folders the comparison fixture analysed)."""
    comp, _ = comparison
    out = {}
    for folder in sorted({r["folder"] for r in comp["rows"]}):
        name = Path(folder).name
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert main([folder, "--at-al", "4.24", "3.80", "2.26", "2.60"]) == 0
        for line in printed.getvalue().splitlines():
            m = re.search(r"at AL: (.+?): \S+ T=\S+ C=(\d+): ", line)
            for al, *fig in (re.findall(r"AL ([\d.]+): ([\d.]+)x \[([\d.]+), ([\d.]+)\]", line) if m else []):
                out[(name, m.group(1), int(m.group(2)), float(al))] = tuple(float(x) for x in fig)
    return out


def _pred(at_al, folder, drafter, c, al):
    return [_r2(x) for x in at_al[(folder, drafter, c, al)]]


def test_the_predictions_at_published_als_are_what_the_command_prints(at_al):
    """The section's predictions at the published ALs: launcher.speedup --at-al on the recorded folders
    (the prefill + steps model, docs/speedup.md), to two decimals."""
    m = re.search(r"DFlash at AL 4\.24 gives \*\*(\d\.\d\d)× \[(\d\.\d\d), (\d\.\d\d)\] at C = 1\*\*", SECTION)
    assert [float(x) for x in m.groups()] == _pred(at_al, "m1", DFLASH, 1, 4.24)
    m = re.search(r"(\d\.\d\d)× \[(\d\.\d\d), (\d\.\d\d)\] at C = 64", SECTION)
    assert [float(x) for x in m.groups()] == _pred(at_al, "m1", DFLASH, 64, 4.24)
    m = re.search(r"published 2\.26 \(k = 3\) predicts \*\*(\d\.\d\d)× \[(\d\.\d\d), (\d\.\d\d)\] at C = 1\*\* "
                  r"and (\d\.\d\d)× \[(\d\.\d\d), (\d\.\d\d)\] at C = 64", SECTION.replace("\n", " "))
    assert [float(x) for x in m.groups()] == _pred(at_al, "m4", EAGLE3, 1, 2.26) + _pred(at_al, "m4", EAGLE3, 64, 2.26)
    m = re.search(r"it would give (\d\.\d\d)× \[(\d\.\d\d), (\d\.\d\d)\]", SECTION)
    assert [float(x) for x in m.groups()] == _pred(at_al, "pair", DRAFT, 1, 2.6)
    m = re.search(r"Llama EAGLE-3 chain's published 2\.60 predicts \*\*(\d\.\d\d)× \[(\d\.\d\d), (\d\.\d\d)\] at "
                  r"C = 1\*\* and (\d\.\d\d)× \[(\d\.\d\d), (\d\.\d\d)\] at C = 64", " ".join(SECTION.split()))
    assert [float(x) for x in m.groups()] == _pred(at_al, "m6", EAGLE3, 1, 2.6) + _pred(at_al, "m6", EAGLE3, 64, 2.6)


def test_each_figure_names_its_machine_kind():
    assert "NVIDIA H100 80GB HBM3, GPU-641e43a7" in SECTION
    assert "NVIDIA H100 80GB HBM3, GPU-20590ea1" in SECTION
    assert "NVIDIA H100 80GB HBM3, GPU-29086e0f" in SECTION
    for folder in (M1, M2, M3, M4, M6):
        gpus = json.loads(next(folder.glob("*/gpu_telemetry.json")).read_text())["gpus"]
        assert gpus[0]["name"] == "NVIDIA H100 80GB HBM3"


def test_the_draft_models_two_machines_are_their_recorded_repeats(comparison):
    """The 1B draft model at forced 3.5: the earlier H100's speedup_summary.json (its points keep
    repeats.json only, so it is read as written) beside M2's comparison rows."""
    _, rows = comparison
    old = json.loads((DATA / "h100_vllm026_8b_repeats" / "speedup_summary.json").read_text())
    first = {r["concurrency"]: r["throughput_repeats"]["mean"] for r in old["points"]
             if (r.get("forced_acceptance") or {}).get("length") == 3.5}
    second = {c: rows[("pair", DRAFT, c)]["levels"]["3.5"]["speedup"] for c in (1, 4, 16)}
    m = re.search(r"gave\n?\s*(\d\.\d\d) / (\d\.\d\d) / (\d\.\d\d)× on one H100", SECTION)
    assert [float(x) for x in m.groups()] == [_r2(first[c]) for c in (1, 4, 16)]
    m = re.search(r"and (\d\.\d\d) / (\d\.\d\d) / (\d\.\d\d)× on another \(M2", SECTION)
    assert [float(x) for x in m.groups()] == [_r2(second[c]["mean"]) for c in (1, 4, 16)]
    halves = [100 * (f["hi"] - f["lo"]) / 2 / f["mean"] for f in second.values()]
    m = re.search(r"±(\d+) to (\d+) %\): (\d+\.\d) % apart at C = 16", SECTION)
    assert [int(m.group(1)), int(m.group(2))] == [round(min(halves)), round(max(halves))]
    a, b = first[16], second[16]["mean"]
    assert float(m.group(3)) == round(100 * abs(a - b) / mean([a, b]), 1)


def test_the_drafters_side_by_side_are_their_step_costs(comparison):
    """DFlash and Qwen3 EAGLE3 from the comparison over the recorded folders; the draft model from
    its machine's speedup_summary.json (its points keep repeats.json only), each with its
    interval over 2 starts x 3 repeats of every level it ran."""
    _, rows = comparison
    table = _table("**The drafters side by side.**")
    assert [int(r[0]) for r in table] == [1, 4, 16, 64]
    old = {b["concurrency"]: b for b in json.loads(
        (DATA / "h100_vllm026_8b_repeats" / "speedup_summary.json").read_text())["break_even"]}
    for cells in table:
        c = int(cells[0])
        dflash, eagle3 = rows[("m1", DFLASH, c)]["step_cost"], rows[("m4", EAGLE3, c)]["step_cost"]
        assert dflash["n"] == 6 and eagle3["n"] == 12 and old[c]["n"] == 12
        assert _nums(cells[1].split("(")[0]) == _fig(dflash), cells
        assert _nums(cells[2]) == _fig(eagle3), cells
        assert _nums(cells[3]) == [_r2(old[c]["break_even_al"]), _r2(old[c]["lo"]), _r2(old[c]["hi"])], cells
        llama = rows[("m6", EAGLE3, c)]["step_cost"]
        assert llama["n"] == 6  # one start: 2 levels x 3 repeats
        assert _nums(cells[4]) == _fig(llama), cells
    uuids = {json.loads(next(f.glob("*/gpu_telemetry.json")).read_text())["gpus"][0]["uuid"][:12]
             for f in (M1, M4, DATA / "h100_vllm026_8b_repeats", M6)}
    assert uuids == set(re.findall(r"M\d\s+(GPU-[0-9a-f]{8})", SECTION[SECTION.index("**The drafters side by side.**"):])[:4])


def test_the_llama_eagle3_levels_and_heads_as_written(comparison):
    """One start x 3 repeats on M6: the two levels' costs, the stray C=64 repeats, and the two
    heads' step costs side by side (M6 against M4)."""
    _, rows = comparison
    part = SECTION[SECTION.index("### Llama EAGLE3 at two levels"):SECTION.index("### Across machines")]
    text = " ".join(part.split())
    agree = [rows[("m6", EAGLE3, c)]["levels_agree"] for c in (1, 4, 16, 64)]
    m = re.search(r"decode-only costs of the two levels are within (\d\.\d) % of each other", text)
    assert float(m.group(1)) == round(100 * max(a["decode_step_cost"]["spread_rel"] for a in agree), 1)
    m = re.search(r"throughput's costs rise with the AL \((\d\.\d) to (\d\.\d) % apart\)", text)
    assert [float(x) for x in m.groups()] == [round(100 * f(a["step_cost"]["spread_rel"] for a in agree), 1)
                                              for f in (min, max)]
    reps = json.loads((M6 / "llama8b-shaped-eagle3-k3-fal3.5-tp1-1445b9db" / "mtbench" / "t0_c64" /
                       "repeats.json").read_text())["per_repeat"]
    m = re.search(r"forced-3\.5 repeats spread \(([\d,]+) / ([\d,]+) / ([\d,]+) tok/s\)", text)
    assert [int(x.replace(",", "")) for x in m.groups()] == [round(r["Output TPS"]) for r in reps]
    for r in (rows[("m6", EAGLE3, c)] for c in (1, 4, 16, 64)):
        assert r["baseline"] == "own" and r["step_cost"]["n"] == 6  # 2 levels x 3 repeats of one start
    llama = {c: rows[("m6", EAGLE3, c)]["step_cost"]["mean"] for c in (1, 4, 16, 64)}
    qwen = {c: rows[("m4", EAGLE3, c)]["step_cost"]["mean"] for c in (1, 4, 16, 64)}
    gaps = [100 * (llama[c] / qwen[c] - 1) for c in llama]
    m = re.search(r"head's step costs (\d) to (\d) % more than the Qwen3 head's on M4 \((\d\.\d\d) against "
                  r"(\d\.\d\d) at C = 1, (\d\.\d\d) against (\d\.\d\d) at C = 64\)", text)
    assert [int(m.group(1)), int(m.group(2))] == [round(min(gaps)), round(max(gaps))]
    assert [float(x) for x in m.groups()[2:]] == [_r2(llama[1]), _r2(qwen[1]), _r2(llama[64]), _r2(qwen[64])]


def test_no_recorded_drafter_run_lost_a_request():
    """The issue's "no GPU run lost a request on a healthy server", over every job of every folder the
    comparison reads (and the draft model's): each measured point is complete with no failed request in
    the repeat its files hold, and in every repeat where repeats.json counts them (runs before the
    counts were kept hold the held repeat's only). The one job cut short, forced 6's second start,
    stands as pending: its points keep their first start's repeats."""
    from launcher.results import read_point
    from launcher.results.repeats import record

    folders = [M1, M2, M3, M4, M6, DATA / "h100_vllm026_async_pair", DATA / "h100_vllm026_8b_repeats"]
    jobs = [s.parent for f in folders for s in sorted(f.glob("*/summary.json"))]
    assert len(jobs) >= 15
    points = 0
    for job in jobs:
        for row in json.loads((job / "summary.json").read_text())["points"]:
            if job.name == SIX and job.parent == M1:
                assert row["status"] == "pending"
                continue
            assert row["status"] == "complete" and row["failed_requests"] == 0, (job.name, row["dir"])
            res = read_point(job / row["dir"])  # the draft model's points keep repeats.json alone
            assert not res.timing or (res.failed_requests == 0 and res.succeeded_turns), (job.name, row["dir"])
            per = (record.read(job / row["dir"]) or {}).get("per_repeat") or []
            assert all(r.get("failed_requests") in (None, 0) for r in per), (job.name, row["dir"])
            points += 1
    assert points >= 50
