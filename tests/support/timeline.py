"""Where the suite's wall time goes: each test's start and end per xdist worker, and a summary.

    SPECDEC_TEST_TIMELINE=/tmp/timeline.jsonl .venv/bin/python -m pytest   # tests/conftest.py records
    python -m tests.support.timeline /tmp/timeline.jsonl                    # per worker: busy, idle, files
    python -m tests.support.timeline /tmp/timeline.jsonl --unit-seconds tests/support/unit_seconds.json
                                            # each unit's seconds: the order the scheduler hands them out

A worker is idle between two of its tests when the scheduler (tests/support/workers.py) sends it
nothing: while a ``takes_both_cores`` unit runs on the other worker and the unit-test files have
run out, or at the end. What it idles is what the suite's wall time loses to the schedule; what
it is busy is the suite's work. (The setup of a module's fixtures counts in its first test.)
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def record_line(worker: str, nodeid: str, start: float, end: float) -> str:
    """One test's line of the timeline file."""
    return json.dumps({"worker": worker, "file": nodeid.split("::")[0], "start": start, "end": end})


def summary(rows: list[dict], min_span_s: float = 15.0, min_gap_s: float = 5.0) -> dict:
    """Per worker: its end (s from the first start), busy and idle seconds, its files' spans of at
    least ``min_span_s`` in order, and its gaps of at least ``min_gap_s``."""
    if not rows:
        return {"wall_s": 0.0, "workers": {}}
    t0 = min(r["start"] for r in rows)
    wall = max(r["end"] for r in rows) - t0
    by_worker: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_worker[r["worker"]].append(r)
    out = {}
    for w, rs in sorted(by_worker.items()):
        rs.sort(key=lambda r: r["start"])
        busy = sum(r["end"] - r["start"] for r in rs)
        spans: list[list] = []
        for r in rs:
            if spans and spans[-1][0] == r["file"]:
                spans[-1][2] = r["end"] - t0
            else:
                spans.append([r["file"], r["start"] - t0, r["end"] - t0])
        gaps = [{"after": a["file"], "at_s": a["end"] - t0, "gap_s": b["start"] - a["end"]}
                for a, b in zip(rs, rs[1:]) if b["start"] - a["end"] >= min_gap_s]
        out[w] = {"end_s": max(r["end"] for r in rs) - t0, "busy_s": busy, "idle_s": wall - busy,
                  "files": [{"file": f, "start_s": s, "end_s": e} for f, s, e in spans if e - s >= min_span_s],
                  "gaps": gaps}
    return {"wall_s": wall, "workers": out}


def unit_seconds(rows: list[dict], group_of: dict[str, str]) -> dict[str, float]:
    """Each unit of work's seconds (its tests' time, module set-up included), by the unit
    ``group_of`` gives a file (tests/support/workers.py file_groups)."""
    out: dict[str, float] = defaultdict(float)
    for r in rows:
        out[group_of.get(r["file"], r["file"])] += r["end"] - r["start"]
    return {u: round(s, 1) for u, s in sorted(out.items())}


def lines(s: dict) -> list[str]:
    out = [f"wall {s['wall_s']:.0f} s"]
    for w, d in s["workers"].items():
        out.append(f"{w}: busy {d['busy_s']:.0f} s, idle {d['idle_s']:.0f} s, ends at {d['end_s']:.0f} s")
        out += [f"  {f['start_s']:6.0f} {f['end_s']:6.0f} {f['end_s'] - f['start_s']:5.0f}  {f['file']}" for f in d["files"]]
        out += [f"  gap of {g['gap_s']:.0f} s at {g['at_s']:.0f} s after {g['after']}" for g in d["gaps"]]
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = None
    if len(args) == 3 and args[1] == "--unit-seconds":
        args, out = args[:1], Path(args[2])
    if len(args) != 1:
        print("usage: python -m tests.support.timeline TIMELINE.jsonl [--unit-seconds OUT.json]", file=sys.stderr)
        return 2
    try:
        rows = [json.loads(line) for line in Path(args[0]).read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as e:
        print(f"error: {args[0]}: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines(summary(rows))))
    if out is not None:
        from tests.support.workers import file_groups
        root = Path(__file__).resolve().parents[2]
        files = sorted({str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py")} | {r["file"] for r in rows})
        units = unit_seconds(rows, file_groups(root, files))
        out.write_text(json.dumps({"recorded": f"{args[0]}: {len(rows)} tests, wall {summary(rows)['wall_s']:.0f} s",
                                   "units": units}, indent=1) + "\n")
        print(f"unit seconds: {out} ({len(units)} units)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
