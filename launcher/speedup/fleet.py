"""The comparison that sizes a fleet (docs/fleet.md): each speculative server against its matched
baseline at equal per-user speed, in output tokens/s per GPU, joules per output token and dollars
per million output tokens, each with its 95 % interval over the repeats.

Per speculative job and (dataset, T), both servers' curves over C (launcher.speedup.fleet_points,
one per repeat; repeat i of every point of both sides make the i-th pair of curves) are read at
the same per-user speeds (launcher.speedup.equal_speed): each point either side measured, and the
speeds asked for (``--per-user-speed``). Per repeat pair the gain is speculative / baseline
throughput per GPU; the gains' mean and interval are launcher.stats.repeats.summarize's. Costs
need a GPU-hour price (``--gpu-hour-price`` or the recipe's ``cluster.gpu_hour_price``): without
one there is no dollar figure, never a default price.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from launcher.engines.forced_acceptance import label as forced_label
from launcher.results.job_dir import Job, Point
from launcher.speedup.equal_speed import CurvePoint, read_at, reach, usd_per_million
from launcher.speedup.fleet_points import energy_absent, operating
from launcher.stats.repeats import summarize

CLI_PRICE = "--gpu-hour-price"
RECIPE_PRICE = "the recipe's cluster.gpu_hour_price"


@dataclass(frozen=True)
class Options:
    """What the user gives: a GPU-hour price in US dollars (None: no costs) and where it came
    from, and per-user speeds (tok/s) to read both curves at besides the measured ones."""
    gpu_hour_price: Optional[float] = None
    price_source: Optional[str] = None
    per_user_speeds: tuple[float, ...] = ()


def resolve(given: Optional[Options], jobs: Sequence[Job]) -> Options:
    """The options given (the command line's), the price taken from the recipe where none was given
    (the first job spec that has one)."""
    given = given or Options()
    if given.gpu_hour_price is not None:
        return Options(float(given.gpu_hour_price), given.price_source or CLI_PRICE, tuple(given.per_user_speeds))
    recipe = next((j.spec.gpu_hour_price for j in jobs if j.spec and getattr(j.spec, "gpu_hour_price", None)), None)
    return Options(recipe, RECIPE_PRICE if recipe is not None else None, tuple(given.per_user_speeds))


def interval(values: Iterable[Optional[float]]) -> Optional[dict]:
    """mean, 95 % interval (lo, hi; None with one value) and n of the values; None without any. Every
    figure here (throughput, gain, joules, dollars) is positive, so the interval stops at 0: with two
    repeats Student's t of 12.7 can reach below it."""
    s = summarize(list(values))
    return None if s is None else {"mean": s.mean, "lo": None if s.lo is None else max(0.0, s.lo), "hi": s.hi,
                                   "n": s.n}


def _repeats(points: Sequence[Point]) -> dict[int, list[tuple[CurvePoint, Optional[str]]]]:
    return {p.concurrency: reps for p in points if (reps := operating(p))}


def _point_rows(reps: dict[int, list], price: Optional[float]) -> list[dict]:
    """Each point of one side: per-user speed, throughput per GPU, J per token and $ per million
    output tokens, each over the point's repeats."""
    out = []
    for c in sorted(reps):
        cps = [cp for cp, _ in reps[c]]
        out.append({"concurrency": c, "repeats": len(cps),
                    "per_user_tps": interval(cp.per_user_tps for cp in cps),
                    "tps_per_gpu": interval(cp.tps_per_gpu for cp in cps),
                    "joules_per_token": interval(cp.watts_per_gpu / cp.tps_per_gpu for cp in cps
                                                 if cp.watts_per_gpu is not None),
                    "usd_per_million_tokens": interval(usd_per_million(cp.tps_per_gpu, price) for cp in cps)
                    if price else None,
                    "energy_source": next((s for _, s in reps[c] if s), None)})
    return out


def _energy(reps: dict[int, list], points: Sequence[Point]) -> dict:
    """Where a side's energy figures come from, or why it has none."""
    sources = sorted({s for rs in reps.values() for _, s in rs if s})
    if sources:
        return {"source": " and ".join(sources), "absent": None}
    return {"source": None, "absent": energy_absent(points[0]) if points else "no points"}


def _side(readings: list, price: Optional[float]) -> dict:
    got = [r for r in readings if r is not None]
    return {"tps_per_gpu": interval(r.tps_per_gpu for r in got),
            "joules_per_token": interval(r.joules_per_token for r in got if r.joules_per_token is not None),
            "usd_per_million_tokens": interval(usd_per_million(r.tps_per_gpu, price) for r in got) if price else None,
            "at_least": any(r.at_least for r in got),
            "from_concurrency": sorted({c for r in got for c in r.from_concurrency}),
            "reached": len(got)}


def _kind(spec: list, base: list) -> str:
    s = [r for r in spec if r is not None]
    b = [r for r in base if r is not None]
    if not b:
        return "baseline cannot reach"
    if not s:
        return "speculative cannot reach"
    low_s, low_b = any(r.at_least for r in s), any(r.at_least for r in b)
    return {(False, False): "equal", (True, False): "at least", (False, True): "at most"}.get((low_s, low_b),
                                                                                              "not measured")


def at_speed(spec_curves: list[list[CurvePoint]], base_curves: list[list[CurvePoint]], xs: list[float],
             anchor: dict, price: Optional[float]) -> dict:
    """Both sides' i-th curves read at ``xs[i]``: each side's figures and the gain per repeat pair."""
    spec = [read_at(c, x) for c, x in zip(spec_curves, xs)]
    base = [read_at(c, x) for c, x in zip(base_curves, xs)]
    kind = _kind(spec, base)
    gains = [s.tps_per_gpu / b.tps_per_gpu for s, b in zip(spec, base) if s is not None and b is not None]
    return {"per_user_tps": sum(xs) / len(xs), "anchor": anchor, "kind": kind,
            "gain": interval(gains) if kind in ("equal", "at least", "at most") else None,
            "speculative": _side(spec, price), "baseline": _side(base, price)}


def _anchors(spec: dict, base: dict, n: int, asked: Sequence[float]) -> list[tuple[dict, list[float]]]:
    """Where to read both curves: each measured point of either side (the speed of its repeat i
    for the i-th pair), then each asked speed."""
    out = [({"side": side, "concurrency": c}, [reps[c][i][0].per_user_tps for i in range(n)])
           for side, reps in (("baseline", base), ("speculative", spec)) for c in sorted(reps)]
    return out + [({"side": "asked"}, [float(x)] * n) for x in asked]


def compare_pair(job: Job, base: Job, dataset: str, temperature: float, row: dict, opts: Options) -> Optional[dict]:
    """One speculative job against its baseline at one (dataset, T); None when a side has no curve."""
    pick = lambda j: [p for p in j.points if p.ok and p.dataset == dataset and p.temperature == temperature]  # noqa: E731
    sp, bp = pick(job), pick(base)
    s_reps, b_reps = _repeats(sp), _repeats(bp)
    if not s_reps or not b_reps:
        return None
    n = min(len(r) for r in [*s_reps.values(), *b_reps.values()])
    s_curves = [[s_reps[c][i][0] for c in sorted(s_reps)] for i in range(n)]
    b_curves = [[b_reps[c][i][0] for c in sorted(b_reps)] for i in range(n)]
    price = opts.gpu_hour_price
    readings = [at_speed(s_curves, b_curves, xs, anchor, price)
                for anchor, xs in _anchors(s_reps, b_reps, n, opts.per_user_speeds)]
    s_rows, b_rows = _point_rows(s_reps, price), _point_rows(b_reps, price)
    mean_curve = lambda rows: [CurvePoint(r["concurrency"], r["per_user_tps"]["mean"], r["tps_per_gpu"]["mean"])  # noqa: E731
                               for r in rows]
    s_reach, b_reach = reach(mean_curve(s_rows)), reach(mean_curve(b_rows))
    lo = max(s_reach["slowest"]["per_user_tps"], b_reach["slowest"]["per_user_tps"])
    hi = min(s_reach["fastest"]["per_user_tps"], b_reach["fastest"]["per_user_tps"])
    fastest_b = b_reach["fastest"]["per_user_tps"]
    return {"job": job.name, "baseline_job": base.name, "drafter": row.get("drafter") or job.name,
            "forced": forced_label(row.get("forced_acceptance")) or None, "k": row.get("k"),
            "configuration": row.get("configuration"), "dataset": dataset, "temperature": temperature,
            "repeat_pairs": n, "reach": {"speculative": s_reach, "baseline": b_reach},
            "both_cover": [lo, hi] if lo <= hi else None,
            "only_speculative_above": fastest_b if s_reach["fastest"]["per_user_tps"] > fastest_b else None,
            "at_speed": sorted(readings, key=lambda r: -r["per_user_tps"]),
            "points": {"speculative": s_rows, "baseline": b_rows},
            "energy": {"speculative": _energy(s_reps, sp), "baseline": _energy(b_reps, bp)}}


def compare(jobs: Sequence[Job], rows: list[dict], opts: Options) -> dict:
    """speedup_summary.json's ``fleet``: every speculative job against the baseline its rows were
    paired with (launcher.speedup.analysis; ``jobs``: the folder's and the borrowed baselines), at
    each (dataset, T)."""
    by_name = {j.name: j for j in jobs}
    out, missing = [], []
    for name, base_name in dict.fromkeys((r["job"], r["baseline_job"]) for r in rows):
        job, base = by_name.get(name), by_name.get(base_name)
        if job is None or base is None:
            continue
        mine = [r for r in rows if r["job"] == name and r["baseline_job"] == base_name]
        for ds, t in sorted({(r["dataset"], r["temperature"]) for r in mine}):
            c = compare_pair(job, base, ds, t, next(r for r in mine if (r["dataset"], r["temperature"]) == (ds, t)),
                             opts)
            if c is not None:
                out.append(c)
            else:
                missing.append({"job": name, "baseline_job": base_name, "dataset": ds, "temperature": t,
                                "k": mine[0].get("k"), "why": _why_no_curve(job, base, ds, t)})
    return {"gpu_hour_price": opts.gpu_hour_price, "price_source": opts.price_source,
            "per_user_speeds_asked": list(opts.per_user_speeds), "comparisons": out, "not_compared": missing}


def _why_no_curve(job: Job, base: Job, dataset: str, temperature: float) -> str:
    """Why a speculative job and its baseline have no comparison at equal per-user speed (one line)."""
    sides = [name for name, j in (("the speculative server", job), ("the baseline", base))
             if not _repeats([p for p in j.points if p.ok and p.dataset == dataset and p.temperature == temperature])]
    return (f"{' and '.join(sides) or 'a side'} has no point with a per-user decode speed (a reply that arrives in "
            "one chunk has none: its first and last tokens came together) or no throughput")
