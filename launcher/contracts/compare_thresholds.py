"""What a recipe tells `python -m launcher.compare` to judge by: job.json's ``compare_thresholds``.

One definition of the keys and of their defaults (``COMPARE_DEFAULTS``: the recipe's bench.gates
defaults, compare's when a run recorded none, the texts of compare's --help): the planner writes the
same keys for every job of a plan (its jobs and the matched baseline), and compare reads them back
through :meth:`CompareThresholds.recorded` and judges by :meth:`CompareThresholds.first_set`.
Standard library and launcher.stats only.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Iterable, Optional

from launcher.stats.repeats import NOISY_REL_MAD  # bench.gates.noisy_rel_mad's default


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

    @classmethod
    def first_set(cls, *layers: "CompareThresholds") -> "CompareThresholds":
        """Each key from the first layer that sets it (a number not None, a non-empty min_speedup):
        e.g. compare's flags, then the candidate's recipe, then COMPARE_DEFAULTS."""
        return cls(**{f.name: next((getattr(t, f.name) for t in layers if getattr(t, f.name)
                                    not in (None, {})), getattr(layers[-1], f.name)) for f in fields(cls)})


# The defaults: bench.gates' (launcher.login.config.schema) and compare's where a run recorded none.
# run_floor: the relative sd of a run's mean Output TPS between two runs that no number of repeats
# inside one run removes (a run-level random effect), added to the interval of a change. Measured
# with tests/benchmarks/bench_repeats_noise.py on the 2-core CPU stack: 0.16 (docs/repeats.md); set
# bench.gates.compare_run_floor to your machines' own figure.
COMPARE_DEFAULTS = CompareThresholds(al=0.02, tps=0.05, single_run_tps=0.35, noisy_rel_mad=NOISY_REL_MAD,
                                     run_floor=0.16)
