"""One point of the sweep as the benchmark measures it: where it stands and its figures.
Every field is declared here (slots: an undeclared one cannot be set), the repeats' goodput and
the SLO search's mark included."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from launcher.contracts.job import point_dir_name
from launcher.results.summary import PointRow


@dataclass(slots=True)
class PointOutcome:
    dataset: str
    temperature: float
    concurrency: int
    status: str = "pending"
    reason: Optional[str] = None
    values: dict = field(default_factory=dict)  # the point's figures (summary.json's row)
    search_probe: bool = False  # an extra point of the max-load search under the SLO (docs/slo.md)
    # each repeat's goodput against the SLO, while the point's files are written (its goodput's per_repeat)
    slo_repeats: Optional[list] = None
    # why the repeats break the validity rule (a repeat that lost requests), joined to the point's own reason
    repeat_problems: Optional[list] = None

    @property
    def dir(self) -> str:
        return point_dir_name(self.dataset, self.temperature, self.concurrency)

    def row(self) -> dict:
        """summary.json's row of the point (launcher.results.summary.PointRow)."""
        row = PointRow.begun(self.dataset, self.temperature, self.concurrency, self.dir, self.status,
                             self.reason).with_figures(self.values)
        return (replace(row, search_probe=True) if self.search_probe else row).to_dict()
