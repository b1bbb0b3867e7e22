"""What every point of a benchmark run reads: the typed run (launcher.bench.bench_run), the
served engine and what the server and the job folder recorded; and a group of points (a
dataset at a temperature) as the AIPerf driver hands it on."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from launcher.bench import aiperf_runner as ar
from launcher.bench.bench_run import BenchRun
from launcher.contracts.job import BenchSpec, JobSpec
from launcher.contracts.server_ready import ServerReady
from launcher.engines import Engine
from launcher.results.goodput import Slo, slo_from_dict
from launcher.runtime.datasets import DatasetSpec, Question


@dataclass(frozen=True)
class PointContext:
    run: BenchRun
    engine_version: Optional[str]
    server_ready: ServerReady
    job: Optional[JobSpec]  # the job folder's job.json (launcher.contracts.job.read_recorded_job), None without one
    engine: Engine  # the engine that served, resolved once by the benchmark's main (no default): its counters too
    acceptance_source: str = "per_request_stats"  # launcher.engines.AcceptanceSource
    stream_extra: dict = field(default_factory=dict)  # request fields the acceptance source needs

    @property
    def bench(self) -> BenchSpec:
        return self.run.bench

    @property
    def runtime(self) -> dict:
        return dict(self.run.runtime)

    @property
    def base_url(self) -> str:
        return self.run.base_url

    @property
    def speculative(self) -> bool:
        return self.run.speculative

    @property
    def stream_counted(self) -> bool:
        return self.speculative and self.acceptance_source == "stream_chunks"

    @property
    def keep_alive(self) -> dict:
        """Both ends' idle keep-alive (launcher.bench.aiperf_runner.keep_alive): the server's
        from its variable in this environment (the job's server env reaches the benchmark)."""
        return ar.keep_alive(self.engine.http_keep_alive_env, self.engine.http_keep_alive_default_s, dict(os.environ))

    @property
    def slo(self) -> Optional[Slo]:
        """The recipe's SLO (launcher.results.goodput.Slo), or None."""
        return slo_from_dict(self.bench.slo)

    def recorded(self, name: str):
        """A field of the job's job.json (None without one, or when it is not recorded)."""
        v = getattr(self.job, name) if self.job is not None else None
        return None if v == "" else v

    @property
    def spec_cfg(self) -> Optional[dict]:
        """The speculative config the server ran (job.json's, else server_ready.json's); None without speculation."""
        spec_cfg = self.recorded("speculative_config") or self.server_ready.speculative_config
        return spec_cfg if self.speculative else None


@dataclass(frozen=True)
class PointGroup:
    """The points of one dataset at one temperature, as one AIPerf process (or one per point) measures them."""
    ctx: PointContext
    spec: Optional[DatasetSpec]
    questions: list[Question]
    dataset: str
    temperature: float
    save_dir: Path
    progress: object  # launcher.bench.progress.Progress

    @property
    def ds_dir(self) -> Path:
        return self.save_dir / self.dataset

    def sent(self, concurrency: int) -> list[Question]:
        """The questions a point at ``concurrency`` sends: the dataset's first N
        (sweep.num_requests_per_concurrency; all of them without an entry), as specdec_bench's
        --num_requests takes the first N rows. Its files (the responses) hold these."""
        n = ar.phase_sessions(self.ctx.bench.requests_per_concurrency, concurrency, len(self.questions))
        return self.questions[:n]
