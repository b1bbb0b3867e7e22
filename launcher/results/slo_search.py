"""The max load under the SLO on one server: which concurrency to measure next, and
what the measured points say (docs/slo.md). Pure.

Each measured concurrency has a verdict: "met" (every repeat met the SLO), "failed"
(none did), "noisy" (the repeats disagree: within the noise of the boundary) or None
(no figures: a failed point). The boundary is between the last concurrency that met
the SLO and the first above it that did not; the search bisects that gap, one probe at
a time, until the two are neighbours, the first one not met is noisy or a higher one met
the SLO again (within noise: more probes cannot place it), or the probes run out.
"""
from __future__ import annotations

from typing import Mapping, Optional

MET, FAILED, NOISY = "met", "failed", "noisy"


def boundary(verdicts: Mapping[int, Optional[str]]) -> tuple[Optional[int], Optional[int]]:
    """(last concurrency met, first concurrency above it not met) over the measured
    concurrencies in order; either None when there is none."""
    lo = None
    for c in sorted(verdicts):
        if verdicts[c] == MET:
            lo = c
        else:
            return lo, c
    return lo, None


def met_above(verdicts: Mapping[int, Optional[str]], c: int) -> list[int]:
    """Concurrencies above ``c`` that met the SLO: after a point that did not, the
    verdicts do not fall with load as they should, and the boundary is within noise."""
    return [x for x in sorted(verdicts) if x > c and verdicts[x] == MET]


def next_probe(verdicts: Mapping[int, Optional[str]]) -> Optional[int]:
    """The concurrency to measure next (the midpoint of the gap), or None when the
    boundary is placed: neighbours, not bounded by the sweep, not met even at the lowest
    concurrency above 1, or a noisy (or unmeasured) first point not met."""
    lo, hi = boundary(verdicts)
    if hi is None or verdicts[hi] != FAILED or met_above(verdicts, hi):
        return None
    if lo is None:
        lo = 0  # not met at the lowest measured load: probe below it, down to 1
        if hi <= 1:
            return None
    if hi - lo <= 1:
        return None
    return (lo + hi) // 2


def max_load(verdicts: Mapping[int, Optional[str]], probes_left: int = 0) -> dict:
    """What the measured points say: the max concurrency under the SLO and how sure."""
    lo, hi = boundary(verdicts)
    if not verdicts:
        return {"max_concurrency": None, "first_not_met": None, "status": "no points"}
    if hi is None:
        status, note = "unbounded", f"met at every measured load (up to {lo}); the max is higher"
    elif met_above(verdicts, hi):
        status, note = "within_noise", (f"not met at {hi} but met at {', '.join(map(str, met_above(verdicts, hi)))}: "
                                        "the verdicts are within noise (more repeats, sweep.repeats, would tell)")
    elif verdicts[hi] == NOISY:
        status, note = "within_noise", f"the repeats at {hi} disagree: the boundary is within noise of it"
    elif verdicts[hi] is None:
        status, note = "unmeasured", f"no figures at {hi}"
    elif lo is None and hi <= 1:
        status, note = "never_met", "not met even at concurrency 1"
    elif next_probe(verdicts) is None:
        status, note = "exact", (f"met at {lo}, not at {hi}" if lo is not None else f"not met at {hi}")
    else:
        status, note = "probes_exhausted", (f"between {lo or 0} and {hi}: not placed (the search's probes ran "
                                            "out, or judged under another SLO than the run's)")
    return {"max_concurrency": lo, "first_not_met": hi, "status": status, "note": note,
            "verdicts": {int(c): verdicts[c] for c in sorted(verdicts)}}
