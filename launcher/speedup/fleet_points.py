"""Each repeat of a point as a fleet sizes it (docs/fleet.md): its per-user decode speed, output
tokens/s per GPU, and mean power per GPU over the repeat's window, with where that power came from.

The power, per repeat's machine record (launcher.runtime.machine.compact, in repeats.json; a point
without repeats: its configuration.json's window):

- ``energy counter``: the GPUs' own energy counters over the window (NVML
  nvmlDeviceGetTotalEnergyConsumption), summed over the job's GPUs, over the window's length;
- ``power samples``: results recorded before the counter was read: the median of the power samples
  (twice a second) over the window, for each of the job's GPUs;
- none: a machine without a GPU NVML can read (the CPU stack), or results without a machine record;
  :func:`energy_absent` says why.
"""
from __future__ import annotations

from typing import Optional

from launcher.results.job_dir import Point
from launcher.results.repeats import record
from launcher.runtime.telemetry import NO_GPU_LABEL
from launcher.speedup.equal_speed import CurvePoint

COUNTER = "energy counter"
SAMPLES = "power samples"
SOURCE_WORDS = {COUNTER: "from the GPUs' energy counters over each repeat's window",
                SAMPLES: "from the power samples (the median of the samples twice a second over each repeat's "
                         "window: results recorded before the energy counter was read)"}


def _num(v) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _counter_watts(energy: Optional[list], window_s, gpus: int) -> Optional[float]:
    """Mean watts per GPU from the first ``gpus`` counters' joules over the window."""
    w = _num(window_s)
    if not energy or len(energy) < gpus or not w or any(_num(e) is None for e in energy[:gpus]):
        return None
    return sum(energy[:gpus]) / w / gpus


def repeat_power(m: Optional[dict], gpus: int) -> tuple[Optional[float], Optional[str]]:
    """(watts per GPU, source) of one repeat's machine record (machine.compact)."""
    m = m or {}
    w = _counter_watts(m.get("gpu_energy_j"), m.get("window_s"), gpus)
    if w is not None:
        return w, COUNTER
    p = _num(m.get("power_w"))  # the first GPU's median: the job's GPUs taken as alike
    return (p, SAMPLES) if p is not None else (None, None)


def window_power(window: Optional[dict], gpus: int) -> tuple[Optional[float], Optional[str]]:
    """(watts per GPU, source) of a point's configuration.json window (machine.window_summary)."""
    rows = ((window or {}).get("gpus") or [])[:gpus]
    w = _counter_watts([g.get("energy_j") for g in rows], (window or {}).get("window_s"), gpus)
    if w is not None:
        return w, COUNTER
    med = [_num((g.get("power_w") or {}).get("median")) for g in rows]
    return (sum(med) / len(med), SAMPLES) if med and None not in med else (None, None)


def gpus_of(point: Point) -> int:
    return point.num_gpus or 1


def operating(point: Point) -> list[tuple[CurvePoint, Optional[str]]]:
    """Each repeat of ``point`` as (CurvePoint, power source), in run order: repeats.json's rows, else
    the point's own files as its one repeat; [] without a per-user speed or throughput."""
    n = gpus_of(point)
    doc = record.read(point.path)
    out = []
    if doc:
        for r in doc.get("per_repeat") or []:
            tps, user = _num(r.get("Output TPS")), _num(r.get("Decode tok/s"))
            if tps and user:
                watts, src = repeat_power(r.get("machine"), n)
                out.append((CurvePoint(point.concurrency, user, tps / n, watts), src))
        return out
    tps, user = point.output_tps_per_gpu, point.decode_tps_p50
    if tps and user:
        watts, src = window_power((point.machine or {}).get("window"), n)
        out.append((CurvePoint(point.concurrency, user, tps, watts), src))
    return out


def energy_absent(point: Point) -> str:
    """Why a point has no energy figure (one sentence)."""
    m = point.machine
    gpu = (m or {}).get("gpu") or (point.configuration or {}).get("gpu")
    if gpu == NO_GPU_LABEL:
        return "no GPU on this machine that NVML can read (a CPU machine): no energy counter, no power samples"
    if m is None:
        return "no machine record (results that predate it): no energy counter, no power samples"
    return "the machine record holds neither a GPU energy counter nor power samples"
