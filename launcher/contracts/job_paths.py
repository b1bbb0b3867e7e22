"""A job folder's paths, in one place (as submitit's ``JobPaths`` names a submitit job's
files): where each file of a job lies, for the login side that prepares the folder, the
node that fills it and the tools that read it.

    paths = JobPaths(job_dir)
    paths.spec            JOB/job.json                (name: launcher.contracts.job)
    paths.server_ready()  JOB/server_ready.json       (names: launcher.contracts.server_ready)
    paths.logs            JOB/logs/
    paths.job_log         JOB/logs/job.log            the node job's lifecycle events
    paths.server_log      JOB/logs/server.log         the server's output
    paths.in_logs(name)   JOB/logs/<name>             a file its owner names (error.txt: launcher.results.status)

The names of the files whose format another module owns stay there (job.json,
server_ready.json, machine_samples.jsonl, gpu_telemetry.json, summary.json, progress.json,
error.txt): this module places them. The folder layout (the ``logs`` folder) and the
names of the job's own logs and scripts are written here only
(tests/test_owners_paths_node.py checks both).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from launcher.contracts.job import SPEC_FILE
from launcher.contracts.server_ready import ready_path
from launcher.runtime.machine import SAMPLES_FILE
from launcher.runtime.telemetry import TELEMETRY_FILE

LOGS_DIR = "logs"  # the job's logs; readers of a results tree pass over it
JOB_LOG = "job.log"
SERVER_LOG = "server.log"
STANDALONE_SCRIPT = "job.sbatch"  # plain `sbatch` runs it as is (launcher.login.sbatch.render_standalone)
RUN_SH_PREFIX = "run_sh."  # run.sh's own spec beside the launcher's: logs/run_sh.job.json
# The names this module owns (the check that no other module writes them reads this).
OWN_NAMES = (JOB_LOG, SERVER_LOG, STANDALONE_SCRIPT, RUN_SH_PREFIX + SPEC_FILE)


class JobPaths:
    """Every path of one job folder (``folder``: as given; resolve it first where the
    node needs absolute paths)."""

    def __init__(self, folder: str | os.PathLike[str]):
        self.folder = Path(folder)

    def __repr__(self) -> str:
        return f"JobPaths({str(self.folder)!r})"

    # -- the job folder

    @property
    def spec(self) -> Path:
        """job.json: the spec the login side wrote, the node and the benchmark read."""
        return self.folder / SPEC_FILE

    def server_ready(self, phase: Optional[str] = None) -> Path:
        """server_ready.json (``phase``: lossless, known_answer; None: the job's own server)."""
        return ready_path(self.folder, phase)

    @property
    def gpu_telemetry(self) -> Path:
        return self.folder / TELEMETRY_FILE

    @property
    def standalone_script(self) -> Path:
        """job.sbatch: the job as one plain sbatch script (Slurm only)."""
        return self.folder / STANDALONE_SCRIPT

    # -- logs/

    @property
    def logs(self) -> Path:
        return self.folder / LOGS_DIR

    def make_logs(self) -> Path:
        """Create logs/ (and the job folder); returns it."""
        self.logs.mkdir(parents=True, exist_ok=True)
        return self.logs

    def in_logs(self, name: str) -> Path:
        """A file in logs/ whose name its owner module keeps (error.txt: launcher.results.status)."""
        return self.logs / name

    @property
    def job_log(self) -> Path:
        return self.logs / JOB_LOG

    @property
    def server_log(self) -> Path:
        """The (head) server's output."""
        return self.logs / SERVER_LOG

    def node_server_log(self, rank: int) -> Path:
        """Multi-node: the server step of node ``rank`` (1, 2, ...): logs/server.node<rank>.log."""
        return self.logs / f"server.node{rank}.log"

    def server_log_named(self, name: str) -> Path:
        """A server named by its role or phase (topology=disagg: prefill0, decode0, router,
        baseline-router): logs/<name>.log."""
        return self.logs / f"{name}.log"

    def rank_record(self, rank: int) -> Path:
        """Multi-node: where rank ``rank`` ran, as it wrote it (launcher.node.step_record)."""
        return self.logs / f"rank{rank}.json"

    @property
    def run_sh_spec(self) -> Path:
        """run.sh's own spec where the launcher's job.json already lies."""
        return self.logs / (RUN_SH_PREFIX + SPEC_FILE)

    @property
    def machine_samples(self) -> Path:
        """Clocks, throttling and CPU time sampled while the job runs (launcher.runtime.machine)."""
        return self.logs / SAMPLES_FILE

    def slurm_output(self, stream: str) -> str:
        """A standalone job's Slurm output (``stream``: out, err), %j left for Slurm."""
        return f"{self.logs}/slurm-%j.{stream}"

    # -- in words

    def shown(self, path: str | os.PathLike[str]) -> str:
        """A path of this job as the user finds it in the job folder: logs/decode0.log."""
        p = Path(path)
        try:
            return p.relative_to(self.folder).as_posix()
        except ValueError:
            return str(p)
