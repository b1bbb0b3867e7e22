"""A GPU's energy over a window, from the GPU's own energy counter.

NVML's ``nvmlDeviceGetTotalEnergyConsumption`` counts the millijoules a GPU has used since its
driver loaded (Volta and later). The node's machine sampler reads it in every sample
(launcher.runtime.machine, ``energy_mj``), so the energy of any window is the counter at its end
minus the counter at its start, each read off the line between the two samples around it. Where
the samples do not reach both ends (the sampler stopped, or started late), the mean power over the
part they cover stands for the rest, and ``covered_share`` says how much that was. Pure, standard
library only.
"""
from __future__ import annotations

from typing import Optional, Sequence

Reading = tuple[float, float]  # (wall-clock s, counter mJ)


def counter_at(readings: Sequence[Reading], t: float) -> Optional[float]:
    """The counter (mJ) at ``t``, on the straight line between the readings around it; None
    outside the readings. ``readings`` sorted by time."""
    for (ta, ea), (tb, eb) in zip(readings, readings[1:]):
        if ta <= t <= tb:
            return ea if tb == ta else ea + (eb - ea) * (t - ta) / (tb - ta)
    if readings and readings[-1][0] == t:
        return readings[-1][1]
    return None


def window_energy(readings: Sequence[Reading], t0: float, t1: float) -> Optional[dict]:
    """``{"energy_j", "covered_share"}`` of one GPU over [t0, t1] from its counter readings, or None
    when fewer than two readings overlap the window, or the counter went back (a driver reload)."""
    pts = sorted((float(t), float(e)) for t, e in readings if isinstance(e, (int, float)))
    if len(pts) < 2 or t1 <= t0:
        return None
    if any(b[1] < a[1] for a, b in zip(pts, pts[1:])):
        return None
    a, b = max(t0, pts[0][0]), min(t1, pts[-1][0])
    if b <= a:
        return None
    ca, cb = counter_at(pts, a), counter_at(pts, b)
    if ca is None or cb is None:
        return None
    return {"energy_j": round((cb - ca) / 1000.0 * (t1 - t0) / (b - a), 3),
            "covered_share": round((b - a) / (t1 - t0), 3)}
