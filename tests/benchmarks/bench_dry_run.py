"""Benchmark: wall time of `python -m launcher ... dry_run=true` on a 200-point recipe.

Not a pytest test. Times RUNS runs (median) of the dry run as a subprocess,
Python start-up included, on qwen3_dflash on GB300 with a client sweep of
4 datasets x 5 temperatures x 10 concurrencies = 200 points (checked against
the plan header "N client point(s)"), and, in the same session and interleaved
with it, RUNS runs of `python -c "import hydra, submitit"`: the floor any
launcher built on these two libraries pays. Prints both medians and the ratio.

Exit status 1 when the dry run's median exceeds --goal seconds (default 2.0).

Usage: python tests/benchmarks/bench_dry_run.py [--runs 5] [--goal 2.0]
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
EXPECTED_POINTS = 200
OVERRIDES = [
    "recipe=qwen3_dflash", "cluster=gb300",
    "sweep.datasets=[mtbench,specbench,speed_qualitative,speed_throughput_1k]",  # 4
    "sweep.temperatures=[0,0.25,0.5,0.75,1.0]",  # x 5
    "sweep.concurrencies=[1,2,4,8,16,32,64,128,256,512]",  # x 10 = 200
    "sweep.dataset_paths.specbench=/x/spec_bench/question.jsonl",
    "+sweep.dataset_paths.speed_throughput_1k=/x/speed_bench/throughput_1k.parquet",
    "dry_run=true",
]
HEADER = re.compile(r"^recipe \S+: (\d+) job\(s\), (\d+) client point\(s\);")


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    r = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    return time.perf_counter() - t0, r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--goal", type=float, default=2.0, help="seconds; the dry run's median must stay under it")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench_dry_run_") as tmp:
        env = {k: v for k, v in os.environ.items()
               if k not in ("CONTAINER_IMAGE", "SLURM_ACCOUNT", "SPECDEC_DATA")}
        env["SPECDEC_HOME"] = str(Path(tmp) / "home")
        launcher = [sys.executable, "-m", "launcher", *OVERRIDES, f"output_dir={tmp}"]
        floor = [sys.executable, "-c", "import hydra, submitit"]

        # One untimed warm-up of each (page cache, .pyc files), which also checks the plan.
        _, r = timed(launcher, env)
        if r.returncode != 0:
            print(f"dry run failed (exit {r.returncode}):\n{r.stderr}", file=sys.stderr)
            return 2
        m = HEADER.match(r.stdout.splitlines()[0] if r.stdout else "")
        assert m, f"no plan header in the output: {r.stdout[:200]!r}"
        assert int(m.group(2)) == EXPECTED_POINTS, f"planned {m.group(2)} points, expected {EXPECTED_POINTS}"
        assert int(m.group(1)) == 1, f"planned {m.group(1)} jobs, expected 1"
        timed(floor, env)

        t_launcher, t_floor = [], []
        for _ in range(args.runs):  # interleaved, so load changes hit both series alike
            dt, r = timed(floor, env)
            assert r.returncode == 0, r.stderr
            t_floor.append(dt)
            dt, r = timed(launcher, env)
            assert r.returncode == 0, r.stderr
            t_launcher.append(dt)

    med_l, med_f = statistics.median(t_launcher), statistics.median(t_floor)
    print(f"dry run ({int(m.group(2))} client points, {len(r.stdout.splitlines())} output lines): "
          f"median {med_l:.3f} s over {args.runs} runs  [{', '.join(f'{t:.3f}' for t in t_launcher)}]")
    print(f"python -c 'import hydra, submitit':          median {med_f:.3f} s over {args.runs} runs  "
          f"[{', '.join(f'{t:.3f}' for t in t_floor)}]")
    print(f"ratio dry run / import floor: {med_l / med_f:.2f}x")
    ok = med_l < args.goal
    print(f"goal: median < {args.goal:.1f} s: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
