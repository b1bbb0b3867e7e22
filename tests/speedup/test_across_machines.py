"""launcher.speedup over several folders (launcher.speedup.across, issue 50): the drafters side by
side, the between-machine spread beside each machine's interval, and a baseline borrowed from
another recipe's folder of the same machine, target and serving settings. On the recorded H100
runs of qwen3_dflash at forced AL 4: three machines (three GPU uuids), the expected figures
computed here from each folder's repeats.json, not by the code under test."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from statistics import mean

import pytest

from launcher.results.job_dir import load_results
from launcher.speedup import across
from launcher.speedup.cli import main
from tests.speedup.recorded import DATA, results_copy

TWO_STARTS = DATA / "h100_vllm026_dflash_2starts"      # this session's H100: 2 starts x 3 repeats
THREE_REPEATS = DATA / "h100_vllm026_dflash_explained"  # another H100: 1 start x 3 repeats
ONE_PASS = DATA / "h100_vllm026_seed_shaped" / "qwen3_dflash"  # a third H100: one pass
SPEC, BASE = "qwen3-8b-shaped-dflash-k15-fal4-tp1-9ee4b6e7", "qwen3-8b-shaped-none-tp1-9035ec93"


def _uuid(folder: Path) -> str:
    return json.loads((folder / SPEC / "gpu_telemetry.json").read_text())["gpus"][0]["uuid"]


def _ratios(folder: Path, c: int) -> list[float]:
    """Repeat i of the DFlash server over repeat i of its baseline, from repeats.json."""
    def tps(job):
        doc = json.loads((folder / job / "mtbench" / f"t0_c{c}" / "repeats.json").read_text())
        return [r["Output TPS"] for r in doc["per_repeat"]]
    return [s / b for s, b in zip(tps(SPEC), tps(BASE))]


def _one_pass(folder: Path, c: int) -> float:
    def tps(job):
        rows = json.loads((folder / job / "summary.json").read_text())["points"]
        return next(r["Output TPS"] for r in rows if r["concurrency"] == c)
    return tps(SPEC) / tps(BASE)


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    root = tmp_path_factory.mktemp("three")
    dirs = [results_copy(src, root / name) for name, src in
            (("two_starts", TWO_STARTS), ("three_repeats", THREE_REPEATS), ("one_pass", ONE_PASS))]
    out = root / "comparison.json"
    assert main([*map(str, dirs), "--out", str(out)]) == 0
    return dirs, json.loads(out.read_text()), out


def test_each_folder_is_its_own_machine_named_by_its_gpu(three):
    dirs, comp, _ = three
    assert len({_uuid(d) for d in (TWO_STARTS, THREE_REPEATS, ONE_PASS)}) == 3
    machines = {name: m["machine"] for name, m in comp["machines"].items()}
    assert sorted(machines.values()) == sorted(f"gpu:{_uuid(d)}" for d in dirs)


def test_the_speedup_per_machine_is_its_repeats_mean_and_the_spread_is_between_their_means(three):
    dirs, comp, _ = three
    for c in (1, 4, 16):
        expected = {f"gpu:{_uuid(TWO_STARTS)}": mean(_ratios(TWO_STARTS, c)),
                    f"gpu:{_uuid(THREE_REPEATS)}": mean(_ratios(THREE_REPEATS, c)),
                    f"gpu:{_uuid(ONE_PASS)}": _one_pass(ONE_PASS, c)}
        rows = [r for r in comp["rows"] if r["concurrency"] == c and r["drafter"].startswith("dflash")]
        got = {r["machine"]: r["levels"]["4"]["speedup"]["mean"] for r in rows}
        assert got == pytest.approx(expected, rel=1e-6)
        assert {r["machine"]: r["levels"]["4"]["speedup"]["n"] for r in rows}[f"gpu:{_uuid(TWO_STARTS)}"] == 6
        spread = next(s for s in comp["spread"] if s["concurrency"] == c and s["figure"] == "speedup at forced AL 4")
        means = list(expected.values())
        assert spread["machines"] == 3
        assert spread["between_machines_rel"] == pytest.approx((max(means) - min(means)) / mean(means), rel=1e-6)
        # each machine's own interval beside it; the one pass has none
        per = spread["per_machine"]
        assert per[f"gpu:{_uuid(ONE_PASS)}"]["half_interval_rel"] is None
        assert per[f"gpu:{_uuid(TWO_STARTS)}"]["half_interval_rel"] > 0


def test_the_step_cost_is_the_al_over_each_repeats_speedup(three):
    _, comp, _ = three
    al = json.loads((TWO_STARTS / SPEC / "summary.json").read_text())["points"][0]["Server_AL"]
    row = next(r for r in comp["rows"] if r["concurrency"] == 1 and r["machine"] == f"gpu:{_uuid(TWO_STARTS)}")
    assert row["step_cost"]["mean"] == pytest.approx(mean(al / s for s in _ratios(TWO_STARTS, 1)), rel=1e-6)
    assert row["step_cost"]["lo"] < row["step_cost"]["mean"] < row["step_cost"]["hi"]


def test_the_plot_is_written_beside_the_json(three):
    _, _, out = three
    png = out.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_folder_without_a_baseline_borrows_one_of_the_same_machine_and_says_so(tmp_path, capsys):
    """Two recipes on one machine: the baseline ran in the other's folder. Matched by target and
    serving settings on the same machine; a folder of another machine does not borrow it."""
    spec_only = results_copy(TWO_STARTS, tmp_path / "qwen3_dflash")
    base_only = tmp_path / "qwen3_other"
    base_only.mkdir()
    shutil.move(str(spec_only / BASE), str(base_only / BASE))
    other_machine = results_copy(THREE_REPEATS, tmp_path / "elsewhere")
    shutil.rmtree(other_machine / BASE)
    assert across.borrowable(load_results(spec_only), {"b": load_results(base_only)})
    assert not across.borrowable(load_results(other_machine), {"b": load_results(base_only)})
    assert main([str(spec_only), str(base_only), str(other_machine)]) == 0
    out = capsys.readouterr().out
    assert f"baseline borrowed from {base_only}: the same machine, target and serving settings" in out
    assert f"{other_machine}: no baseline job" in out
    summary = json.loads((spec_only / "speedup_summary.json").read_text())
    assert {r["baseline_from"] for r in summary["points"]} == {str(base_only)}
    # the borrowed pairing gives the figures the folder's own baseline gave
    results_copy(TWO_STARTS, tmp_path / "own")
    assert main([str(tmp_path / "own")]) == 0
    mine = json.loads((tmp_path / "own" / "speedup_summary.json").read_text())
    assert [r["throughput_per_repeat"] for r in summary["points"]] == [r["throughput_per_repeat"] for r in mine["points"]]


def test_job_takes_one_folder(tmp_path, capsys):
    assert main([str(tmp_path), str(tmp_path), "--job", str(tmp_path)]) == 2
    assert "give one results folder" in capsys.readouterr().err


def test_a_cut_job_names_its_host_by_boot_id_only_where_no_job_recorded_gpus(tmp_path):
    root = results_copy(TWO_STARTS, tmp_path / "r")
    jobs = {j.name: j for j in load_results(root)}
    cut = jobs["qwen3-8b-shaped-dflash-k15-fal6-tp1-53a238db"]  # cut short: no gpu_telemetry.json
    assert across.machine_of(cut).startswith("boot:")
    assert across.folder_machine(jobs.values()) == f"gpu:{_uuid(TWO_STARTS)}"


def test_each_machines_line_says_where_its_points_were_measured():
    """The console names each machine with its folders' record (GPU, host, one core's speed), so a
    spread between machines sits beside what differed between them."""
    comp = {"rows": [], "spread": [], "machines": {
        "M1": {"machine": "gpu:GPU-a", "measured_on": "NVIDIA H100 on 16 x Xeon; one core 61.5 ms for 2e6 Python additions, best of 5"},
        "M2": {"machine": "gpu:GPU-b", "measured_on": None}}}
    assert across.lines(comp, {"gpu:GPU-a": "M1", "gpu:GPU-b": "M2"}) == [
        "M1 = gpu:GPU-a: NVIDIA H100 on 16 x Xeon; one core 61.5 ms for 2e6 Python additions, best of 5",
        "M2 = gpu:GPU-b"]


def test_a_baseline_of_another_machine_of_the_same_kind_is_named(tmp_path):
    """DFlash's jobs (machine M1) in one folder with the Qwen3 baseline of machine M4: two H100
    guests alike in hostname, CPU model and cores. The pairing names the other machine by its
    boot id (recorded per point), beside the causes it named before."""
    from launcher.speedup.cli import main as speedup_main
    mixed = results_copy(DATA / "h100_vllm026_dflash_2starts", tmp_path / "mixed")
    own_base = next(mixed.glob("qwen3-8b-shaped-none-*"))
    shutil.rmtree(own_base)
    other = results_copy(DATA / "h100_vllm026_qwen3_eagle3_2starts", tmp_path / "m4")
    shutil.move(str(next(other.glob("qwen3-8b-shaped-none-*"))), str(mixed / own_base.name))
    assert speedup_main([str(mixed)]) == 0
    rows = json.loads((mixed / "speedup_summary.json").read_text())["points"]
    words = {c["word"] for r in rows for c in (r.get("causes") or [])}
    assert "other-machine" in words, words
    text = next(c["sentence"] for r in rows for c in r["causes"] if c["word"] == "other-machine")
    assert "boot 30a59545" in text and "boot 9e2093bb" in text


def test_a_borrowed_baseline_names_the_machine_of_each_point_it_pairs(tmp_path, capsys):
    """One folder holds DFlash's job of M1 and Qwen3 EAGLE3's job of M4, without a baseline; another
    folder holds M4's baseline. The folder borrows it (it shares M4 with the EAGLE3 job): the EAGLE3
    rows ran on the baseline's machine, the DFlash rows on another one, named by both boot ids."""
    m1, m4 = DATA / "h100_vllm026_dflash_2starts", DATA / "h100_vllm026_qwen3_eagle3_2starts"
    mixed, borrowed = tmp_path / "mixed", tmp_path / "m4_baseline"
    dflash, eagle3 = results_copy(m1, tmp_path / "m1"), results_copy(m4, tmp_path / "m4")
    mixed.mkdir()
    borrowed.mkdir()
    shutil.move(str(dflash / SPEC), str(mixed / SPEC))
    e3 = "qwen3-8b-shaped-eagle3-k3-fal2-tp1-49dda453"
    shutil.move(str(eagle3 / e3), str(mixed / e3))
    shutil.move(str(next(eagle3.glob("qwen3-8b-shaped-none-*"))), str(borrowed))
    boot = {name: json.loads((folder / job / "mtbench" / "t0_c1" / "configuration.json").read_text())
            ["specdec_launcher"]["machine"]["host"]["boot_id"]
            for name, folder, job in (("m1", m1, SPEC), ("m4", m4, e3))}
    assert boot["m1"] != boot["m4"]
    assert main([str(mixed), str(borrowed)]) == 0
    out = capsys.readouterr().out
    rows = json.loads((mixed / "speedup_summary.json").read_text())["points"]
    assert {r["baseline_from"] for r in rows} == {str(borrowed)}
    on_m1 = [r for r in rows if r["job"] == SPEC]
    on_m4 = [r for r in rows if r["job"] == e3]
    assert len(on_m1) == len(on_m4) == 4
    assert all(r["same_machine"] is False and "other-machine" in [c["word"] for c in r["causes"]] for r in on_m1)
    assert all(r["same_machine"] is True and "other-machine" not in [c["word"] for c in r["causes"]] for r in on_m4)
    said = next(ln for ln in out.splitlines() if ln.startswith("  machine: other machine:"))
    assert f"boot {boot['m1'][:8]}" in said and f"boot {boot['m4'][:8]}" in said


def test_results_without_a_machine_record_say_so(tmp_path, capsys):
    """Points recorded before the boot id and GPU uuids (THREE_REPEATS): no other-machine is claimed,
    and the output says the machine cannot be told."""
    root = results_copy(THREE_REPEATS, tmp_path / "older")
    assert main([str(root)]) == 0
    out = capsys.readouterr().out
    rows = json.loads((root / "speedup_summary.json").read_text())["points"]
    configuration = json.loads((THREE_REPEATS / SPEC / "mtbench" / "t0_c1" / "configuration.json").read_text())
    host = (configuration.get("specdec_launcher", {}).get("machine") or {}).get("host") or {}
    assert not host.get("boot_id")  # recorded before the boot id
    assert rows and all(r["same_machine"] is None for r in rows)
    assert not any(c["word"] in ("other-machine", "other-host", "other-GPU") for r in rows for c in r["causes"])
    assert (f"  machine: the machine of {len(rows)} point(s) or of their baseline was not recorded (no boot id or "
            "GPU uuids: results before those records), so whether they ran on one machine cannot be told") in out
