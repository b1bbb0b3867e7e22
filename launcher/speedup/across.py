"""Several results folders side by side: ``python -m launcher.speedup A B ...`` (issue 50).

Each folder is one recipe's results from one machine (a lease of a GPU host). Two questions
cross folders:

* **Which drafter pays, at which acceptance.** One row per drafter configuration x k x (dataset,
  T, C) and machine: the step cost in baseline steps with its 95 % interval (= the break-even
  AL: launcher.speedup.break_even) and the speedup at each forced level the folder measured.
* **Does the figure hold on the next machine.** Where the same configuration and level ran on
  two or more machines, the between-machine spread of the per-machine means, beside each
  machine's own interval: an interval over one machine's repeats says nothing of the next one.

A machine is named by its GPUs' uuids (the job's gpu_telemetry.json), else the host's boot id
(a point's configuration.json), else the folder: two leases of hosts that all call themselves
"vm" still differ. A folder with no baseline of its own may borrow one that another folder ran
on the same machine, for the same target with the same serving settings (the run identity's
model and fingerprint): :func:`borrowable` finds them; the analysis says where each row's
baseline came from. Pure but for :func:`machine_of`'s reading of the loaded job.
"""
from __future__ import annotations

from dataclasses import dataclass
from statistics import mean
from typing import Iterable, Optional

from launcher.results.identity import is_baseline, run_identity
from launcher.results.job_dir import Job


def machine_ids(job: Job) -> set[str]:
    """What names the machine a job ran on: "gpu:<uuids>" (its gpu_telemetry.json) and
    "boot:<boot id>" (its points' host facts); empty when neither was recorded."""
    uuids = sorted(str(g.get("uuid")) for g in ((job.telemetry or {}).get("gpus") or [])
                   if isinstance(g, dict) and g.get("uuid"))
    boots = {str((((p.machine or {}).get("host")) or {}).get("boot_id") or "") for p in job.points}
    return ({"gpu:" + ",".join(uuids)} if uuids else set()) | {f"boot:{b}" for b in boots if b}


def machine_of(job: Job) -> Optional[str]:
    """The job's machine in one name: its GPUs, else its host's boot id, else None."""
    ids = sorted(machine_ids(job))  # "boot:" sorts before "gpu:"
    return next((i for i in ids if i.startswith("gpu:")), ids[0] if ids else None)


def folder_machine(jobs: Iterable[Job]) -> Optional[str]:
    """The one machine a folder's jobs ran on, by its GPUs where a job recorded them (a baseline
    job or one cut short writes no gpu_telemetry.json), else by its boot id; None when
    unrecorded or when they name several."""
    ids = set().union(*(machine_ids(j) for j in jobs)) if jobs else set()
    gpus = {i for i in ids if i.startswith("gpu:")}
    pick = gpus or ids
    return next(iter(pick)) if len(pick) == 1 else None


def same_machine(a: Iterable[Job], b: Iterable[Job]) -> bool:
    """Whether two folders' jobs ran on one machine: they share a GPU or a boot of a host."""
    ids_a = set().union(*(machine_ids(j) for j in a))
    return bool(ids_a & set().union(*(machine_ids(j) for j in b)))


def borrowable(folder_jobs: list[Job], others: dict[str, list[Job]]) -> list[Job]:
    """The baselines of other folders (name -> jobs) that this folder may pair with: run on the
    same machine as it, for a target and serving settings one of its speculative jobs has and
    none of its own baselines covers."""
    def key(j: Job) -> str:
        i = run_identity(j)
        return f"{i.model}|{i.fingerprint}"
    wanted = {key(j) for j in folder_jobs if not is_baseline(j)} - {key(b) for b in folder_jobs if is_baseline(b)}
    out = []
    for jobs in others.values():
        if wanted and same_machine(folder_jobs, jobs):
            out += [b for b in jobs if is_baseline(b) and key(b) in wanted]
    return out


@dataclass(frozen=True)
class Figure:
    """A mean with its 95 % interval over repeats (lo/hi None with one repeat) and its count."""
    mean: float
    lo: Optional[float]
    hi: Optional[float]
    n: int

    def to_dict(self) -> dict:
        return {"mean": self.mean, "lo": self.lo, "hi": self.hi, "n": self.n}

    def text(self, fmt: str = "{:.2f}") -> str:
        iv = f" [{fmt.format(self.lo)}, {fmt.format(self.hi)}]" if self.lo is not None and self.hi is not None else ""
        return fmt.format(self.mean) + iv + ("" if self.n > 1 else " (1 repeat)")


def _speedup(row: dict) -> Optional[Figure]:
    rep = row.get("throughput_repeats") or {}
    if rep.get("mean") is not None:
        return Figure(rep["mean"], rep.get("lo"), rep.get("hi"), int(rep.get("n") or 0))
    one = (row.get("speedup") or {}).get("throughput")
    return Figure(one, None, None, 1) if one else None


def _drafter(row: dict) -> str:
    return str(row.get("drafter") or row.get("draft") or row.get("job"))


def drafter_words(row: dict) -> str:
    """A comparison row's drafter with its k (once)."""
    d = str(row["drafter"])
    return d if f"k={row['k']}" in d else f"{d} k={row['k']}"


def _key(row: dict) -> tuple:
    return (_drafter(row), str((row.get("configuration") or {}).get("fingerprint") or ""), row.get("k"),
            row["dataset"], float(row["temperature"]), int(row["concurrency"]))


def comparison(folders: list[tuple[str, str, dict]]) -> dict:
    """``folders``: (folder, machine name, its launcher.speedup analysis). One row per drafter
    configuration x k x (dataset, T, C) x machine, and the between-machine spreads."""
    rows: dict[tuple, dict] = {}
    for folder, mach, res in folders:
        costs = {(str((b.get("configuration") or {}).get("fingerprint") or ""), b["k"], b["dataset"],
                  float(b["temperature"]), int(b["concurrency"])): b for b in res.get("break_even") or []}
        for r in res.get("points") or []:
            if not r.get("forced_acceptance"):
                continue
            key = _key(r) + (mach,)
            row = rows.setdefault(key, {
                "drafter": key[0], "fingerprint": key[1], "k": key[2], "dataset": key[3], "temperature": key[4],
                "concurrency": key[5], "machine": mach, "folder": folder, "levels": {}, "step_cost": None,
                "baseline": r.get("baseline_from") or "own"})
            sp = _speedup(r)
            level = r["forced_acceptance"].get("length")
            if sp is not None and level is not None:
                d = r.get("decomposition") or {}
                cost = ({"mean": d["step_cost"], "lo": d.get("lo"), "hi": d.get("hi"), "n": d.get("n")}
                        if d.get("step_cost") is not None else None)
                row["levels"][f"{float(level):g}"] = {"speedup": sp.to_dict(), "server_al": r.get("server_al"),
                                                      "step_cost": cost,
                                                      "decode_step_cost": d.get("decode_step_cost")}
            b = costs.get(key[1:6])
            if b and b.get("break_even_al") is not None:
                row["step_cost"] = {"mean": b["break_even_al"], "lo": b.get("lo"), "hi": b.get("hi"), "n": b.get("n"),
                                    "levels": [lv.get("forced") for lv in b.get("levels") or []]}
    out = sorted(rows.values(), key=lambda x: (x["drafter"], x["fingerprint"], x["k"] or 0, x["dataset"],
                                               x["temperature"], x["concurrency"], x["machine"]))
    for row in out:
        row["levels_agree"] = {fig: levels_agree(row["levels"], fig) for fig in ("step_cost", "decode_step_cost")}
    return {"rows": out, "spread": spreads(out)}


def levels_agree(levels: dict, figure: str = "step_cost") -> Optional[dict]:
    """Whether one configuration's step cost (``figure``: ``step_cost`` from the throughput, or
    ``decode_step_cost`` from the time per output token) is the same at its forced levels (forced
    acceptance changes what a step accepts, not what it computes): the costs' spread (max - min) /
    their mean and whether every pair of 95 % intervals overlaps. None with fewer than two levels'
    costs."""
    costs = [lv[figure] for lv in levels.values() if lv.get(figure)]
    if len(costs) < 2:
        return None
    means = [c["mean"] for c in costs]
    overlap = all(a.get("lo") is not None and b.get("lo") is not None and a["lo"] <= b["hi"] and b["lo"] <= a["hi"]
                  for i, a in enumerate(costs) for b in costs[i + 1:])
    return {"spread_rel": (max(means) - min(means)) / mean(means), "intervals_overlap": overlap}


def _half_rel(f: dict) -> Optional[float]:
    if f.get("lo") is None or f.get("hi") is None or not f.get("mean"):
        return None
    return (f["hi"] - f["lo"]) / 2 / f["mean"]


def spreads(rows: list[dict]) -> list[dict]:
    """Per drafter configuration x k x (dataset, T, C) x figure (the speedup at a level, the step
    cost) measured on two or more machines: each machine's mean and relative half-interval, and
    the between-machine spread (max - min) / the mean of the machines' means."""
    groups: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        base = (r["drafter"], r["fingerprint"], r["k"], r["dataset"], r["temperature"], r["concurrency"])
        for level, fig in r["levels"].items():
            groups.setdefault(base + (f"speedup at forced AL {level}",), {})[r["machine"]] = fig["speedup"]
        if r.get("step_cost"):
            groups.setdefault(base + ("step cost",), {})[r["machine"]] = r["step_cost"]
    out = []
    for key, by_machine in sorted(groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        if len(by_machine) < 2:
            continue
        means = [f["mean"] for f in by_machine.values()]
        m = mean(means)
        out.append({"drafter": key[0], "fingerprint": key[1], "k": key[2], "dataset": key[3], "temperature": key[4],
                    "concurrency": key[5], "figure": key[6], "machines": len(by_machine),
                    "per_machine": {mach: {"mean": f["mean"], "half_interval_rel": _half_rel(f), "n": f.get("n")}
                                    for mach, f in sorted(by_machine.items())},
                    "between_machines_rel": (max(means) - min(means)) / m if m else None,
                    "within_machine_rel_max": max((h for h in (_half_rel(f) for f in by_machine.values())
                                                   if h is not None), default=None)})
    return out


def machine_names(folders: list[tuple[str, Optional[str]]]) -> dict[str, str]:
    """A short name per folder's machine: M1, M2, ... in the order given (one name per machine)."""
    names: dict[str, str] = {}
    for folder, mach in folders:
        key = mach or f"folder:{folder}"
        names.setdefault(key, f"M{len(names) + 1}")
    return names


def lines(comp: dict, legend: dict[str, str]) -> list[str]:
    """The comparison as the console prints it: the machines (each with where its points were
    measured: GPU, host, one core's speed, clocks), one line per row, then the spreads."""
    where = {name: (m or {}).get("measured_on") for name, m in (comp.get("machines") or {}).items()}
    out = [f"{name} = {mach}" + (f": {where[name]}" if where.get(name) else "") for mach, name in legend.items()]
    for r in comp["rows"]:
        c = r.get("step_cost")
        cost = (Figure(c["mean"], c.get("lo"), c.get("hi"), int(c.get("n") or 0)).text() if c else "-")
        levels = ", ".join(f"AL {lv}: {Figure(**f['speedup']).text()}x" for lv, f in sorted(
            r["levels"].items(), key=lambda kv: float(kv[0])))
        borrowed = "" if r["baseline"] == "own" else f" (baseline of {r['baseline']})"
        out.append(f"{drafter_words(r)} {r['dataset']} T={r['temperature']:g} C={r['concurrency']} "
                   f"on {legend.get(r['machine'], r['machine'])}: step cost {cost} (= break-even AL); "
                   f"speedup {levels}{borrowed}")
        for fig, words in (("step_cost", "step cost"), ("decode_step_cost", "decode step cost")):
            agree = (r.get("levels_agree") or {}).get(fig)
            if not agree:
                continue
            per = ", ".join(f"AL {lv}: {Figure(**f[fig]).text()}" for lv, f in sorted(
                r["levels"].items(), key=lambda kv: float(kv[0])) if f.get(fig))
            verdict = ("the same within the intervals" if agree["intervals_overlap"]
                       else "not the same: the intervals are apart")
            out.append(f"  {words} per level: {per}; {100 * agree['spread_rel']:.1f}% apart, {verdict}")
    for s in comp["spread"]:
        per = ", ".join(f"{legend.get(m, m)} {f['mean']:.2f}" + (f" ±{100 * f['half_interval_rel']:.1f}%"
                                                                   if f["half_interval_rel"] is not None else "")
                        for m, f in s["per_machine"].items())
        out.append(f"between machines: {drafter_words(s)} {s['dataset']} T={s['temperature']:g} "
                   f"C={s['concurrency']} {s['figure']}: spread {100 * s['between_machines_rel']:.1f}% over "
                   f"{s['machines']} machines ({per})")
    return out
