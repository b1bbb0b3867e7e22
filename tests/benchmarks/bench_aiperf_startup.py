"""AIPerf's own start-up per process, and which of its options shorten it.

One `aiperf profile --config` run of a single 8-token request (one profiling phase, the
config the phases mode writes) per variant; start-up = wall - benchmark duration. The
variants change one runtime option at a time, then all together: worker processes,
record processors, the server-metrics scrape (and its end-of-run flush wait). Each is run
REPEATS times, interleaved, against one server; the median and the ratio to the default
are printed.

Usage: .venv/bin/python tests/benchmarks/bench_aiperf_startup.py [--url URL] [--repeats 3]
(about 2-3 min on 2 idle cores; a server is started unless --url is given)
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

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from launcher.bench import aiperf_runner as ar  # noqa: E402
from tests.support import stack  # noqa: E402

VARIANTS = {  # name -> (runtime overrides, benchmark overrides, env overrides)
    "default (as the phases mode runs it)": ({}, {}, {}),
    "workers=1": ({"workers": 1}, {}, {}),
    "recordProcessors=1": ({"recordProcessors": 1}, {}, {}),
    "no server-metrics scrape": ({}, {"serverMetrics": {"enabled": False}}, {}),
    "no server-metrics flush wait": ({}, {}, {"AIPERF_SERVER_METRICS_COLLECTION_FLUSH_PERIOD": "0"}),
    "all of the above": ({"workers": 1, "recordProcessors": 1}, {"serverMetrics": {"enabled": False}},
                         {"AIPERF_SERVER_METRICS_COLLECTION_FLUSH_PERIOD": "0"}),
}


def one_run(url: str, tmp: Path, i: int, runtime: dict, bench: dict, env_over: dict) -> float:
    art = tmp / f"art{i}"
    inp = tmp / "one.jsonl"
    inp.write_text(json.dumps({"session_id": "x", "turns": [{"text": "Hello", "output_length": 8,
                                                              "extra": {"temperature": 0.0}}]}) + "\n")
    cfg = ar.multiphase_config(model="tiny", url=url, tokenizer=str(stack.TARGET), input_file=inp, artifact_dir=art,
                               phases=[ar.PhasePlan("p1_c1", 1, 1)], request_timeout_s=60)
    cfg["benchmark"]["runtime"].update(runtime)
    cfg["benchmark"].update(bench)
    path = tmp / f"cfg{i}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = {**ar.aiperf_env(str(stack.TARGET)), **env_over}
    t = time.time()
    p = subprocess.run(ar.multiphase_argv(str(stack.AIPERF), path), env=env, capture_output=True, text=True)
    wall = time.time() - t
    if p.returncode != 0:
        raise SystemExit(f"aiperf failed: {(p.stdout + p.stderr)[-2000:]}")
    dur = ar.aiperf_benchmark_duration(art / "phases" / "p1_c1") or ar.aiperf_benchmark_duration(art) or 0.0
    return wall - dur


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url")
    ap.add_argument("--repeats", type=int, default=3)
    opts = ap.parse_args()
    stack.require_stack()
    tmp = Path(tempfile.mkdtemp(prefix="aiperf_startup_"))
    srv = None if opts.url else stack.start_server(stack.spec_flags(), tmp / "server.log")
    url = opts.url or srv.url
    got: dict[str, list[float]] = {k: [] for k in VARIANTS}
    try:
        i = 0
        for _ in range(opts.repeats):
            for name, (rt, bench, env) in VARIANTS.items():
                got[name].append(one_run(url, tmp, i, rt, bench, env))
                i += 1
    finally:
        if srv:
            srv.stop()
    base = statistics.median(got[next(iter(VARIANTS))])
    print(f"AIPerf start-up per process (median of {opts.repeats}; wall - benchmark duration of 1 request):")
    for name, xs in got.items():
        m = statistics.median(xs)
        print(f"  {name:40s} {m:5.2f} s  ({m / base:.2f} x default; runs {', '.join(f'{x:.2f}' for x in xs)})")


if __name__ == "__main__":
    main()
