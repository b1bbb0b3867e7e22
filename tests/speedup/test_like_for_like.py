"""What differs between a speculative server and its baseline (launcher.speedup.like_for_like),
from the jobs' recorded server_ready.json: flags the user passed and settings the engine chose."""
from __future__ import annotations

import json

from launcher.engines import get_engine
from launcher.results.job_dir import load_results
from launcher.speedup.like_for_like import chosen_diff, differing
from tests.speedup.recorded import DFLASH, DFLASH_BASE, DFLASH_JOB, results_copy


def _edit(path, **changes):
    d = json.loads(path.read_text())
    d.update(changes)
    path.write_text(json.dumps(d))


def _jobs(root):
    jobs = {j.name: j for j in load_results(root)}
    return jobs[DFLASH_JOB], jobs[DFLASH_BASE]


def test_the_same_flags_are_like_for_like(tmp_path):
    spec, base = _jobs(results_copy(DFLASH, tmp_path / "r"))
    assert differing(spec, base, "dflash") == []


def test_an_added_removed_or_changed_flag_is_named(tmp_path):
    root = results_copy(DFLASH, tmp_path / "r")

    def changed(argv):
        i = argv.index("64")  # --max-num-seqs 64 in both servers' flags
        argv = argv[:i] + ["128"] + argv[i + 1:]
        return [a for a in argv if a not in ("--dtype", "bfloat16")] + ["--no-enable-prefix-caching",
                                                                        "--chat-template", "/some/path.jinja"]
    # the server's flags wherever the job recorded them (each point's serving config and job.json:
    # what its run identity is read from) and the argv it started with (server_ready.json)
    job, ready = root / DFLASH_JOB / "job.json", root / DFLASH_JOB / "server_ready.json"
    _edit(job, server_flags=changed(json.loads(job.read_text())["server_flags"]))
    _edit(ready, argv=changed(json.loads(ready.read_text())["argv"]))
    for cfg in (root / DFLASH_JOB).glob("*/*/configuration.json"):
        d = json.loads(cfg.read_text())
        d["serving_config"]["server_flags"] = changed(d["serving_config"]["server_flags"])
        cfg.write_text(json.dumps(d))
    spec, base = _jobs(root)
    assert differing(spec, base, "dflash") == ["- --dtype bfloat16", "--max-num-seqs 64→128",
                                               "+ --no-enable-prefix-caching"]  # by flag name; the path left out


def test_the_engines_logged_choice_wins_over_its_rule(tmp_path):
    root = results_copy(DFLASH, tmp_path / "r")
    _edit(root / DFLASH_JOB / "server_ready.json", engine_chosen={"async_scheduling": "off"})
    _edit(root / DFLASH_BASE / "server_ready.json", engine_chosen={"async_scheduling": "on"})
    spec, base = _jobs(root)
    assert differing(spec, base, "dflash") == ["asynchronous scheduling on→off (the engine's choice)"]


def test_without_a_server_argv_nothing_is_claimed(tmp_path):
    root = results_copy(DFLASH, tmp_path / "r")
    (root / DFLASH_BASE / "server_ready.json").unlink()
    spec, base = _jobs(root)
    assert differing(spec, base, "dflash") is None


def test_chosen_diff_names_only_what_both_sides_know_and_differs():
    assert chosen_diff({"async_scheduling": "off"}, {"async_scheduling": "off"}, True) == []
    assert chosen_diff({"async_scheduling": "off"}, {}, True) == []
    assert chosen_diff({"async_scheduling": "off"}, {"async_scheduling": "on"}, True) == [
        "asynchronous scheduling on→off (the engine's choice; inferred from its rule for this method and version)"]
    sgl = get_engine("sglang")  # SGLang 0.5.17's rule: speculative decoding runs overlapped unless turned off
    assert sgl.inferred_chosen_settings("draft_model", "0.5.17", []) == {"overlap_schedule": "on"}
    assert sgl.inferred_chosen_settings("draft_model", "0.5.17", ["--disable-overlap-schedule"]) == {}
    assert sgl.inferred_chosen_settings("draft_model", "0.4.0", []) == {}  # no rule known for that version
    assert chosen_diff({"overlap_schedule": "on"}, {"overlap_schedule": "off"}, False) == [
        "overlap scheduling off→on (the engine's choice)"]
