#!/usr/bin/env python3
"""Real-GPU check of launcher/runtime/telemetry.py (a plain script, not a pytest test).

    python tests/benchmarks/gpu_telemetry_check.py [--gib 4] [--hold-s 3] [--interval-s 0.5] [--out DIR]

Needs only pynvml (nvidia-ml-py) and torch; it imports launcher/runtime/telemetry.py
from this checkout, so the package need not be installed.

What it does, on cuda:0:
  1. starts GpuMemorySampler: its baseline sample is taken here, BEFORE torch
     creates a CUDA context;
  2. creates the CUDA context (a 1-element tensor), waits, and reads GPU 0's
     used memory: the "post-context" reading;
  3. allocates exactly --gib GiB with torch.empty(..., dtype=torch.uint8),
     holds it --hold-s seconds while the sampler runs, frees it;
  4. stops the sampler, writes gpu_telemetry.json (to --out, else $OUT, else a
     temp dir) and prints the figures.

Two comparisons are printed for GPU 0:
  raw       = peak - baseline          (includes the CUDA context, ~0.5 GiB)
  alloc     = peak - post-context      (the allocation alone)
and the check passes (exit 0) when the reported peak covers the allocation
within 5%: raw >= (1 - 0.05) * ALLOC, and alloc is within +-5% of ALLOC.
Exit 1 if it does not, 2 if there is no NVML/CUDA GPU to check on.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from launcher.runtime.telemetry import GIB, GpuMemorySampler  # noqa: E402

TOLERANCE = 0.05


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=4.0, help="allocation size in GiB (default 4)")
    ap.add_argument("--hold-s", type=float, default=3.0, help="seconds to hold the allocation")
    ap.add_argument("--interval-s", type=float, default=0.5, help="sampling interval")
    ap.add_argument("--out", default=None, help="folder for gpu_telemetry.json")
    args = ap.parse_args()

    alloc_bytes = int(args.gib * GIB)
    sampler = GpuMemorySampler(interval_s=args.interval_s, kv_cache_cap_bytes=None)
    sampler.start()  # baseline sample: before torch touches CUDA
    if not sampler.report()["available"]:
        sampler.stop()
        print(f"NVML unavailable: {sampler.report()['reason']}")
        return 2

    import torch  # importing torch does not create a CUDA context

    if not torch.cuda.is_available():
        sampler.stop()
        print("torch sees no CUDA device")
        return 2

    # The sampled GPUs are NVML indices; find the one that is cuda:0.
    gpus = sampler.report()["gpus"]
    pos = 0
    try:
        cuda_uuid = "GPU-" + str(torch.cuda.get_device_properties(0).uuid)
        pos = next(i for i, g in enumerate(gpus) if g["uuid"] == cuda_uuid)
    except Exception:
        pass  # fall back to the first sampled GPU

    t0 = time.monotonic()
    torch.zeros(1, device="cuda:0")  # create the CUDA context
    torch.cuda.synchronize()
    time.sleep(max(1.0, 2 * args.interval_s))
    post_ctx = sampler.current_used_bytes()[pos]

    x = torch.empty(alloc_bytes, dtype=torch.uint8, device="cuda:0")
    torch.cuda.synchronize()
    during = sampler.current_used_bytes()[pos]
    reserved = torch.cuda.memory_reserved(0)
    time.sleep(args.hold_s)
    del x
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    time.sleep(max(0.5, args.interval_s))
    after_free = sampler.current_used_bytes()[pos]
    sampler.stop()
    elapsed = time.monotonic() - t0

    report = sampler.report()
    out_dir = Path(args.out or os.environ.get("OUT") or tempfile.mkdtemp(prefix="gpu_telemetry_"))
    path = sampler.write_report(out_dir / "gpu_telemetry.json")

    g = report["gpus"][pos]
    baseline = g["baseline_used_gib"]
    peak = g["peak_used_gib"]
    post_ctx_gib = post_ctx / GIB
    alloc_gib = alloc_bytes / GIB
    raw = peak - baseline
    alloc = peak - post_ctx_gib
    raw_err = (raw - alloc_gib) / alloc_gib
    alloc_err = (alloc - alloc_gib) / alloc_gib

    print(json.dumps(report, indent=2))
    print(f"report written to {path}")
    print(f"GPU {g['index']} (cuda:0): {g['name']}  uuid {g['uuid']}  total {g['total_gib']:.2f} GiB")
    print(f"driver {report['driver_version']}  NVML {report['nvml_version']}  "
          f"memory query {report['memory_info_version']}  torch {torch.__version__}")
    print(f"samples {report['samples']} (errors {report['sample_errors']}) every {args.interval_s} s "
          f"over {report['duration_s']:.2f} s (torch part {elapsed:.2f} s)")
    print(f"allocation            {alloc_gib:.4f} GiB  (torch memory_reserved {reserved / GIB:.4f} GiB)")
    print(f"baseline (pre-CUDA)   {baseline:.4f} GiB")
    print(f"post-context reading  {post_ctx_gib:.4f} GiB  (context cost {post_ctx_gib - baseline:.4f} GiB)")
    print(f"reading while held    {during / GIB:.4f} GiB")
    print(f"reading after free    {after_free / GIB:.4f} GiB")
    print(f"peak (sampled)        {peak:.4f} GiB")
    print(f"raw   peak - baseline      = {raw:.4f} GiB  vs {alloc_gib:g} GiB: {raw_err:+.2%}")
    print(f"alloc peak - post-context  = {alloc:.4f} GiB  vs {alloc_gib:g} GiB: {alloc_err:+.2%}")

    covers = raw >= (1 - TOLERANCE) * alloc_gib
    accurate = abs(alloc_err) <= TOLERANCE
    ok = covers and accurate
    print(f"peak covers the allocation (raw >= {1 - TOLERANCE:.0%}): {'yes' if covers else 'NO'}; "
          f"allocation measured within {TOLERANCE:.0%}: {'yes' if accurate else 'NO'}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
