"""Predictions that hold (issue 61): on the three recorded H100 folders with two forced levels of one
configuration (DFlash forced 4 and 6, Qwen3 EAGLE3 2 and 3.5, Llama EAGLE3 2 and 3.5),
``launcher.speedup`` predicts each level from the other unasked and sets it beside what it measured.
The expected figures are computed here from each folder's repeats.json and timing.json
(tests/speedup/recorded.py: the request time prefill + (n - 1) / AL verify steps), not by the code
under test."""
from __future__ import annotations

import json
from pathlib import Path
from statistics import mean

import pytest

from launcher.report.build import build_report
from launcher.speedup.analysis import SUMMARY_FILE
from launcher.speedup.cli import main
from tests.speedup.recorded import DATA, model_prediction, output_tokens, repeat_parts, results_copy

QWEN3 = ("h100_vllm026_qwen3_eagle3_2starts", "qwen3-8b-shaped-none-tp1-0dcb1aec",
         {2.0: "qwen3-8b-shaped-eagle3-k3-fal2-tp1-49dda453", 3.5: "qwen3-8b-shaped-eagle3-k3-fal3.5-tp1-15484f71"})
LLAMA = ("h100_vllm026_llama_eagle3_1start", "llama8b-shaped-none-tp1-9724f184",
         {2.0: "llama8b-shaped-eagle3-k3-fal2-tp1-90f1097e", 3.5: "llama8b-shaped-eagle3-k3-fal3.5-tp1-1445b9db"})
DFLASH = ("h100_vllm026_dflash_2starts", "qwen3-8b-shaped-none-tp1-9035ec93",
          {4.0: "qwen3-8b-shaped-dflash-k15-fal4-tp1-9ee4b6e7", 6.0: "qwen3-8b-shaped-dflash-k15-fal6-tp1-53a238db"})
FOLDERS = {"qwen3": QWEN3, "llama": LLAMA, "dflash": DFLASH}
CS = (1, 4, 16, 64)


def analysed_copy(dst: Path, which: str) -> Path:
    """The folder copied with its points' COMPLETE markers. DFlash's forced 6 was cut short in its
    second server start (PROVENANCE.md): its points hold the first start's 3 repeats, each with its
    COMPLETE marker, while the job's summary.json still says pending; the copy's summary.json says
    complete, as a job of one start would, so the analysis reads them."""
    folder, _, jobs = FOLDERS[which]
    root = results_copy(DATA / folder, dst)
    for job in jobs.values():
        path = root / job / "summary.json"
        doc = json.loads(path.read_text())
        for p in doc.get("points") or []:
            if (root / job / p["dir"] / "COMPLETE").is_file():
                p["status"] = "complete"
        path.write_text(json.dumps(doc))
    return root


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for which in FOLDERS:
        root = analysed_copy(tmp_path_factory.mktemp("held") / which, which)
        out[which] = root
    return out


def expected(root: Path, which: str, level: float, c: int) -> dict:
    """Level ``level`` at C predicted from the folder's other level, from the files."""
    _, base, jobs = FOLDERS[which]
    (other,) = [lv for lv in jobs if lv != level]
    held, kept = repeat_parts(root, jobs[level], base, c), repeat_parts(root, jobs[other], base, c)
    al = mean(r["al"] for r in held)
    s, lo, hi = model_prediction(kept, output_tokens(root, jobs[other], c), al, len(held))
    return {"al": al, "predicted": s, "lo": lo, "hi": hi, "measured": mean(r["speedup"] for r in held),
            "prefill_rel": mean(r["ttft"] for r in held) / mean(r["ttft"] for r in kept) - 1,
            "step_rel": mean(r["al"] * r["tpot"] for r in held) / mean(r["al"] * r["tpot"] for r in kept) - 1}


def checks(root: Path) -> dict:
    res = json.loads((root / SUMMARY_FILE).read_text())
    return {(float(h["level"].split()[-1]), h["concurrency"]): h for h in res["held_out"]}


@pytest.mark.parametrize("which", list(FOLDERS))
def test_the_check_is_printed_unasked_and_written(runs, which, capsys):
    root = runs[which]
    assert main([str(root)]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("  held out ")]
    assert len(lines) == 8, out  # two levels x four concurrencies
    assert "  held out: " in out and " predicted from the others fell inside their interval" in out
    got = checks(root)
    assert sorted(got) == sorted((lv, c) for lv in FOLDERS[which][2] for c in CS)
    for (lv, c), h in got.items():
        line = next(ln for ln in lines if f" C={c}: forced AL {lv:g} from " in ln)
        assert (f"predicted {h['predicted']:.2f}x [{h['lo']:.2f}, {h['hi']:.2f}] "
                f"vs measured {h['measured']:.2f}x") in line


@pytest.mark.parametrize("which", list(FOLDERS))
def test_each_level_is_predicted_from_the_other_as_the_files_say(runs, which):
    root = runs[which]
    assert main([str(root)]) == 0
    for (lv, c), h in checks(root).items():
        e = expected(root, which, lv, c)
        assert h["al"] == pytest.approx(e["al"], rel=1e-9)
        assert [h["predicted"], h["lo"], h["hi"], h["measured"]] == \
            pytest.approx([e["predicted"], e["lo"], e["hi"], e["measured"]], rel=1e-9)
        assert h["moved"]["prefill"]["rel"] == pytest.approx(e["prefill_rel"], rel=1e-9)
        assert h["moved"]["step"]["rel"] == pytest.approx(e["step_rel"], rel=1e-9)


@pytest.mark.parametrize("which", ["qwen3", "llama"])
def test_eagle3_levels_land_within_2_percent_at_c_up_to_16_and_inside_at_every_c(runs, which):
    root = runs[which]
    assert main([str(root)]) == 0
    got = checks(root)
    for lv in FOLDERS[which][2]:
        for c in CS:
            e = expected(root, which, lv, c)
            miss = abs(e["predicted"] / e["measured"] - 1)
            if c <= 16:  # the largest: Llama forced 2 at C = 16, 2.02 % (2.0 % as printed)
                assert miss < 0.0205, (lv, c, e)
            assert e["lo"] <= e["measured"] <= e["hi"], (lv, c, e)
            beyond = c <= 16 and miss > 0.02  # marked with the part that moved, though inside
            assert got[(lv, c)]["inside"] is True and got[(lv, c)]["beyond_target"] is beyond
            assert bool(got[(lv, c)]["why"]) is beyond, (lv, c, got[(lv, c)]["why"])


def test_dflash_holds_to_c_16_and_names_the_dearer_step_at_c_64(runs):
    """DFlash: inside the interval up to C = 16; beyond 2 % only where the prefill (TTFT) moved by a
    fifth between the levels, which one level cannot show. At C = 64 forced 6's step cost 45 % more
    (the engine host-bound): outside, and the check says so."""
    root = runs["dflash"]
    assert main([str(root)]) == 0
    got = checks(root)
    for lv in (4.0, 6.0):
        for c in (1, 4, 16):
            e = expected(root, "dflash", lv, c)
            assert e["lo"] <= e["measured"] <= e["hi"] and got[(lv, c)]["inside"] is True, (lv, c, e)
            if abs(e["predicted"] / e["measured"] - 1) > 0.02:
                assert abs(e["prefill_rel"]) > 0.15 and abs(e["step_rel"]) < 0.01, (lv, c, e)
                # marked, with the prefill named as what moved
                assert got[(lv, c)]["beyond_target"] is True and got[(lv, c)]["why"][0].startswith("the prefill took")
            else:
                assert got[(lv, c)]["beyond_target"] is False and not got[(lv, c)]["why"]
        one = expected(root, "dflash", lv, 1)
        assert abs(one["predicted"] / one["measured"] - 1) < 0.01
    six = got[(6.0, 64)]
    e = expected(root, "dflash", 6.0, 64)
    assert not (e["lo"] <= e["measured"] <= e["hi"]) and six["inside"] is False
    assert e["step_rel"] > 0.3
    assert six["why"][0].startswith("a verify step took 45% longer at AL 5.94") and six["causes"] == ["host-bound"]
    assert got[(4.0, 64)]["inside"] is False and got[(4.0, 64)]["why"][0].startswith("a verify step took 31% less")


def test_the_reports_main_page_shows_what_applies_to_forced_runs(runs):
    root = runs["qwen3"]
    assert main([str(root)]) == 0
    page = build_report(root).read_text()
    section = page[page.index('<section id="speedup">'):]
    section = section[:section.index("</section>")]
    best_k = section[section.index("<h3>Best k per load</h3>"):section.index("<h3>Predicted vs measured</h3>")]
    assert "No best k: every point here ran at a forced acceptance" in best_k and "<table" not in best_k
    assert 'class="pvm"' not in section and "does not apply to them" in section
    table = section[section.index('<table class="heldout">'):]
    table = table[:table.index("</table>")]
    assert table.count("<tr>") == 1 + 8 and table.count(">inside<") == 8
    assert 'href="why.html"' in section


def test_each_forced_level_is_a_curve_of_its_own(runs):
    """The main page's speedup against concurrency: EAGLE3's two forced levels are two lines, each
    through its own four points, not one line zigzagging between them."""
    from launcher.report.speedup_plots import curves
    root = runs["qwen3"]
    assert main([str(root)]) == 0
    rows = json.loads((root / SUMMARY_FILE).read_text())["points"]
    (panel,) = curves(rows).values()
    assert list(panel) == ["k=3 forced AL 2", "k=3 forced AL 3.5"]
    for name, level in (("k=3 forced AL 2", 2.0), ("k=3 forced AL 3.5", 3.5)):
        assert [r["concurrency"] for r in panel[name]] == list(CS)
        assert {r["forced_acceptance"]["length"] for r in panel[name]} == {level}
