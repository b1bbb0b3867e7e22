"""What a shown figure rests on: the marks every table and plot carries (docs/repeats.md).

* few samples: a timing median over fewer than 5 requests or fewer than half of them
  (launcher.results.validity.thin_sample), e.g. a decode speed from 2 samples;
* noisy: the point's Output TPS over its repeats has a relative MAD above
  bench.gates.noisy_rel_mad (repeats.json);
* suspect: the known-answer probe marked the point's temperature "engine defect
  suspected" (summary.json's engine_warning): its acceptance figures reflect the engine.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from launcher.results.repeats import record

FEW, NOISY, SUSPECT = "†", "~", "!"
LEGEND = (f"{FEW} few samples (a median over fewer than 5 requests, or fewer than half); "
          f"{NOISY} noisy (Output TPS repeats: relative MAD, or one repeat's distance from the median, above the threshold); "
          f"{SUSPECT} suspect temperature (known-answer probe: engine defect suspected)")


@dataclass(frozen=True)
class Marks:
    few: tuple = ()                 # the statistics that rest on few samples
    noisy: bool = False
    suspect: Optional[str] = None   # the warning
    repeats: int = 1
    tps: Optional[object] = None    # launcher.results.repeats.stats.Summary of Output TPS, with repeats

    @property
    def listed(self) -> list[str]:
        """The marks that apply, one entry each (never run together)."""
        return [m for m, on in ((FEW, self.few), (NOISY, self.noisy), (SUSPECT, self.suspect)) if on]

    @property
    def symbols(self) -> str:
        """The marks as one label, each standing apart ("† ~ !")."""
        return " ".join(self.listed)


def point_marks(p) -> Marks:
    """The marks of a launcher.results.job_dir.Point."""
    few = tuple(s for s in ("TTFT Time", "Request Generation Tokens Per Second") if p.thin(s))
    doc = record.read(p.path)
    tps = record.figure(doc, "Output TPS")
    return Marks(few=few, noisy=bool((doc or {}).get("noisy")), suspect=p.row.engine_warning,
                 repeats=int((doc or {}).get("repeats") or 1), tps=tps if tps is not None and tps.n > 1 else None)
