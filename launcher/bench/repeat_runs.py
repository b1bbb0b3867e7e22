"""A point measured several times against the server (sweep.repeats), on one or several starts
of it (sweep.server_starts): every repeat's figures into the point's repeats.json
(launcher.results.repeats.record), the point's files from the repeat it holds, the other
repeats' AIPerf folders kept beside them (docs/repeats.md)."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Optional

from launcher.bench import aiperf_runner as ar
from launcher.bench.bench_run import server_start
from launcher.bench.run_context import PointGroup
from launcher.bench.metrics import RecordError
from launcher.bench.point_files import finish_point, measure
from launcher.bench.point_configuration import job_dir, requests_window
from launcher.results import EXTENSION_KEY
from launcher.results.goodput import point_goodput
from launcher.results.repeats import record as repeat_record
from launcher.results.validity import repeat_problems
from launcher.runtime import machine
from launcher.runtime.files import write_json_atomic

_STAGED = ".earlier_starts"  # the earlier starts' AIPerf folders while this start's repeats join them


def _measure_repeats(g: PointGroup, o, point_dir: Path, runs: list, per: list, srcs: list) -> tuple[Optional[str], list]:
    """Each run's figures appended to ``per`` (its folder to ``srcs``), numbered after the
    earlier starts' repeats: (why one could not be read or None, each repeat's goodput)."""
    ctx, slo, slo_repeats = g.ctx, g.ctx.slo, []
    spec_cfg = ctx.spec_cfg
    for r, (name, dst, _) in enumerate(runs, len(per) + 1):
        try:
            acc, tim, ok = measure(ctx, g.spec, g.sent(o.concurrency), dst / "profile_export.jsonl", dst, spec_cfg)
        except (RecordError, ValueError, OSError) as e:
            return f"repeat {r} ({name}): results unreadable: {str(e).splitlines()[0]}", slo_repeats
        ext = acc.get(EXTENSION_KEY) or {}
        if slo is not None:  # each repeat's goodput: whether the repeats agree on the SLO
            good = point_goodput(dst, slo) or {}
            slo_repeats.append({"repeat": r, "goodput_rps": good.get("goodput_rps"),
                                "good_output_tps": good.get("good_output_tps"), "meets_slo": good.get("meets_slo")})
        per.append({"repeat": r, "phase": name, "server_start": server_start(),
                    **repeat_record.repeat_figures(acc, tim, ok),
                    "machine": machine.compact(requests_window(ok, job_dir(point_dir))),
                    # the repeat's own verify steps, for the run's /metrics cross-check
                    "num_spec_steps": ext.get("num_spec_steps"),
                    "num_accepted_draft_tokens": ext.get("num_accepted_draft_tokens")})
        srcs.append(dst)
    return None, slo_repeats


def finish_repeats(g: PointGroup, o, runs: list) -> Optional[str]:
    """A point measured ``len(runs)`` times (``runs``: (phase, AIPerf folder, why missing)).
    Every repeat's figures go to ``repeats.json``; specdec_bench's files are written from
    one repeat (launcher.results.repeats.record.HOLD_RULE), whose AIPerf folder becomes the
    point's ``aiperf/``; the others are kept in ``aiperf_repeats/r<i>/``. A missing or
    unreadable repeat fails the point. Returns why it failed, or None."""
    missing = next((why for _, _, why in runs if why is not None), None)
    point_dir = g.save_dir / o.dir
    per, srcs, origins = earlier_starts(point_dir)  # sweep.server_starts: the earlier starts' repeats join these
    slo_repeats: list = []
    if missing is None:
        missing, slo_repeats = _measure_repeats(g, o, point_dir, runs, per, srcs)
    if missing is not None:
        for staged, origin in zip(srcs, origins):  # the earlier starts' folders go back where they were
            ar.move_artifacts(staged, origin)
        o.status, o.reason = "failed", missing
        g.progress.point_done(o.dir, o.status, o.reason)
        return missing
    held = repeat_record.held_repeat(per)
    point_dir.mkdir(parents=True, exist_ok=True)
    others = point_dir / repeat_record.REPEATS_ARTIFACTS
    shutil.rmtree(others, ignore_errors=True)
    for i, src in enumerate(srcs):
        if i != held:
            ar.move_artifacts(src, others / f"r{i + 1}")
    doc = repeat_record.build(per, held, float(g.ctx.bench.noisy_rel_mad))
    write_json_atomic(point_dir / repeat_record.REPEATS_FILE, doc)
    o.slo_repeats = slo_repeats or None  # process_point adds them to the point's goodput
    o.repeat_problems = repeat_problems(per, g.ctx.bench.gates.max_failed_fraction) or None
    finish_point(g, o, srcs[held], None)
    shutil.rmtree(point_dir / _STAGED, ignore_errors=True)
    o.values["repeats"] = repeat_record.compact(doc)
    return None if o.status == "complete" else o.reason


def earlier_starts(point_dir: Path) -> tuple[list, list, list]:
    """The repeats this point holds from earlier starts of the server (sweep.server_starts), with
    their AIPerf folders moved aside (the held one from ``aiperf/``, the others from
    ``aiperf_repeats/``) so this start's repeats can join them: (per-repeat rows, folders, where
    each folder was). On the first start, or without repeats.json: nothing."""
    start = server_start()
    doc = repeat_record.read(point_dir) if start > 1 else None
    if not doc:
        return [], [], []
    held = (doc.get("files_hold") or {}).get("repeat")
    staged = point_dir / _STAGED
    shutil.rmtree(staged, ignore_errors=True)
    per, srcs, origins = [], [], []
    for row in doc.get("per_repeat") or []:
        if int(row.get("server_start") or 1) >= start:
            continue
        src = point_dir / "aiperf" if row.get("repeat") == held else \
            point_dir / repeat_record.REPEATS_ARTIFACTS / f"r{row.get('repeat')}"
        if not (src / "profile_export.jsonl").exists():
            continue
        dst = staged / f"r{len(per) + 1}"
        ar.move_artifacts(src, dst)
        per.append({**row, "repeat": len(per) + 1, "server_start": int(row.get("server_start") or 1)})
        srcs.append(dst)
        origins.append(src)
    return per, srcs, origins
