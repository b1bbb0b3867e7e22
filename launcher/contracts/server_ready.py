"""``server_ready.json``: what the node tells the benchmark about the server it
started (written once the server is ready, read by the benchmark). One typed object,
one writer (atomic), one reader; files of earlier versions read (unknown keys kept).

The node writes one per server phase: the job's own (``server_ready.json``), the
lossless reference's, the known-answer probe's, the baseline's and the disagg
parity's aggregated server's (their folders' ``server_ready.json``)."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Optional

from launcher.runtime.files import write_json_atomic

SERVER_READY_FILE = "server_ready.json"
PHASE_FILES = {None: SERVER_READY_FILE, "lossless": "lossless/reference_server_ready.json",
               "known_answer": "known_answer_server_ready.json"}
# Keys written only when set (a plain server has no topology; a phase's server no engine keys).
_OPTIONAL = ("engine", "acceptance_source", "speculative_config", "amx_permission_hook", "metrics_urls", "topology",
             "ranks", "listeners", "engine_chosen")


# What a listener is (Listener.kind); docs/disagg.md "Who can reach what" says what protects each
LISTENER_KINDS = ("api", "metrics", "kv_side_channel", "slurm_step", "internal")


@dataclass(frozen=True)
class Listener:
    """One listening TCP socket of the job's processes, as found on the machine (not from the
    configuration): whose, what, where it is bound, and whether it checks the API key."""
    owner: str  # the server or router it belongs to: server, prefill0, decode0, router
    kind: str  # one of LISTENER_KINDS
    address: str  # bound address: 0.0.0.0 / :: (every address of its node), 127.0.0.1, one address
    port: int
    pid: int
    process: str  # the process name
    node: Optional[str] = None  # the node (hostname) it runs on
    checks_key: bool = False  # refuses a request without the job's API key (on the engine's guarded paths)

    @property
    def loopback_only(self) -> bool:
        return self.address.startswith("127.") or self.address == "::1"

    @classmethod
    def from_dict(cls, d: dict) -> "Listener":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass(frozen=True)
class ServerReady:
    startup_s: Optional[float] = None  # spawn to ready (topology=disagg: first spawn to the router's readiness)
    port: Optional[int] = None
    url: Optional[str] = None  # where this node reaches the server
    bind_host: Optional[str] = None
    served_model_name: Optional[str] = None
    argv: list = field(default_factory=list)
    engine_version: Optional[str] = None
    pid: Optional[int] = None
    spawn_unix: Optional[float] = None
    ready_unix: Optional[float] = None
    log: Optional[str] = None
    engine: Optional[str] = None
    acceptance_source: Optional[str] = None
    speculative_config: Optional[dict] = None
    amx_permission_hook: Optional[bool] = None  # the engine's CPU build asks for the AMX state at start
    metrics_urls: Optional[list] = None  # topology=disagg: the decode servers' /metrics
    topology: Optional[dict] = None  # topology=disagg: every server and the router
    ranks: Optional[list] = None  # multi-node: each rank's node, address, interface and pid, as it saw them
    listeners: Optional[list[Listener]] = None  # every listening socket of the job's servers and router
    # serving settings the engine chose itself, as its start-up log said them (Engine.chosen_settings:
    # {"async_scheduling": "off"}); None when the log said none the engine's reader knows
    engine_chosen: Optional[dict] = None
    extra: dict = field(default_factory=dict)  # keys this version does not know (a newer writer's)

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k != "extra" and not (k in _OPTIONAL and v is None)}
        return {**self.extra, **d}

    @classmethod
    def from_dict(cls, d: dict) -> "ServerReady":
        known = {f.name for f in fields(cls)} - {"extra"}
        kw = {k: v for k, v in d.items() if k in known}
        if isinstance(kw.get("listeners"), list):
            kw["listeners"] = [Listener.from_dict(x) for x in kw["listeners"] if isinstance(x, dict)]
        return cls(**kw, extra={k: v for k, v in d.items() if k not in known})


def ready_path(job_dir, phase: Optional[str] = None) -> Path:
    """The server_ready file of a job folder (``phase``: lossless, known_answer; None: the job's own)."""
    return Path(job_dir) / PHASE_FILES[phase]


def write_server_ready(path, ready: ServerReady) -> Path:
    """Write atomically (``path``: a file, or a job folder for its own server_ready.json)."""
    p = Path(path)
    if p.is_dir():
        p = p / SERVER_READY_FILE
    return write_json_atomic(p, ready.to_dict())


def read_server_ready(path) -> Optional[ServerReady]:
    """The file (or a job folder's server_ready.json); None when absent or unreadable."""
    p = Path(path)
    if p.is_dir():
        p = p / SERVER_READY_FILE
    try:
        d = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return ServerReady.from_dict(d) if isinstance(d, dict) else None
