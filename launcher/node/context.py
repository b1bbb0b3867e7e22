"""What a phase of the node job may use of the job (launcher.node.serve_and_bench.NodeJob
implements it): the spec and its paths, the log, the failure line, the signal check, the
server group's start and stop, the environment and API key of a server, and the client
run. Phases (launcher.node.disagg, ...) receive this, never the job's private members."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional, Protocol

from launcher.contracts.job import JobSpec
from launcher.engines import Engine, ServerKey
from launcher.node.lifecycle import ServerProcess


class NodeContext(Protocol):
    spec: JobSpec
    spec_path: Path
    job_dir: Path
    logs: Path
    python: str
    api_key: Optional[str]
    server: Optional[ServerProcess]
    members: list

    @property
    def engine(self) -> Engine: ...

    def log(self, msg: str, level: int = logging.INFO) -> None: ...

    def fail(self, reason: str) -> None: ...

    def check(self) -> None: ...

    def server_env(self) -> dict: ...

    def server_launch(self, extra_env: Optional[dict] = None) -> tuple[dict, ServerKey]: ...

    def serve(self, speculative_config: object = "spec", phase: str = "server") -> ServerProcess: ...

    def stop_server(self, what: str = "server") -> None: ...

    def run_client(self, argv: list[str], server: ServerProcess, ready_path: Path, what: str) -> int: ...
