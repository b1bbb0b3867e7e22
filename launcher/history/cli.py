"""python -m launcher.history SOURCE [--out FILE] [--endpoint-url URL] [--jobs N]

SOURCE is s3://BUCKET/PREFIX (what upload_to_s3 wrote) or a local folder of runs.
Writes one static HTML page and prints how many runs it read, and how long it took.
Exit codes: 0 the page was written, 2 unusable input (one line on stderr).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from launcher.history.page import render
from launcher.history.series import build_history
from launcher.history.run_source import SourceError, fetch


def _jobs(text: str) -> int:
    v = int(text)
    if not 1 <= v <= 256:
        raise argparse.ArgumentTypeError("between 1 and 256")
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m launcher.history",
        description="A static HTML page of every uploaded run over time: Average_AL and Output TPS per "
                    "(model, draft, method, k, dataset, T, C), regressions marked where they begin.")
    ap.add_argument("source", help="s3://BUCKET/PREFIX (upload_to_s3's destination) or a local folder of runs")
    ap.add_argument("--out", default="history.html", help="the page to write (default: history.html)")
    ap.add_argument("--endpoint-url", dest="endpoint_url", metavar="URL",
                    help="S3-compatible endpoint (default: $SPECDEC_BENCH_S3_ENDPOINT, else AWS)")
    ap.add_argument("--jobs", "-j", type=_jobs, default=32, metavar="N", help="parallel reads (default 32)")
    args = ap.parse_args(argv)

    from botocore.exceptions import BotoCoreError, ClientError  # lazy: boto is heavy; only S3 history needs it

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="specdec-history-") as mirror:
        try:
            got = fetch(args.source, Path(mirror), args.endpoint_url, args.jobs)
        except SourceError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        except (BotoCoreError, ClientError) as e:
            print(f"error: {args.source}: {str(e).splitlines()[0]} (check the bucket, the endpoint "
                  "(--endpoint-url or SPECDEC_BENCH_S3_ENDPOINT) and the credentials)", file=sys.stderr)
            return 2
        if not got.runs:
            print(f"error: {args.source}: no runs (a run holds configuration.json, timing.json or "
                  "acceptance_rate.json; on S3, with the uploader's manifest)", file=sys.stderr)
            return 2
        history = build_history(got.runs)
        took = time.monotonic() - t0
        read = (f"listed {got.objects_listed} object(s) in {got.list_s:.2f}s, read {got.files_read} file(s) "
                f"({got.bytes_read:,} bytes) in {got.read_s:.2f}s" if args.source.startswith("s3://")
                else f"found in {got.list_s:.2f}s")
        note = f"{len(got.runs)} runs read in {took:.1f}s"
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render(history, args.source, note))
    n_series = len(history.series)
    n_reg = sum(len(s.regressions) for s in history.series)
    print(f"history: {len(got.runs)} run(s) from {args.source} in {took:.2f}s ({read}); "
          f"{n_series} series, {n_reg} regression(s), {len(history.left_out)} left out"
          + (f", {len(got.incomplete)} incomplete upload(s) skipped" if got.incomplete else ""))
    for s in history.series:
        for r in s.regressions:
            print(f"REGRESSION {s.label}: begins at {r.stamp} ({r.where}): {r.why}")
    print(out.resolve())
    return 0
