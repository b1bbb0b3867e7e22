"""run.sh's job (common/specdec_aiperf/run.sh, the hand-use wrapper): its arguments split
at ``--``, its configuration read from the environment (one reader, ``EnvReader``), and the
job spec they describe (``NodeConfig.to_spec``), which launcher.node.serve_and_bench writes
and runs. The variables are listed in launcher.node.serve_and_bench's docstring."""
from __future__ import annotations

import contextlib
import io
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from launcher.bench.cli import spec_from_argv
from launcher.contracts.job import BENCH_MODULE, JobSpec, KnownAnswerSpec, LaunchSpec
from launcher.engines import DEFAULT_ENGINE, get_engine
from launcher.engines.flags import split_at_separator
from launcher.node.lifecycle import DEFAULT_STOP_GRACE_S

# run.sh serves vLLM (docs/sglang.md: the hand-written argv path stays vLLM's): its default
# command and the server arguments it reads are that engine's.
RUN_SH_ENGINE = get_engine(DEFAULT_ENGINE)  # run.sh's process resolves its engine once, here
DEFAULT_SERVER_CMD = RUN_SH_ENGINE.default_command
DEFAULT_BENCH_MODULE = BENCH_MODULE
DEFAULT_READY_TIMEOUT_S = 1800.0
DEFAULT_UNANSWERED_TIMEOUT_S = 300.0

USAGE = """usage: run.sh [SERVER ARGS...] -- [BENCH ARGS...]

Starts `$SPECDEC_SERVER_CMD $HF_MODEL_CKPT [SERVER ARGS...]` (default command
`{default_cmd}`), waits until it is ready, runs
`$SPECDEC_PYTHON -m $SPECDEC_BENCH_MODULE [BENCH ARGS...] --url http://HOST:PORT`,
stops the server and exits with the benchmark's status.
Environment: HF_MODEL_CKPT (required), SPECDEC_SERVER_CMD, SPECDEC_HOST,
SPECDEC_PORT, SPECDEC_READY_TIMEOUT, SPECDEC_JOB_DIR, SPECDEC_PYTHON,
SPECDEC_BENCH_MODULE, SPECDEC_STOP_GRACE."""


class UsageError(Exception):
    pass


# ---------------------------------------------------------------- pure helpers


def split_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split at the first `--`: (server args, bench args). The `--` is required."""
    parts = split_at_separator(argv)
    if parts is None:
        raise UsageError("missing `--` between the server's and the benchmark's arguments")
    return parts


def default_job_dir(now: Optional[float] = None) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    p = Path.cwd() / f"specdec_job_{stamp}"
    return p if not p.exists() else p.with_name(f"{p.name}-{os.getpid()}")


# ---------------------------------------------------------------- configuration


class EnvReader:
    """run.sh's one reader of the environment: a variable's text (stripped; unset or empty:
    the default), a flag (``1``), or a number checked against its rule."""

    def __init__(self, env: Mapping[str, str]):
        self.env = env

    def text(self, name: str, default: str = "") -> str:
        return self.env.get(name, "").strip() or default

    def flag(self, name: str) -> bool:
        return self.text(name) == "1"

    def number(self, name: str, default: Optional[float], valid: Callable[[float], bool], what: str,
               kind: Callable[[str], float] = float):
        """``kind(value)`` when set, else ``default``; a value that does not parse or breaks
        ``valid`` is a UsageError that says it is not ``what``."""
        s = self.text(name)
        try:
            v = kind(s) if s else default
            if v is not None and not valid(v):
                raise ValueError
        except ValueError:
            raise UsageError(f"{name}={s!r} is not {what}") from None
        return v


@dataclass
class NodeConfig:
    model: str
    server_cmd: str
    bind_host: str
    port: Optional[int]
    ready_timeout_s: float
    job_dir: Path
    python: str
    bench_module: str
    stop_grace_s: float = DEFAULT_STOP_GRACE_S
    unanswered_timeout_s: float = DEFAULT_UNANSWERED_TIMEOUT_S
    known_answer: bool = False
    known_answer_allow_fail: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "NodeConfig":
        read = EnvReader(env)
        model = read.text("HF_MODEL_CKPT")
        if not model:
            raise UsageError("HF_MODEL_CKPT is not set: export the model (HF id or folder) to serve")
        job_dir = read.text("SPECDEC_JOB_DIR")
        return cls(
            model=model,
            server_cmd=read.text("SPECDEC_SERVER_CMD", DEFAULT_SERVER_CMD),
            bind_host=read.text("SPECDEC_HOST", "127.0.0.1"),
            port=read.number("SPECDEC_PORT", None, lambda p: 0 < p < 65536, "a port number", int),
            ready_timeout_s=read.number("SPECDEC_READY_TIMEOUT", DEFAULT_READY_TIMEOUT_S, lambda t: t > 0,
                                        "a positive number of seconds"),
            stop_grace_s=read.number("SPECDEC_STOP_GRACE", DEFAULT_STOP_GRACE_S, lambda g: g >= 0,
                                     "a number of seconds >= 0"),
            unanswered_timeout_s=read.number("SPECDEC_UNANSWERED_TIMEOUT", DEFAULT_UNANSWERED_TIMEOUT_S,
                                             lambda u: u > 0, "a positive number of seconds"),
            job_dir=Path(job_dir).resolve() if job_dir else default_job_dir(),
            python=read.text("SPECDEC_PYTHON", sys.executable),
            bench_module=read.text("SPECDEC_BENCH_MODULE", DEFAULT_BENCH_MODULE),
            known_answer=read.flag("SPECDEC_KNOWN_ANSWER"),
            known_answer_allow_fail=read.flag("SPECDEC_KNOWN_ANSWER_ALLOW_FAIL"),
        )

    def to_spec(self, server_args: list[str], bench_args: list[str]) -> JobSpec:
        """The job spec run.sh's arguments describe (one process server, on this node).
        The server arguments are the user's own and go to the server as given; what the
        node needs of them (served name, tokenizer, speculative config, KV-cache cap, TP)
        is read once, here, by launcher.engines.flags. Our benchmark's arguments are read
        by its own parser into the spec's bench section; another module's pass verbatim."""
        bench, points = None, []
        if self.bench_module == DEFAULT_BENCH_MODULE:
            try:  # arguments that do not parse: the benchmark itself says so (exit 2), after the checks
                with contextlib.redirect_stderr(io.StringIO()):
                    bench, points = spec_from_argv(bench_args)
            except SystemExit:
                bench = None
        eng = RUN_SH_ENGINE
        u = eng.read_user_args(server_args, self.model)
        if u.speculative_config_invalid:
            raise UsageError("the speculative config among the server arguments is not a JSON object")
        return JobSpec(recipe="run.sh", server_id=self.job_dir.name, job_dir=str(self.job_dir), model=self.model,
                       served_name=u.served_name, server_command=self.server_cmd, server_flags=u.flags,
                       acceptance_flags=u.acceptance, bind_host=self.bind_host, port=self.port,
                       ready_timeout_s=self.ready_timeout_s, stop_grace_s=self.stop_grace_s,
                       unanswered_timeout_s=self.unanswered_timeout_s,
                       bench=bench, bench_args=[] if bench else list(bench_args), points=points,
                       tokenizer=u.tokenizer, kv_cache_cap_bytes=u.kv_cache_cap_bytes,
                       speculative_config=u.speculative_config, engine=eng.name,
                       bench_module=self.bench_module, python=self.python, launch=LaunchSpec(server="process", tp=u.tp),
                       known_answer=KnownAnswerSpec(self.known_answer_allow_fail) if self.known_answer else None)


def usage() -> str:
    return USAGE.replace("{default_cmd}", DEFAULT_SERVER_CMD)
