"""How often does compare call noise a change, and does it still see a real one?

False positives: M identical pairs of a small sweep (the tiny target with its noisy
draft, k=3; each run on a server of its own, started fresh as a CI run would), for
each N in --repeats: the two runs of a pair are compared with `launcher.compare`'s
rules; every regression or improvement is a false positive. Detection: M pairs of
the identical draft at k=3 (A) against the noisy draft at k=1 (B), with N=3: every
point of B should be flagged.

Every run's results stay in --out, so the judgement can be redone without measuring
again (--reuse), e.g. with another --run-floor:

  .venv/bin/python tests/benchmarks/bench_repeats_noise.py                # M=3, N=1 and 3, detection
  .venv/bin/python tests/benchmarks/bench_repeats_noise.py --pairs 4 --out /tmp/noise
  .venv/bin/python tests/benchmarks/bench_repeats_noise.py --reuse /tmp/noise --run-floor 0

It prints, per pair, which figure was flagged at which point, the summed false
positives per N, the detection count, and the between-run floor the identical pairs
imply (the relative sd of a run's mean that the repeats' own spread does not explain).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path
from statistics import mean

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support import stack  # noqa: E402

DATA = ROOT / "common" / "datasets"


def run_once(save: Path, flags: list[str], repeats: int, a) -> float:
    """A fresh server with ``flags``, one `python -m launcher.bench` sweep against it, the server stopped."""
    shutil.rmtree(save, ignore_errors=True)
    save.mkdir(parents=True)
    t = time.time()
    srv = stack.start_server(flags, save / "server.log")
    try:
        (save / "server_ready.json").write_text(json.dumps({"argv": srv.argv}))
        argv = [sys.executable, "-m", "launcher.bench", "--url", srv.url, "--model", "tiny",
                "--tokenizer", str(stack.TARGET), "--aiperf", str(stack.AIPERF),
                "--num_requests", str(a.num_requests), "--output_length", str(a.output_length),
                "--temperature", *a.temperatures, "--concurrency", *a.concurrencies,
                "--save_dir", str(save), "--repeats", str(repeats), *(["--warmup"] if a.warmup else [])]
        for ds in a.datasets:
            argv += [f"--{ds}", str(DATA / f"{ds}_sample.jsonl")]
        p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"bench failed in {save}: {p.stderr[-2000:]}")
    finally:
        srv.stop()
    return time.time() - t


def judge(a_dir: Path, b_dir: Path, run_floor: float):
    from launcher.compare.diff import IMPROVEMENT, REGRESSION, compare_runs
    from launcher.contracts.compare_thresholds import COMPARE_DEFAULTS
    from launcher.results.job_dir import load_results

    th = dataclasses.replace(COMPARE_DEFAULTS, run_floor=run_floor)
    diffs = compare_runs(load_results(a_dir), load_results(b_dir), th)
    flagged = [d for d in diffs if d.verdict in (REGRESSION, IMPROVEMENT)]
    return diffs, flagged


def what(d) -> str:
    parts = []
    if d.al_flag:
        parts.append(f"AL {d.al_rel:+.1%}")
    if d.tps_flag:
        ci = (f" CI [{d.tps_diff.lo / d.tps_a.mean:+.1%},{d.tps_diff.hi / d.tps_a.mean:+.1%}]"
              if d.tps_diff and d.tps_diff.has_interval else " (n=1)")
        parts.append(f"TPS {d.tps_rel:+.1%}{ci}")
    if d.speedup_flag:
        parts.append(f"speedup {d.speedup_rel:+.1%}")
    return f"{d.dir} {d.verdict}: " + ", ".join(parts)


def figure_flags(pairs: list[tuple[Path, Path]], floor: float, threshold: float) -> dict:
    """Had every repeated figure been judged by compare's throughput rule (beyond the threshold
    AND the interval), how many identical pairs would it flag, per (figure, concurrency)."""
    from launcher.results.repeats import record
    from launcher.stats.repeats import difference

    out: dict[tuple[str, int], list[int]] = {}
    for a_dir, b_dir in pairs:
        for f in sorted(a_dir.glob("*/t*_c*/repeats.json")):
            rel = f.parent.relative_to(a_dir)
            da, db = record.read(a_dir / rel), record.read(b_dir / rel)
            c = int(str(rel).rsplit("_c", 1)[-1])
            for key in record.FIGURES:
                sa, sb = record.figure(da, key), record.figure(db, key)
                if sa is None or sb is None or not sa.mean:
                    continue
                d = difference(sa, sb, floor)
                hit = out.setdefault((key, c), [0, 0])
                hit[1] += 1
                if d.has_interval and d.excludes_zero and abs(d.rel) > threshold:
                    hit[0] += 1
    return out


def _request_ttfts(point: Path) -> list[float]:
    """Every successful request's TTFT (s) over all the point's repeats."""
    from launcher.bench.metrics import profiling_records, read_profile_export
    from launcher.results.repeats import record

    out = []
    for export in [point / "aiperf" / "profile_export.jsonl",
                   *sorted((point / record.REPEATS_ARTIFACTS).glob("r*/profile_export.jsonl"))]:
        out += [r.ttft_ms / 1e3 for r in profiling_records(read_profile_export(export))[0] if r.ttft_ms is not None]
    return out


def alternatives(pairs: list[tuple[Path, Path]], threshold: float) -> dict:
    """False positives of other definitions on the same identical pairs: the normal 1.96 in
    place of Student's t for Output TPS, and TTFT judged on every request pooled over the
    repeats (requests as if independent samples: pseudo-replication)."""
    from launcher.results.repeats import record
    from launcher.stats.repeats import summarize

    z = pooled = n = 0
    for a_dir, b_dir in pairs:
        for f in sorted(a_dir.glob("*/t*_c*/repeats.json")):
            rel = f.parent.relative_to(a_dir)
            sa, sb = (record.figure(record.read(d / rel), "Output TPS") for d in (a_dir, b_dir))
            if sa is None or sb is None or sa.n < 2 or sb.n < 2:
                continue
            n += 1
            delta = sb.mean - sa.mean
            half = 1.96 * math.sqrt(sa.sd ** 2 / sa.n + sb.sd ** 2 / sb.n)
            z += abs(delta) > half and abs(delta / sa.mean) > threshold
            ta, tb = summarize(_request_ttfts(a_dir / rel)), summarize(_request_ttfts(b_dir / rel))
            if ta and tb and ta.n > 1 and tb.n > 1:
                d = tb.mean - ta.mean
                h = 1.96 * math.sqrt(ta.sd ** 2 / ta.n + tb.sd ** 2 / tb.n)
                pooled += abs(d) > h and abs(d / ta.mean) > threshold
    return {"points": n, "tps_normal_1.96": z, "ttft_pooled_requests": pooled}


def floor_estimate(pairs: list[tuple[Path, Path]]) -> tuple[float | None, list[float]]:
    """The between-run relative sd of a point's mean TPS implied by identical pairs:
    E[(m_b - m_a)^2] = 2 s_run^2 + s_a^2/n_a + s_b^2/n_b, all relative to m_a."""
    from launcher.compare.diff import compare_runs
    from launcher.contracts.compare_thresholds import COMPARE_DEFAULTS
    from launcher.results.job_dir import load_results

    excess, rels = [], []
    for a_dir, b_dir in pairs:
        for d in compare_runs(load_results(a_dir), load_results(b_dir), COMPARE_DEFAULTS):
            if d.tps_a is None or d.tps_b is None or not d.tps_a.mean:
                continue
            rel = (d.tps_b.mean - d.tps_a.mean) / d.tps_a.mean
            rels.append(rel)
            within = sum((s.sd or 0.0) ** 2 / s.n for s in (d.tps_a, d.tps_b)) / d.tps_a.mean ** 2
            excess.append(rel ** 2 - within)
    if not excess:
        return None, rels
    return math.sqrt(max(0.0, mean(excess) / 2)), rels


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=3, help="M: identical pairs per N, and detection pairs")
    ap.add_argument("--repeats", type=int, nargs="+", default=[1, 3], help="the N to measure false positives at")
    ap.add_argument("--detect-repeats", type=int, default=3)
    ap.add_argument("--no-detection", action="store_true")
    ap.add_argument("--no-false-positives", action="store_true", help="measure the detection pairs only")
    ap.add_argument("--warmup", action="store_true", help="a warm-up phase opens each AIPerf run (launcher.bench --warmup)")
    ap.add_argument("--datasets", nargs="+", default=["mtbench", "specbench"])
    ap.add_argument("--temperatures", nargs="+", default=["0"])
    ap.add_argument("--concurrencies", nargs="+", default=["1", "2"])
    ap.add_argument("--num-requests", dest="num_requests", type=int, default=4)
    ap.add_argument("--output-length", dest="output_length", type=int, default=32)
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench_repeats_noise"))
    ap.add_argument("--reuse", type=Path, default=None, help="judge the runs already in this folder; measure nothing")
    ap.add_argument("--run-floor", type=float, default=None,
                    help="compare's between-run floor (default: compare's own default)")
    a = ap.parse_args()
    from launcher.contracts.compare_thresholds import COMPARE_DEFAULTS

    floor = COMPARE_DEFAULTS.run_floor if a.run_floor is None else a.run_floor
    out = a.reuse or a.out
    noisy3 = stack.spec_flags(stack.DRAFT_NOISY, 3)
    plan = [] if a.no_false_positives else \
        [(f"fp_n{n}_m{m}", noisy3, noisy3, n) for n in a.repeats for m in range(1, a.pairs + 1)]
    if not a.no_detection:
        plan += [(f"detect_n{a.detect_repeats}_m{m}", stack.spec_flags(stack.DRAFT_IDENTICAL, 3),
                  stack.spec_flags(stack.DRAFT_NOISY, 1), a.detect_repeats) for m in range(1, a.pairs + 1)]
    if a.reuse is None:
        stack.require_stack()
        t0 = time.time()
        for name, fa, fb, n in plan:
            wa = run_once(out / name / "A", fa, n, a)
            wb = run_once(out / name / "B", fb, n, a)
            print(f"measured {name}: {wa:.0f} s + {wb:.0f} s", flush=True)
        print(f"measuring took {time.time() - t0:.0f} s")
    print(f"\nrun floor {floor:g}; thresholds: AL {COMPARE_DEFAULTS.al:.0%}, TPS {COMPARE_DEFAULTS.tps:.0%}, "
          f"single-run TPS {COMPARE_DEFAULTS.single_run_tps:.0%}")
    fp: dict[int, list[int]] = {}
    detected = total = 0
    for name, _, _, n in plan:
        if not (out / name / "B").is_dir():
            continue
        diffs, flagged = judge(out / name / "A", out / name / "B", floor)
        if name.startswith("fp"):
            fp.setdefault(n, []).append(len(flagged))
            print(f"{name}: {len(flagged)} false positive(s) of {len(diffs)} points")
        else:
            hit = [d for d in flagged if d.verdict == "regression"]
            detected += len(hit)
            total += len(diffs)
            print(f"{name}: {len(hit)} of {len(diffs)} points flagged as regressions")
        for d in flagged:
            print("    " + what(d))
    for n, counts in sorted(fp.items()):
        est, rels = floor_estimate([(out / nm / "A", out / nm / "B") for nm, _, _, nn in plan
                                    if nn == n and nm.startswith("fp") and (out / nm / "B").is_dir()])
        spread = f"{min(rels):+.1%} .. {max(rels):+.1%}" if rels else "-"
        print(f"N={n}: false positives {sum(counts)} over {len(counts)} identical pairs ({counts}); "
              f"TPS change between identical runs {spread}; implied between-run floor "
              f"{'-' if est is None else f'{est:.3f}'}")
        if n > 1:
            flags = figure_flags([(out / nm / "A", out / nm / "B") for nm, _, _, nn in plan
                                  if nn == n and nm.startswith("fp") and (out / nm / "B").is_dir()],
                                 floor, COMPARE_DEFAULTS.tps)
            alt = alternatives([(out / nm / "A", out / nm / "B") for nm, _, _, nn in plan
                                if nn == n and nm.startswith("fp") and (out / nm / "B").is_dir()], COMPARE_DEFAULTS.tps)
            print(f"    other definitions on the same pairs: {alt}")
            print("    each figure under the TPS rule (flagged/compared): " + ", ".join(
                f"{k} C={c} {v[0]}/{v[1]}" for (k, c), v in sorted(flags.items())))
    if total:
        print(f"detection (N={a.detect_repeats}): {detected}/{total} points flagged as regressions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
