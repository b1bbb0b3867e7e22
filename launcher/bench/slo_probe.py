"""The max load under the SLO on the running server (docs/slo.md): after the sweep's
points of a dataset at a temperature, extra points (AIPerf runs with the sweep's repeats)
at the concurrencies launcher.results.slo_search picks, until the boundary is placed."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from launcher.bench.point_outcome import PointOutcome
from launcher.bench.resume import resume
from launcher.results.slo_search import max_load, next_probe


def verdict(o) -> Optional[str]:
    """A measured point's verdict on the SLO ("met", "failed", "noisy"), None without figures."""
    if o.status not in ("complete", "skipped"):
        return None
    return (o.values.get("goodput") or {}).get("verdict")


def search(ctx, datasets: dict, outcomes: list, save_dir: Path, progress, run_group: Callable,
           flush: Callable[[], None]) -> Optional[dict]:
    """Probe each (dataset, temperature) of ``outcomes`` (appending the probe points to it);
    returns summary.json's ``slo`` block, None without an SLO. ``ctx``: launcher.bench.run_context.PointContext."""
    slo, raw = ctx.slo, ctx.bench.slo
    if slo is None:
        return None
    allowed = int(raw.get("max_search_probes", 3)) if raw.get("search", True) else 0
    groups: dict = {}
    for o in outcomes:
        groups.setdefault((o.dataset, o.temperature), []).append(o)
    out = {"slo": slo.to_dict(), "description": slo.describe(), "max_search_probes": allowed, "max_load": []}
    for (ds, temp), group in groups.items():
        probes = 0
        while probes < allowed:
            c = next_probe({o.concurrency: verdict(o) for o in group})
            if c is None or any(o.concurrency == c for o in group):
                break
            o = PointOutcome(ds, temp, c, search_probe=True)
            group.append(o)
            outcomes.append(o)
            probes += 1
            if not resume([o], save_dir, ctx.bench):  # a rerun: this probe is on disk, complete
                continue
            progress.total += 1
            spec, questions = datasets[ds]
            print(f"SLO search {ds} T={temp:g}: probing concurrency {c}", flush=True)
            run_group(ctx, spec, questions, ds, temp, [o], save_dir, progress)
            flush()
        res = max_load({o.concurrency: verdict(o) for o in group})
        out["max_load"].append({"dataset": ds, "temperature": temp, "probes": probes,
                                "probed": sorted(o.concurrency for o in group if o.search_probe),
                                **res})
        print(f"SLO {slo.describe()}: {ds} T={temp:g}: max concurrency {res['max_concurrency']} "
              f"({res['note']})", flush=True)
    return out
