"""Benchmark: upload_to_s3 against a sequential upload_file loop, same server, same files.

Not a pytest test.  Starts moto_server as its own process on 127.0.0.1, writes
a sweep of RUNS runs x FILES_PER_RUN small result files, then, for each
repetition and with fresh buckets each time, times

  * baseline: one boto3 client, ``client.upload_file`` for every file in turn,
    to the same keys the tool uses (no validation, no manifest);
  * tool: ``upload_to_s3 SWEEP s3://bucket/bench`` in this process (validation,
    hashing, destination listing, parallel transfers, manifests and all);
  * tool-cli (once): ``python -m upload`` as a subprocess, Python start-up included.

It also prints CPU seconds: this process (the client, all threads) and the
moto_server process.  moto_server answers each request in one Python process
(one new connection and thread per request), so its CPU time per PUT is a
floor under any client's wall time on this machine; the printed bound says
what speed-up that floor allows.

--latency-ms MS (off by default) emulates a remote endpoint: every request of
both clients sleeps MS before it is sent (a botocore before-send hook, no CPU).
It is reported separately and labelled; it is not the local figure.

Usage: python tests/benchmarks/bench_upload.py [--runs 100] [--files-per-run 10] [--repeat 3] [--jobs 16]
                                              [--latency-ms 0]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import boto3
from botocore.config import Config

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the repository root: the upload package, installed or not
sys.path.insert(0, str(HERE.parent / "upload"))  # the sample-run writer the upload tests use

import upload_samples  # noqa: E402

import upload.cli  # noqa: E402
from upload.cli import main as upload_main  # noqa: E402

CREDS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-secret", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def moto_server():
    exe = Path(sys.executable).parent / "moto_server"
    port = free_port()
    proc = subprocess.Popen([str(exe if exe.exists() else shutil.which("moto_server")), "-H", "127.0.0.1",
                             "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/moto-api/", timeout=1).read()
                break
            except OSError:
                time.sleep(0.2)
        else:
            raise SystemExit("moto_server did not start")
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def write_sweep(root: Path, runs: int, files_per_run: int) -> tuple[Path, list[tuple[Path, str]]]:
    """RUNS point folders of FILES_PER_RUN files each; returns the sweep and (file, key) pairs."""
    sweep = root / "bench_sweep"
    datasets = ["mtbench", "specbench", "speed_qualitative", "speed_throughput_1k"]
    points = [f"{datasets[i % len(datasets)]}/t0_c{i // len(datasets) + 1}" for i in range(runs)]
    base_files = 7  # what write_run writes without extras
    upload_samples.write_sweep(sweep, points, extra_files=max(files_per_run - base_files, 0))
    pairs = []
    for point in points:
        run_dir = sweep / point
        for f in sorted(p for p in run_dir.rglob("*") if p.is_file()):
            pairs.append((f, f"bench/{sweep.name}/{point}/{f.relative_to(run_dir).as_posix()}"))
    return sweep, pairs


def client(url: str, pool: int = 10):
    return boto3.client("s3", endpoint_url=url, region_name="us-east-1", config=Config(
        s3={"addressing_style": "path"}, retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=pool))


def add_latency(s3_client, ms: float):
    """Emulated network delay: sleep before every request is sent (releases the GIL, no CPU)."""
    if ms > 0:
        s3_client.meta.events.register("before-send.s3", lambda **kwargs: time.sleep(ms / 1000))
    return s3_client


def count_objects(s3, bucket: str) -> int:
    return sum(page.get("KeyCount", 0) for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--files-per-run", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--latency-ms", type=float, default=0.0,
                    help="emulate a remote endpoint: delay every request of both clients (default off)")
    args = ap.parse_args()
    os.environ.update(CREDS)
    if args.latency_ms > 0:
        real_make_client = upload.cli.make_client
        upload.cli.make_client = lambda *a, **k: add_latency(real_make_client(*a, **k), args.latency_ms)

    with tempfile.TemporaryDirectory() as tmp, moto_server() as (url, server_pid):
        sweep, pairs = write_sweep(Path(tmp), args.runs, args.files_per_run)
        total_bytes = sum(p.stat().st_size for p, _ in pairs)
        print(f"{args.runs} runs, {len(pairs)} files, {total_bytes:,} bytes; moto_server at {url}; "
              f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")
        s3 = client(url)
        timed = add_latency(client(url), args.latency_ms)  # the baseline's client
        base_times, tool_times = [], []
        server_cpu, client_cpu = {"baseline": [], "tool": []}, {"baseline": [], "tool": []}
        for rep in range(args.repeat):
            b_base, b_tool = f"bench-base-{rep}", f"bench-tool-{rep}"
            s3.create_bucket(Bucket=b_base)
            s3.create_bucket(Bucket=b_tool)
            order = ("baseline", "tool") if rep % 2 == 0 else ("tool", "baseline")
            for which in order:
                cpu0, own0 = cpu_seconds(server_pid), time.process_time()
                if which == "baseline":
                    t0 = time.perf_counter()
                    for path, key in pairs:
                        timed.upload_file(str(path), b_base, key)
                    base_times.append(time.perf_counter() - t0)
                else:
                    t0 = time.perf_counter()
                    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                        code = upload_main([str(sweep), f"s3://{b_tool}/bench", "--endpoint-url", url,
                                            "--jobs", str(args.jobs)])
                    tool_times.append(time.perf_counter() - t0)
                    if code != 0:
                        raise SystemExit(f"upload_to_s3 exited {code}")
                server_cpu[which].append(cpu_seconds(server_pid) - cpu0)
                client_cpu[which].append(time.process_time() - own0)
            got_base, got_tool = count_objects(s3, b_base), count_objects(s3, b_tool)
            if got_base != len(pairs) or got_tool != len(pairs) + args.runs:
                raise SystemExit(f"object counts wrong: baseline {got_base}, tool {got_tool}")
            print(f"  repetition {rep + 1}: baseline {base_times[-1]:.2f} s, tool {tool_times[-1]:.2f} s "
                  f"({base_times[-1] / tool_times[-1]:.2f}x)")

        cli_time = None
        if args.latency_ms <= 0:
            s3.create_bucket(Bucket="bench-cli")
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "upload", str(sweep), "s3://bench-cli/bench",
                            "--endpoint-url", url, "--jobs", str(args.jobs)], check=True,
                           cwd=HERE.parent.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            cli_time = time.perf_counter() - t0

        med = statistics.median
        base_med, tool_med = med(base_times), med(tool_times)
        label = f" [emulated +{args.latency_ms:g} ms per request]" if args.latency_ms > 0 else ""
        print()
        print(f"results{label}, {args.repeat} repetition(s):")
        print(f"{'':36}{'wall median':>12}{'wall best':>11}{'client CPU':>12}{'server CPU':>12}")
        for name, times, key in (("sequential upload_file loop", base_times, "baseline"),
                                 ("upload_to_s3 (in-process)", tool_times, "tool")):
            print(f"{name:36}{med(times):11.2f}s{min(times):10.2f}s{med(client_cpu[key]):11.2f}s"
                  f"{med(server_cpu[key]):11.2f}s")
        if cli_time is not None:
            print(f"{'upload_to_s3 (CLI, incl. start-up)':36}{cli_time:11.2f}s")
        print(f"speed-up, median wall: {base_med / tool_med:.2f}x (best: {min(base_times) / min(tool_times):.2f}x)"
              + (f"; CLI subprocess: {base_med / cli_time:.2f}x" if cli_time else "") + "; goal: 4x")
        if args.latency_ms <= 0:
            floor = med(server_cpu["tool"])
            print(f"floor: the server alone needs {floor:.2f} CPU-s for the tool's requests, so no client can "
                  f"finish faster here; largest possible speed-up vs this baseline: {base_med / floor:.2f}x")
        print(f"{len(pairs)} objects + {args.runs} manifests uploaded by the tool, {len(pairs)} by the loop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
