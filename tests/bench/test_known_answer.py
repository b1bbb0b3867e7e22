"""The known-answer probe's verdict, records and report block, on hand-made
per-request stats (no processes)."""
from __future__ import annotations

import pytest

from launcher.bench import known_answer as ka
from launcher.engines import get_engine
from launcher.report.html import known_answer_block, _known_word


def stats(hist):
    return {"acceptance_histogram": hist, "num_spec_steps": sum(hist),
            "num_accepted_draft_tokens": sum(j * h for j, h in enumerate(hist))}


def test_every_draft_accepted_passes_with_al_k_plus_1():
    v = ka.verdict([stats([0, 0, 0, 16]), stats([0, 0, 0, 21])], k=3, temperature=0.0)
    assert v["passed"] and v["al"] == 4.0 and v["expected_al"] == 4
    assert v["histogram"] == [0, 0, 0, 37] and v["short_steps"] == 0 and v["requests"] == 2


def test_one_short_final_step_per_request_is_tolerated():
    v = ka.verdict([stats([0, 1, 0, 15]), stats([1, 0, 0, 10])], k=3, temperature=0.7)
    assert v["passed"] and v["short_steps"] == 2
    assert v["al"] == pytest.approx(1 + (1 + 45 + 30) / 27, abs=1e-4)


def test_two_short_steps_in_one_request_fail():
    v = ka.verdict([stats([0, 0, 0, 16]), stats([1, 1, 0, 10])], k=3, temperature=1.0)
    assert not v["passed"] and v["requests_failing"] == 1


def test_the_vllm_cpu_defect_fails_with_its_figures():
    """real-stack.md: T=0.7 gave histogram [37, 13, 0, 0] on one 64-token request."""
    v = ka.verdict([stats([37, 13, 0, 0])], k=3, temperature=0.7)
    assert not v["passed"] and v["al"] == pytest.approx(1.26, abs=1e-4)
    msg = ka.defect_message(v)
    assert msg == "engine defect suspected: known-answer AL 1.26 at T=0.7, expected k+1 = 4"


def test_no_steps_is_not_a_pass():
    assert not ka.verdict([], k=3, temperature=0.0)["passed"]
    assert not ka.verdict([stats([0, 0, 0, 0])], k=3, temperature=0.0)["passed"]


def test_summary_points_of_the_failed_temperature_are_marked():
    entries = [ka.verdict([stats([0, 0, 0, 16])], 3, 0.0), ka.verdict([stats([37, 13, 0, 0])], 3, 0.7)]
    res = ka.probe_verdict(entries, 3)
    assert res["status"] == "failed" and res["failed_temperatures"] == [0.7]
    summary = {"points": [{"dir": "mtbench/t0_c1", "temperature": 0.0, "status": "complete"},
                          {"dir": "mtbench/t0.7_c1", "temperature": 0.7, "status": "complete"}]}
    out = ka.mark_points(summary, res)
    assert out["known_answer"] is res
    assert "engine_warning" not in out["points"][0]
    assert out["points"][1]["engine_warning"].startswith("engine defect suspected: known-answer AL 1.26 at T=0.7")
    assert out["points"][1]["status"] == "complete"  # measured as it was; flagged, not rewritten
    assert ka.one_line(res) == "known-answer T=0 pass (AL 4.00/4), T=0.7 FAIL (AL 1.26/4)"


def test_record_writes_the_file_and_updates_summary(tmp_path):
    import json
    (tmp_path / "summary.json").write_text(json.dumps({"points": [{"dir": "a", "temperature": 0.7}]}))
    res = ka.probe_verdict([ka.verdict([stats([37, 13, 0, 0])], 3, 0.7)], 3)
    ka.record(tmp_path, res)
    assert json.loads((tmp_path / "known_answer.json").read_text())["passed"] is False
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["known_answer"]["failed_temperatures"] == [0.7] and "engine_warning" in s["points"][0]


def test_memory_check_needs_two_copies_of_the_weights(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 1000)
    assert ka.memory_skip_reason(str(tmp_path), tp=1, free_bytes_per_device=2600) is None  # 2000 <= 0.8 * 2600
    reason = ka.memory_skip_reason(str(tmp_path), tp=1, free_bytes_per_device=2000)
    assert reason and "need" in reason and "free" in reason
    assert ka.memory_skip_reason(str(tmp_path), tp=2, free_bytes_per_device=2000) is None  # split over 2 devices
    assert ka.memory_skip_reason("org/some-hub-id", tp=1, free_bytes_per_device=1) is None  # unknown: let it try


def test_report_block_shows_the_verdict_per_temperature_and_the_flagged_points():
    res = ka.probe_verdict([ka.verdict([stats([0, 0, 0, 16])], 3, 0.0), ka.verdict([stats([37, 13, 0, 0])], 3, 0.7)], 3)
    html = known_answer_block(res, [{"dir": "mtbench/t0.7_c1", "engine_warning": "engine defect suspected: x"}])
    assert "FAILED" in html and "engine defect suspected" in html and "mtbench/t0.7_c1" in html
    assert _known_word(res) == "FAILED at T=0.7"
    assert "SKIPPED" in known_answer_block(ka.skipped("no room"))
    assert "NOT RUN" in known_answer_block(None)


def test_unreachable_server_is_recorded_as_skipped_with_the_reason(tmp_path):
    import json
    import socket
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc = ka.main(["--url", f"http://127.0.0.1:{port}", "--model", "m", "--k", "3", "--temperature", "0",
                  "--save_dir", str(tmp_path), "--engine", "vllm"])
    res = json.loads((tmp_path / "known_answer.json").read_text())
    assert rc == 2 and res["status"] == "skipped" and res["passed"] is None
    assert res["reason"].startswith("the probe's requests failed")
    assert ka.one_line(res).startswith("known-answer probe skipped: the probe's requests failed")


def test_the_launcher_table_shows_the_jobs_reason_not_submitits_log_paths():
    """A failed probe fails the job with a RuntimeError; submitit wraps its
    traceback and ends the message with log paths: the reason is what the
    launcher must show."""
    from types import SimpleNamespace

    from submitit.core.utils import FailedJobError

    from launcher.login.submit import job_outcome

    reason = ("job s1 failed (exit 1): known-answer probe failed: engine defect suspected: "
              "known-answer AL 1.05 at T=0.7, expected k+1 = 4; logs in /x/logs")
    trace = f'Traceback (most recent call last):\n  File "job.py", line 68, in run_job\n    raise RuntimeError(...)\nRuntimeError: {reason}'
    err = FailedJobError(f"Job (task=0) failed during processing with trace:\n----------------------\n{trace}\n"
                         "----------------------\nYou can check full logs with 'job.stderr(0)' and "
                         "'job.stdout(0)'or at paths:\n  - /x/1_0_log.err\n  - /x/1_0_log.out")

    def boom():
        raise err

    no_files = SimpleNamespace(job_dir="/nonexistent/job")  # no summary.json job_end: the exception decides
    ok, msg = job_outcome(SimpleNamespace(handle=SimpleNamespace(result=boom), job=no_files))
    assert not ok and msg == f"RuntimeError: {reason}"
    ok, msg = job_outcome(SimpleNamespace(handle=SimpleNamespace(result=lambda: {"exit_code": 0, "message": "m"}),
                                          job=no_files))
    assert ok and msg == "m"


def test_server_cross_check_counts_the_window_between_two_scrapes():
    from launcher.bench.metrics import parse_prometheus_text

    before = parse_prometheus_text("vllm:spec_decode_num_drafts_total{engine=\"0\"} 10\n"
                                   "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\"} 25\n")
    after = parse_prometheus_text("vllm:spec_decode_num_drafts_total{engine=\"0\"} 60\n"
                                  "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\"} 169\n")
    got = ka.server_cross_check(before, after, get_engine("vllm").metrics)
    assert got == {"server_al": round(1 + 144 / 50, 4), "server_drafts": 50, "server_accepted": 144}


@pytest.mark.parametrize("before,after", [(None, {}), ({}, None), ({}, {})])
def test_server_cross_check_without_counters_says_none(before, after):
    assert ka.server_cross_check(before, after, get_engine("vllm").metrics)["server_al"] is None


def test_one_line_shows_the_servers_al_beside_the_probes():
    entries = [dict(ka.verdict([stats([0, 0, 0, 16])], 3, 0.7), server_al=3.5)]
    line = ka.one_line(ka.probe_verdict(entries, 3))
    assert "T=0.7 FAIL" not in line and "server 3.50" in line


def _gpu_t07_entry():
    """The H200's T=0.7 probe (vLLM 0.26, probabilistic drafting): histogram counted from
    stream chunks (its total [1, 0, 5, 59]; the split over the 4 requests is ours) and the
    server's counters over the same requests."""
    e = ka.verdict([stats([1, 0, 1, 15]), stats([0, 0, 1, 15]), stats([0, 0, 2, 14]), stats([0, 0, 1, 15])], 3, 0.7)
    e.update({"server_al": 3.9692, "server_drafts": 65, "server_accepted": 193})
    return e


def test_gpu_numeric_rejections_at_t_gt_0_pass_within_the_tolerance():
    e = _gpu_t07_entry()
    assert not e["passed"]  # two short steps in one request
    e = ka.within_numeric_tolerance(e, 3)
    assert e["passed"] and e["rejected_share"] == round(1 - 193 / 195, 4) and e["within_tolerance"] == 0.05
    assert "T=0.7 pass within 5% (1.0% rejected)" in ka.one_line(ka.probe_verdict([e], 3))


def test_the_cpu_defect_is_far_outside_the_tolerance():
    e = ka.verdict([stats([60, 4, 0, 0])], 3, 0.7)
    e.update({"server_al": 1.0625, "server_drafts": 64, "server_accepted": 4})
    assert not ka.within_numeric_tolerance(e, 3)["passed"]


def test_t0_stays_exact_and_no_counters_keeps_the_per_request_verdict():
    e = ka.verdict([stats([0, 0, 2, 14]), stats([0, 0, 2, 14])], 3, 0.0)
    e.update({"server_al": 3.99, "server_drafts": 32, "server_accepted": 95})
    assert not ka.within_numeric_tolerance(e, 3)["passed"]
    e2 = ka.verdict([stats([0, 0, 2, 14])], 3, 0.7)
    e2.update({"server_al": None})
    assert ka.within_numeric_tolerance(dict(e2), 3)["passed"] == e2["passed"] is False


def test_the_recorded_h200_probe_passes_at_t07_within_the_tolerance_and_exactly_at_t0():
    from pathlib import Path
    import json

    rec = json.loads((Path(__file__).resolve().parents[1] / "data" / "h200_vllm026" / "known_answer.json").read_text())
    by_t = {e["temperature"]: ka.within_numeric_tolerance(dict(e, passed=e["passed"]), 3) for e in rec["temperatures"]}
    assert by_t[0.0]["passed"] and by_t[0.0]["server_al"] == 4.0 and "within_tolerance" not in by_t[0.0]
    assert rec["temperatures"][1]["passed"] is False  # as recorded, before the tolerance
    assert by_t[0.7]["passed"] and by_t[0.7]["rejected_share"] == pytest.approx(2 / 195, abs=1e-4)
