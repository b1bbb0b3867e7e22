"""The target as its own draft, for real: every draft token is accepted
(AL = k + 1 per verify step) and the lossless check matches every output."""
from __future__ import annotations

import json

from launcher.results import read_point
import subprocess

from tests.support import stack


def test_identical_draft_accepts_everything_and_is_lossless(real_stack, tmp_path):
    out = tmp_path / "results"
    p = subprocess.run(stack.launcher_cmd("draft=tiny_identical", f"output_dir={out}", "bench.lossless.enabled=true",
                                          "bench.lossless.num_prompts=6", "sweep.temperatures=[0]",
                                          "sweep.concurrencies=[1]", "sweep.datasets=[mtbench]"),
                       cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    job = next(d for d in (out / "smoke").iterdir() if (d / "job.json").exists())
    res = read_point(job / "mtbench" / "t0_c1")
    assert res.server_al == 4.0  # k = 3: every step accepts all 3 drafts
    assert res.prometheus_al == 4.0
    hist = {int(k): v for k, v in res.acceptance["Acceptance_Length_Histogram"].items() if v}
    # prefill chunks (1) and full steps (k + 1); only a turn's last step can be cut by EOS/max_tokens
    turns = res.acc_ext["num_turns"]
    assert sum(v for k, v in hist.items() if k not in (1, 4)) <= turns and hist[4] > turns
    res = json.loads((job / "lossless" / "result.json").read_text())
    # 6 prompts although the sweep itself takes only sweep.num_requests=4 questions
    assert res["passed"] and res["matches"] == res["prompts"] == 6, res
    # the smoke recipe's known-answer probe (T=0 only here) passes and serves as the lossless reference
    ka = json.loads((job / "known_answer.json").read_text())
    assert ka["passed"] and ka["temperatures"][0]["al"] == 4.0, ka
