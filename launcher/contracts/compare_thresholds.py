"""What a recipe tells `python -m launcher.compare` to judge by: job.json's ``compare_thresholds``.

One definition of the keys: the planner writes the same keys for every job of a plan (its jobs and
the matched baseline), and compare reads them back through :meth:`CompareThresholds.recorded`.
Standard library only.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Iterable, Optional


@dataclass(frozen=True)
class CompareThresholds:
    """The recipe's bench.gates for compare (None: not recorded; compare's own default holds)."""
    al: Optional[float] = None  # bench.gates.compare_al_threshold: relative Average_AL change that counts
    tps: Optional[float] = None  # bench.gates.compare_tps_threshold: relative Output TPS change that counts
    min_speedup: dict = field(default_factory=dict)  # bench.gates.min_speedup: dataset -> least speedup
    single_run_tps: Optional[float] = None  # bench.gates.compare_single_run_tps_threshold: one repeat on a side
    noisy_rel_mad: Optional[float] = None  # bench.gates.noisy_rel_mad: a point noisier than this is noisy
    run_floor: Optional[float] = None  # bench.gates.compare_run_floor: between-run sd (None: compare's measured)

    def to_dict(self) -> dict:
        """job.json's ``compare_thresholds``."""
        return asdict(self) | {"min_speedup": dict(self.min_speedup)}

    @classmethod
    def recorded(cls, recorded: Iterable[Optional[dict]]) -> "CompareThresholds":
        """Each key's first recorded value in these ``compare_thresholds`` (the jobs of one run
        share a recipe; a job.json written before a key existed lacks it): numbers as floats,
        min_speedup the first non-empty one."""
        found: dict = {}
        for d in recorded:
            for key, value in (d or {}).items():
                if key in found or value is None or key not in cls.__dataclass_fields__:
                    continue
                if key == "min_speedup":
                    if value:
                        found[key] = {str(k): float(v) for k, v in value.items()}
                else:
                    found[key] = float(value)
        return cls(**found)
