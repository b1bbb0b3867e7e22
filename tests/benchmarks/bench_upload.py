"""Benchmark: upload_to_s3 against a sequential upload_file loop, same server, same files.

Not a pytest test.  Starts moto_server as its own process on 127.0.0.1, writes
a sweep of RUNS runs x FILES_PER_RUN small result files, then, for each
repetition and with fresh buckets each time, times

  * baseline: one boto3 client, ``client.upload_file`` for every file in turn,
    to the same keys the tool uses (no validation, no manifest);
  * tool: ``upload_to_s3 SWEEP s3://bucket/bench`` in this process (validation,
    hashing, destination listing, parallel transfers, manifests and all);
  * tool-cli (once): the console script as a subprocess, Python start-up included.

Usage: python tests/benchmarks/bench_upload.py [--runs 100] [--files-per-run 10] [--repeat 3] [--jobs 16]
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
sys.path.insert(0, str(HERE.parent / "upload"))  # the sample-run writer the upload tests use

import upload_samples  # noqa: E402

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
    args = ap.parse_args()
    os.environ.update(CREDS)

    with tempfile.TemporaryDirectory() as tmp, moto_server() as (url, server_pid):
        sweep, pairs = write_sweep(Path(tmp), args.runs, args.files_per_run)
        total_bytes = sum(p.stat().st_size for p, _ in pairs)
        print(f"{args.runs} runs, {len(pairs)} files, {total_bytes:,} bytes; moto_server at {url}; "
              f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")
        s3 = client(url)
        base_times, tool_times, server_cpu = [], [], {"baseline": [], "tool": []}
        for rep in range(args.repeat):
            b_base, b_tool = f"bench-base-{rep}", f"bench-tool-{rep}"
            s3.create_bucket(Bucket=b_base)
            s3.create_bucket(Bucket=b_tool)
            order = ("baseline", "tool") if rep % 2 == 0 else ("tool", "baseline")
            for which in order:
                cpu0 = cpu_seconds(server_pid)
                if which == "baseline":
                    t0 = time.perf_counter()
                    for path, key in pairs:
                        s3.upload_file(str(path), b_base, key)
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
            got_base, got_tool = count_objects(s3, b_base), count_objects(s3, b_tool)
            if got_base != len(pairs) or got_tool != len(pairs) + args.runs:
                raise SystemExit(f"object counts wrong: baseline {got_base}, tool {got_tool}")
            print(f"  repetition {rep + 1}: baseline {base_times[-1]:.2f} s, tool {tool_times[-1]:.2f} s "
                  f"({base_times[-1] / tool_times[-1]:.2f}x)")

        s3.create_bucket(Bucket="bench-cli")
        t0 = time.perf_counter()
        subprocess.run([str(Path(sys.executable).parent / "upload_to_s3"), str(sweep), "s3://bench-cli/bench",
                        "--endpoint-url", url, "--jobs", str(args.jobs)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cli_time = time.perf_counter() - t0

        base_med, tool_med = statistics.median(base_times), statistics.median(tool_times)
        print()
        print(f"{'':34}{'median':>9}{'best':>9}{'server CPU':>12}")
        print(f"{'sequential upload_file loop':34}{base_med:8.2f}s{min(base_times):8.2f}s"
              f"{statistics.median(server_cpu['baseline']):11.2f}s")
        print(f"{'upload_to_s3 (in-process)':34}{tool_med:8.2f}s{min(tool_times):8.2f}s"
              f"{statistics.median(server_cpu['tool']):11.2f}s")
        print(f"{'upload_to_s3 (CLI, incl. start-up)':34}{cli_time:8.2f}s")
        print(f"speed-up (median): {base_med / tool_med:.2f}x; (CLI subprocess): {base_med / cli_time:.2f}x; "
              f"goal: 4x")
        print(f"{len(pairs)} objects + {args.runs} manifests uploaded by the tool, {len(pairs)} by the loop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
