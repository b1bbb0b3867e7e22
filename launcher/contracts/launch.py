"""How the node side starts a job's server: a child process, or its own Slurm step (in the
cluster's container there). Part of the job spec (``JobSpec.launch``). Standard library only."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

SERVER_LAUNCHES = ("process", "srun")  # a child process of the job, or its own Slurm step


@dataclass(frozen=True)
class LaunchSpec:
    """How the node side starts the server."""
    server: str = "process"  # process | srun (its own Slurm step)
    nodes: int = 1
    gpus_per_node: int = 0
    tp: int = 1
    pp: int = 1
    dp: int = 1
    container_image: Optional[str] = None  # pyxis, on the server's srun step only
    container_mounts: list[str] = field(default_factory=list)
    srun_args: list[str] = field(default_factory=list)  # extra flags for the server's step

    def server_step_prefix(self, node: Optional[str] = None, name: str = "specdec-server") -> list[str]:
        """`srun ...` before the server argv when the server is its own Slurm step."""
        if self.server != "srun":
            return []
        a = ["srun", "--overlap", "--nodes=1", "--ntasks=1", f"--job-name={name}", "--export=ALL",
             "--kill-on-bad-exit=1", "--unbuffered"]
        if node:
            a.append(f"--nodelist={node}")
        if self.gpus_per_node > 0:
            a.append(f"--gpus-per-node={self.gpus_per_node}")
        if self.container_image:
            a.append(f"--container-image={self.container_image}")
            if self.container_mounts:
                a.append(f"--container-mounts={','.join(self.container_mounts)}")
            a.append("--no-container-mount-home")
        return a + list(self.srun_args)

    def disagg_server_step(self) -> "LaunchSpec":
        """The launch of one topology=disagg server as its own step: one node, and of a GPU
        node only its tp x pp GPUs (the others are its neighbours' on that node)."""
        return replace(self, nodes=1, gpus_per_node=min(self.gpus_per_node, self.tp * self.pp))
