"""The fleet comparison (launcher.speedup.fleet) on the recorded H100 folders (DFlash, Qwen3 EAGLE3,
Llama EAGLE3, each with its baseline) against the same figures worked out by hand from the raw
per-point files (tests/speedup/fleet_by_hand.py): the gain at equal per-user speed with its
interval, joules per token for both sides, dollars per million tokens with a price; and what the
command line, the JSON and the report give."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from launcher.results.job_dir import load_results
from launcher.speedup.analysis import SUMMARY_FILE, analyse
from launcher.speedup.fleet import Options
from tests.speedup import fleet_by_hand as hand
from tests.speedup.recorded import results_copy

REL = 1e-9


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    out = {}
    for folder in hand.FOLDERS:
        root = results_copy(hand.DATA / folder, tmp_path_factory.mktemp("fleet") / folder)
        res = analyse(load_results(root), fleet_options=Options(hand.PRICE, "--gpu-hour-price"))
        out[folder] = {c["job"]: c for c in res["fleet"]["comparisons"]}
    return out


def _close(iv: dict, want: tuple[float, float, float]) -> bool:
    return all(v == pytest.approx(w, rel=REL) for v, w in zip((iv["mean"], iv["lo"], iv["hi"]), want))


CASES = [(folder, job) for folder, (jobs, _) in hand.FOLDERS.items() for job in jobs]


@pytest.mark.parametrize("folder,job", CASES)
def test_the_gain_at_each_baseline_speed_is_the_hand_interpolation(analysed, folder, job):
    jobs, base = hand.FOLDERS[folder]
    spec_pts, base_pts = hand.points(hand.DATA / folder / job), hand.points(hand.DATA / folder / base)
    n = min(len(v) for v in [*spec_pts.values(), *base_pts.values()])
    assert all(hand.monotone(spec_pts, i) and hand.monotone(base_pts, i) for i in range(n)), \
        "the hand method assumes speed falls and throughput rises with C"
    want = hand.at_baseline_points(spec_pts, base_pts)
    c = analysed[folder][job]
    got = {a["anchor"]["concurrency"]: a for a in c["at_speed"] if a["anchor"]["side"] == "baseline"}
    assert sorted(got) == sorted(want) == [1, 4, 16, 64]
    for conc, w in want.items():
        a = got[conc]
        assert a["per_user_tps"] == pytest.approx(w["x"], rel=REL)
        assert a["kind"] == ("at least" if w["at_least"] else "equal"), (conc, a["kind"])
        assert a["gain"]["n"] == w["n"] and _close(a["gain"], w["gain"]), (conc, a["gain"], w["gain"])
        assert _close(a["speculative"]["joules_per_token"], w["j_spec"])
        assert _close(a["baseline"]["joules_per_token"], w["j_base"])
        assert _close(a["speculative"]["usd_per_million_tokens"], w["usd_spec"])
        assert _close(a["baseline"]["usd_per_million_tokens"], w["usd_base"])


@pytest.mark.parametrize("folder,job", CASES)
def test_joules_and_dollars_per_point_are_the_repeats(analysed, folder, job):
    jobs, base = hand.FOLDERS[folder]
    c = analysed[folder][job]
    for side, name in (("speculative", job), ("baseline", base)):
        want = hand.per_point(hand.points(hand.DATA / folder / name))
        rows = {r["concurrency"]: r for r in c["points"][side]}
        assert sorted(rows) == sorted(want)
        for conc, w in want.items():
            assert _close(rows[conc]["joules_per_token"], w["j"]) and _close(rows[conc]["usd_per_million_tokens"], w["usd"])
            assert rows[conc]["energy_source"] == "power samples"  # recorded before the energy counter
        assert c["energy"][side] == {"source": "power samples", "absent": None}


@pytest.mark.parametrize("folder,job", CASES)
def test_above_the_baselines_fastest_speed_only_the_speculative_server_serves(analysed, folder, job):
    jobs, base = hand.FOLDERS[folder]
    spec_pts, base_pts = hand.points(hand.DATA / folder / job), hand.points(hand.DATA / folder / base)
    fastest_base = max(hand.per_point(base_pts).values(), key=lambda p: p["x"])["x"]
    fastest_spec = max(hand.per_point(spec_pts).values(), key=lambda p: p["x"])["x"]
    c = analysed[folder][job]
    assert fastest_spec > fastest_base and c["only_speculative_above"] == pytest.approx(fastest_base, rel=REL)
    faster = [a for a in c["at_speed"] if a["per_user_tps"] > fastest_base]
    assert faster and all(a["kind"] == "baseline cannot reach" and a["gain"] is None for a in faster)


def test_dflash_overlaps_its_baseline_and_the_eagle3_servers_are_faster_at_every_load(analysed):
    """DFlash at C=64 runs slower per user (116 tok/s) than the baseline at C=64 (126), so the two
    curves share a range of speeds; the EAGLE3 servers' slowest point is faster than the baseline's
    fastest, so there the gain is a lower bound."""
    (dflash,) = analysed["h100_vllm026_dflash_2starts"].values()
    lo, hi = dflash["both_cover"]
    assert lo == pytest.approx(dflash["reach"]["baseline"]["slowest"]["per_user_tps"]) and \
        hi == pytest.approx(dflash["reach"]["baseline"]["fastest"]["per_user_tps"])
    for folder in ("h100_vllm026_qwen3_eagle3_2starts", "h100_vllm026_llama_eagle3_1start"):
        for c in analysed[folder].values():
            assert c["both_cover"] is None
            assert {a["kind"] for a in c["at_speed"] if a["anchor"]["side"] == "baseline"} == {"at least"}


def test_the_command_line_prints_writes_and_the_report_draws_it(tmp_path):
    root = results_copy(hand.DATA / "h100_vllm026_dflash_2starts", tmp_path / "dflash")
    p = subprocess.run([sys.executable, "-m", "launcher.speedup", str(root), "--gpu-hour-price", "2.5",
                        "--per-user-speed", "140", "400"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "at 400.0 tok/s per user (asked): the baseline cannot reach it" in p.stdout
    assert "above 152.0 tok/s per user only the speculative server serves" in p.stdout
    line = next(x for x in p.stdout.splitlines() if "(the baseline's C=64)" in x)
    assert "1.29x [1.25, 1.33] the baseline's throughput per GPU" in line and "J per token" in line
    fleet = json.loads((root / SUMMARY_FILE).read_text())["fleet"]
    assert fleet["gpu_hour_price"] == 2.5 and fleet["price_source"] == "--gpu-hour-price"
    asked = {a["per_user_tps"]: a for a in fleet["comparisons"][0]["at_speed"] if a["anchor"]["side"] == "asked"}
    assert asked[140.0]["kind"] == "equal" and asked[140.0]["gain"]["n"] == 6

    r = subprocess.run([sys.executable, "-m", "launcher.report", str(root), "--out", str(tmp_path / "report")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "report" / "index.html").read_text()
    assert "At equal per-user speed" in html and "fleet_equal_speed.png" in html
    assert (tmp_path / "report" / "fleet_equal_speed.png").stat().st_size > 10_000
    assert "$ per million output tokens" in html and "1.29x [1.25, 1.33]" in html


def test_without_a_price_no_dollars_and_a_bad_price_is_one_line(tmp_path):
    root = results_copy(hand.DATA / "h100_vllm026_llama_eagle3_1start", tmp_path / "llama")
    p = subprocess.run([sys.executable, "-m", "launcher.speedup", str(root)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert "no dollar figures: give --gpu-hour-price USD" in p.stdout and "per million" not in p.stdout
    fleet = json.loads((root / SUMMARY_FILE).read_text())["fleet"]
    assert fleet["gpu_hour_price"] is None
    for c in fleet["comparisons"]:
        assert all(r["usd_per_million_tokens"] is None for side in c["points"].values() for r in side)
        assert all(a["speculative"]["usd_per_million_tokens"] is None for a in c["at_speed"])
    for bad in (["--gpu-hour-price", "0"], ["--gpu-hour-price", "-3"], ["--per-user-speed", "-1"]):
        q = subprocess.run([sys.executable, "-m", "launcher.speedup", str(root), *bad], capture_output=True,
                           text=True, timeout=300)
        assert q.returncode == 2 and len(q.stderr.strip().splitlines()) == 1, q.stderr
        assert bad[0] in q.stderr and "e.g." in q.stderr and "Traceback" not in q.stderr


def test_a_baseline_without_a_per_user_speed_is_named_not_compared(tmp_path):
    """Replies that each arrived in one chunk have no per-user decode speed: the baseline has no
    curve, and each speculative job says why it was not compared instead of vanishing."""
    root = results_copy(hand.DATA / "h100_vllm026_llama_eagle3_1start", tmp_path / "llama")
    base = next(p for p in root.iterdir() if "-none-" in p.name)
    for rep in base.glob("mtbench/*/repeats.json"):
        doc = json.loads(rep.read_text())
        for r in doc["per_repeat"]:
            r["Decode tok/s"] = None
        rep.write_text(json.dumps(doc))
    res = analyse(load_results(root))
    fleet = res["fleet"]
    assert fleet["comparisons"] == []
    assert len(fleet["not_compared"]) == 2
    assert all(m["why"].startswith("the baseline has no point with a per-user decode speed")
               for m in fleet["not_compared"])
