"""Why a speculative point's step cost is what it is, named from what the run recorded.

One short word per cause for the results table (``WORDS``: its legend) and one sentence for
the report. The inputs are the machine records of both sides (launcher.runtime.machine:
each repeat's ``machine`` block of repeats.json, else the point's window in
configuration.json) and the serving settings that differ between the speculative server
and its baseline (launcher.speedup.like_for_like). Every threshold sits in
:data:`THRESHOLDS` (docs/speedup.md "Causes" documents them). Pure.

- **host-bound**: the speculative engine used about one core (its process tree's CPU time over
  the window, at least ``engine_cores_near_one``) while the GPU was under ``gpu_busy_pct`` busy:
  one host core, not the GPU, sets the pace (the engine core is one Python thread).
- **GPU-bound**: the GPU was at least ``gpu_busy_pct`` busy.
- **clock-capped**: a clock-event reason that slows the clock (power cap, thermal, HW slowdown:
  launcher.runtime.machine.SLOWING) was active in at least ``slowed_share`` of the samples, on
  either side (the sentence names the side).
- **steal**: the hypervisor took at least ``steal_share`` of the host's CPU time on either side.
- **unlike**: a serving setting differs between the speculative server and its baseline (a flag
  the user passed, or one the engine chose: asynchronous scheduling).
- **other-GPU** / **other-host**: the two sides ran on different GPU models / hosts.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from statistics import median
from typing import Optional, Sequence

HOST_BOUND, GPU_BOUND, CLOCK_CAPPED, STEAL, UNLIKE, OTHER_GPU, OTHER_HOST, OTHER_MACHINE = (
    "host-bound", "GPU-bound", "clock-capped", "steal", "unlike", "other-GPU", "other-host", "other-machine")
WORDS = {
    HOST_BOUND: "the engine used about one CPU core while the GPU waited (GPU under {gpu_busy_pct:g} % busy)",
    GPU_BOUND: "the GPU was busy (at least {gpu_busy_pct:g} % of the time)",
    CLOCK_CAPPED: "a power, thermal or slowdown clock-event reason held the SM clock down "
                  "(in at least {slowed_share:.0%} of the samples)",
    STEAL: "the hypervisor took CPU time from the host (steal of at least {steal_share:.0%})",
    UNLIKE: "not like for like: a serving setting differs from the baseline's",
    OTHER_GPU: "the baseline ran on another GPU model",
    OTHER_HOST: "the baseline ran on another host",
    OTHER_MACHINE: "the baseline ran on another machine of the same kind (another boot or GPU; one stage differs "
                   "by up to 12 % between such machines: docs/gpu.md)",
}


@dataclass(frozen=True)
class Thresholds:
    engine_cores_near_one: float = 0.9  # the engine's cores' worth of CPU that counts as "one core busy"
    gpu_busy_pct: float = 95.0          # GPU utilisation (NVML, median over the window) that counts as busy
    slowed_share: float = 0.5           # share of the window's samples with a slowing clock-event reason
    steal_share: float = 0.02           # the host's CPU steal share over the window

    def to_dict(self) -> dict:
        return asdict(self)


# Against the recorded H100 repeats of 2026-12-06 (docs/speedup.md, tests/data/h100_vllm026_*): the
# draft_model servers' engines used 1.06-1.24 cores with the GPU 65-89 % busy; DFlash's and the
# baselines' 0.51-0.99 cores with the GPU 100 % busy; power-capped windows had a slowing reason in
# 83-100 % of their samples, the others in 0-6 %; steal stayed at or under 0.31 %.
THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class Cause:
    word: str
    sentence: str

    def to_dict(self) -> dict:
        return asdict(self)


def legend(t: Thresholds = THRESHOLDS) -> dict[str, str]:
    """Each word with its meaning at the thresholds ``t``."""
    return {w: text.format(**t.to_dict()) for w, text in WORDS.items()}


def _med(repeats: Sequence[Optional[dict]], key: str) -> Optional[float]:
    xs = [float(r[key]) for r in repeats if r and isinstance(r.get(key), (int, float))]
    return median(xs) if xs else None


def _span(repeats: Sequence[Optional[dict]], key: str, fmt: str) -> str:
    xs = [float(r[key]) for r in repeats if r and isinstance(r.get(key), (int, float))]
    if not xs:
        return "?"
    lo, hi = min(xs), max(xs)
    return fmt.format(lo) if lo == hi else f"{fmt.format(lo)}–{fmt.format(hi)}"


def bound(spec: Sequence[Optional[dict]], t: Thresholds = THRESHOLDS) -> Optional[Cause]:
    """Host- or GPU-bound from the speculative side's repeats (launcher.runtime.machine.compact
    rows: ``engine_cores``, ``util_pct``); None without a GPU record, or when neither holds."""
    util, cores = _med(spec, "util_pct"), _med(spec, "engine_cores")
    if util is None:
        return None
    said = f"the GPU was {_span(spec, 'util_pct', '{:.0f}')} % busy and the engine used " \
           f"{_span(spec, 'engine_cores', '{:.2f}')} cores"
    if util >= t.gpu_busy_pct:
        return Cause(GPU_BOUND, f"GPU-bound: {said}.")
    if cores is not None and cores >= t.engine_cores_near_one:
        return Cause(HOST_BOUND, f"host-bound: {said}: one host core, not the GPU, set the pace.")
    return None


def clock_capped(spec: Sequence[Optional[dict]], base: Sequence[Optional[dict]], reasons: Sequence[str] = (),
                 t: Thresholds = THRESHOLDS) -> Optional[Cause]:
    """A slowing clock-event reason over most of either side's window (median over its repeats)."""
    sides = [name for name, reps in (("speculative", spec), ("baseline", base))
             if (_med(reps, "slowed_share") or 0.0) >= t.slowed_share]
    if not sides:
        return None
    capped = spec if "speculative" in sides else base
    why = "/".join(r for r in reasons if r not in ("gpu_idle", "sync_boost")) or "a slowing reason"
    return Cause(CLOCK_CAPPED, f"clock-capped ({' and '.join(sides)} side): SM clock "
                               f"{_span(capped, 'sm_mhz', '{:,.0f}')} MHz, held down by {why} in "
                               f"{_span(capped, 'slowed_share', '{:.0%}')} of the samples.")


def steal(spec: Sequence[Optional[dict]], base: Sequence[Optional[dict]], t: Thresholds = THRESHOLDS) -> Optional[Cause]:
    """CPU steal at or above the threshold in any repeat of either side."""
    worst = {name: max((float(r["cpu_steal_share"]) for r in reps
                        if r and isinstance(r.get("cpu_steal_share"), (int, float))), default=0.0)
             for name, reps in (("speculative", spec), ("baseline", base))}
    hit = [f"{name} up to {v:.1%}" for name, v in worst.items() if v >= t.steal_share]
    return Cause(STEAL, f"CPU steal: {', '.join(hit)} of the host's CPU time.") if hit else None


def unlike(differing: Sequence[str]) -> Optional[Cause]:
    """Not like for like: ``differing`` are the settings that differ (labels such as
    "+ --no-enable-prefix-caching", "--max-num-seqs 64→128")."""
    if not differing:
        return None
    return Cause(UNLIKE, "not like for like: the speculative server differs from its baseline in "
                         + "; ".join(differing) + ".")


def _host(m: Optional[dict]) -> Optional[tuple]:
    h = (m or {}).get("host") or {}
    key = (h.get("hostname"), h.get("cpu_model"), h.get("cores"))
    return key if any(key) else None


def other_machine(spec_machine: Optional[dict], base_machine: Optional[dict]) -> list[Cause]:
    """Different GPU models, then different hosts, from the two points' machine records
    (configuration.json's ``machine``); [] when either is unrecorded."""
    out = []
    g1, g2 = (spec_machine or {}).get("gpu"), (base_machine or {}).get("gpu")
    if g1 and g2 and g1 != g2:
        out.append(Cause(OTHER_GPU, f"other GPU: the speculative point ran on {g1}, its baseline on {g2}."))
    h1, h2 = _host(spec_machine), _host(base_machine)
    if h1 and h2 and h1 != h2:
        out.append(Cause(OTHER_HOST, f"other host: the speculative point ran on {h1[0]} ({h1[2]} x {h1[1]}), "
                                     f"its baseline on {h2[0]} ({h2[2]} x {h2[1]})."))
    elif not out:  # alike by name, model and cores: two guests of one kind differ by their boot and their GPUs
        m1, m2 = machine_identity(spec_machine), machine_identity(base_machine)
        if m1 and m2 and _differ(m1, m2):
            out.append(Cause(OTHER_MACHINE, f"other machine: the speculative point ran on {_named(m1)}, "
                                            f"its baseline on {_named(m2)}."))
    return out


def machine_identity(m: Optional[dict]) -> Optional[dict]:
    """What tells one machine from another of its kind, as recorded: the host's boot id and the
    GPUs' uuids (configuration.json's machine); None when neither was recorded."""
    boot = ((m or {}).get("host") or {}).get("boot_id")
    uuids = tuple((m or {}).get("gpu_uuids") or ())
    return {"boot_id": boot, "gpu_uuids": uuids} if boot or uuids else None


def same_machine(spec_machine: Optional[dict], base_machine: Optional[dict]) -> Optional[bool]:
    """Whether a point and its baseline ran on one machine: False where :func:`other_machine` names
    another GPU, host or machine; None where either side recorded neither a boot id nor GPU uuids
    (results before those records): another machine of the same kind cannot be ruled out."""
    if other_machine(spec_machine, base_machine):
        return False
    return True if machine_identity(spec_machine) and machine_identity(base_machine) else None


MACHINE_WORDS = (OTHER_GPU, OTHER_HOST, OTHER_MACHINE)  # the causes that say the baseline ran elsewhere
UNRECORDED = ("the machine of {n} point(s) or of their baseline was not recorded (no boot id or GPU uuids: "
              "results before those records), so whether they ran on one machine cannot be told")


def _differ(a: dict, b: dict) -> bool:
    """Two recorded machines differ where both recorded a field and it differs."""
    return any(a[k] and b[k] and a[k] != b[k] for k in ("boot_id", "gpu_uuids"))


def _named(m: dict) -> str:
    parts = ([f"boot {m['boot_id'][:8]}"] if m["boot_id"] else []) + [u[:12] for u in m["gpu_uuids"]]
    return " ".join(parts)


def causes(spec: Sequence[Optional[dict]], base: Sequence[Optional[dict]], differing: Sequence[str],
           spec_machine: Optional[dict] = None, base_machine: Optional[dict] = None,
           t: Thresholds = THRESHOLDS) -> list[Cause]:
    """Every cause that holds, in the table's order. ``spec``/``base``: each side's per-repeat machine
    rows (launcher.runtime.machine.compact); ``differing``: the serving settings that differ;
    ``spec_machine``/``base_machine``: the points' machine records (the GPU model, the host, the
    window's clock-event reasons)."""
    g = (((spec_machine or {}).get("window") or {}).get("gpus") or [None])[0] or {}
    gb = (((base_machine or {}).get("window") or {}).get("gpus") or [None])[0] or {}
    reasons = list(dict.fromkeys((g.get("reasons_seen") or []) + (gb.get("reasons_seen") or [])))
    found = [bound(spec, t), clock_capped(spec, base, reasons, t), steal(spec, base, t), unlike(differing)]
    return [c for c in found if c is not None] + other_machine(spec_machine, base_machine)


def words(cs: Sequence[dict | Cause]) -> str:
    """The causes' words for a table cell ("GPU-bound clock-capped"); "–" when none."""
    ws = [c.word if isinstance(c, Cause) else c.get("word") for c in cs]
    return " ".join(w for w in ws if w) or "–"
