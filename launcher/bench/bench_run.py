"""What one benchmark process runs, typed: the job spec's benchmark section (``BenchSpec``),
the server's URL, the sweep's temperatures and concurrencies, and the runtime params as the
point files record them. Built once, from the job spec (``--spec``: what jobs run) or from
the flag form (hand use, launcher.bench.cli), and read with attributes after: no argv
namespace travels past the command line."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Mapping, Optional

from launcher.contracts.job import SERVER_START_ENV, BenchSpec, JobSpec


@dataclass(frozen=True)
class BenchRun:
    bench: BenchSpec
    url: str  # the server, e.g. http://127.0.0.1:8000
    temperatures: tuple = (0.0,)
    concurrencies: tuple = (1,)
    # specdec_bench's runtime params as configuration.json records them: the job spec's three
    # sections, or the flag form's --runtime_params YAML as written
    runtime: Mapping = field(default_factory=dict)
    phase_gap_s: Optional[float] = None  # --phase_gap_s (the flag form's); None: aiperf_runner.GAP_S
    engine: Optional[str] = None  # the serving engine's name: the spec's; the flag form's --engine (None: not given)

    @property
    def base_url(self) -> str:
        return self.url.rstrip("/")

    @property
    def gates(self) -> dict[str, float]:
        """The minimum Average_AL per dataset (bench.gates.min_acceptance_length)."""
        return {k: float(v) for k, v in self.bench.gates.min_acceptance_length.items()}

    @property
    def speculative(self) -> bool:
        """A speculative server's benchmark (its spec-stats preflight on); a baseline's is not."""
        return self.bench.preflight


def from_job(job: JobSpec, role: str, url: str) -> BenchRun:
    """The benchmark of ``role`` in a job spec: its typed sections, the points' temperatures
    and concurrencies (each once, in the points' order)."""
    b = job.bench_for(role)
    temps = tuple(dict.fromkeys(p.temperature for p in job.points))
    concs = tuple(dict.fromkeys(p.concurrency for p in job.points))
    return BenchRun(bench=b, url=url, temperatures=temps or (0.0,), concurrencies=concs or (1,),
                    runtime=asdict(b.runtime_params), engine=job.engine)


def measured_repeats(b: BenchSpec) -> int:
    """sweep.repeats: how many times each point is measured against this server."""
    return max(1, int(b.repeats or 1))


def server_starts(b: BenchSpec) -> int:
    """sweep.server_starts: how many starts of the server measure each point."""
    return max(1, int(b.server_starts or 1))


def as_repeats(b: BenchSpec) -> bool:
    """Whether a point's measurements go through repeats.json (several repeats, or several starts)."""
    return measured_repeats(b) > 1 or server_starts(b) > 1


def server_start() -> int:
    """Which start of the server this benchmark measures (the node's SERVER_START_ENV; 1 alone)."""
    try:
        return max(1, int(os.environ.get(SERVER_START_ENV, "1")))
    except ValueError:
        return 1
