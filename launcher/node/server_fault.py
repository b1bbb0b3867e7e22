"""A server's failure in words: which server, what ended (its API server, its engine, or
its answers), the signal, since when, and the log that holds it. Pure functions
(standard library only); the facts come from the node's watchdog
(launcher.node.lifecycle.ServerProcess and launcher.node.watchdog).

A server is its API server process (the one the node started) and the engine
processes under it (vLLM's EngineCore and workers, SGLang's scheduler). When an
engine process dies, the API server may well exit with code 0: the signal is in
the server's log, where Python's fault handler (PYTHONFAULTHANDLER=1 in every
server's environment) writes ``Fatal Python error: Illegal instruction`` for
SIGSEGV, SIGILL, SIGFPE, SIGBUS and SIGABRT. A SIGKILL (the kernel's OOM killer,
a user's kill -9) leaves no line; the watchdog still sees the engine process go.
"""
from __future__ import annotations

import re
import signal
import time
from dataclasses import dataclass
from typing import Optional

from launcher.node.point_status import returncode_words as exit_words
from launcher.node.point_status import signal_words

# Python's faulthandler: "Fatal Python error: Segmentation fault" and its peers.
_FAULT_NAMES = {
    "segmentation fault": signal.SIGSEGV,
    "illegal instruction": signal.SIGILL,
    "aborted": signal.SIGABRT,
    "bus error": signal.SIGBUS,
    "floating-point exception": signal.SIGFPE,
    "floating point exception": signal.SIGFPE,
}
_FAULT_LINE = re.compile(r"Fatal Python error: (" + "|".join(re.escape(n) for n in _FAULT_NAMES) + r")", re.I)
# vLLM's own words for a child it reaped: "Process EngineCore_DP0 (PID: 12) died with exit code -4"
_DIED_WITH = re.compile(r"died with exit code (-\d+)")


def clock(unix: float) -> str:
    return time.strftime("%H:%M:%SZ", time.gmtime(unix))


@dataclass(frozen=True)
class LogFatal:
    """A fatal signal a server's log names, and the line that names it."""
    signum: int
    line: str


def fatal_signal_in_log(text: str) -> Optional[LogFatal]:
    """Pure: the first fatal signal named in a server's log text (faulthandler's line,
    or vLLM's "died with exit code -N"), None when the log names none."""
    for line in text.splitlines():
        m = _FAULT_LINE.search(line)
        if m:
            return LogFatal(int(_FAULT_NAMES[m.group(1).lower()]), m.group(0))
        m = _DIED_WITH.search(line)
        if m:
            return LogFatal(-int(m.group(1)), line.strip()[-200:])
    return None


# The engine processes under a server's API server, by their titles and command lines:
# vLLM's EngineCore_DP0 / VllmWorker / Worker_TP0, SGLang's scheduler and detokenizer.
ENGINE_PROCESS = re.compile(r"EngineCore|Worker|sglang::scheduler|sglang::detokenizer", re.I)


def is_engine_process(name: str, cmdline: str) -> bool:
    return bool(ENGINE_PROCESS.search(name) or ENGINE_PROCESS.search(cmdline))


@dataclass(frozen=True)
class ProcessGone:
    """An engine process of a server seen to end while its API server ran."""
    name: str
    pid: int
    at_unix: float


@dataclass(frozen=True)
class Unanswered:
    """The server stopped answering its readiness endpoint: ``since_unix`` is its last
    answer, ``for_s`` how long it has given none, ``note`` the last probe's outcome."""
    since_unix: float
    for_s: float
    note: str = "GET /health: no answer"
    process: str = ""  # the API server process's state: "stopped" (SIGSTOP), "running", ...


@dataclass(frozen=True)
class ServerFault:
    """What the node knows of a failed server."""
    label: str  # "main server", "decode0 server", "router", "baseline server", "server on node 1"
    log: str  # where its output is, as the user finds it: "logs/decode0.log"
    rc: Optional[int] = None  # its API server's return code; None while it runs
    engine_gone: tuple[ProcessGone, ...] = ()
    log_fatal: Optional[LogFatal] = None
    unanswered: Optional[Unanswered] = None


def _engine_part(f: ServerFault) -> Optional[str]:
    """"the decode0 server's engine (EngineCore, pid 12) died of SIGILL", or None when
    nothing says an engine process died."""
    gone = f.engine_gone[0] if f.engine_gone else None
    what = f"engine ({gone.name}, pid {gone.pid})" if gone else "engine"
    if f.log_fatal is not None and (gone is not None or f.rc is None or f.rc >= 0):
        return f"the {f.label}'s {what} died of {signal_words(f.log_fatal.signum)}"
    if gone is not None:
        return f"the {f.label}'s {what} ended at {clock(gone.at_unix)}"
    return None


def fault_cause(f: ServerFault) -> str:
    """Pure: the cause in a few words (summary.json's job_end.cause; a point's reason
    adds "during this point"). An engine's death comes first (the API server's exit only
    follows it), then the API server's own exit, then the silence."""
    engine = _engine_part(f)
    if engine:
        return engine
    if f.rc is not None:
        return f"the {f.label} exited with {exit_words(f.rc)}"
    if f.unanswered is not None:
        return f"the {f.label} stopped answering (no answer since {clock(f.unanswered.since_unix)})"
    return f"the {f.label} failed"


def fault_message(f: ServerFault, during: str, after: str = "") -> str:
    """Pure: the job's one-line error (logs/error.txt), e.g. "the decode0 server's engine
    died of SIGILL during the benchmark (`Fatal Python error: Illegal instruction` in
    logs/decode0.log); its API server then exited with code 0". ``during`` is what the job
    was doing: "benchmark", "start-up" ("before it was ready"); ``after`` how long after
    the server's start, e.g. "12.3 s after start"."""
    when = "before it was ready" if during == "start-up" else f"during the {during}"
    if after:
        when += f" ({after})"
    engine = _engine_part(f)
    if engine:
        where = (f"`{f.log_fatal.line}` in {f.log}" if f.log_fatal is not None else
                 f"no fatal signal in {f.log}: a SIGKILL, e.g. the kernel's OOM killer, leaves none")
        api = ("its API server was still running" if f.rc is None else
               f"its API server then exited with {exit_words(f.rc)}")
        return f"{engine} {when} ({where}); {api}"
    if f.rc is not None:
        return f"the {f.label} exited with {exit_words(f.rc)} {when} (see {f.log})"
    if f.unanswered is not None:
        u = f.unanswered
        state = ("its API server process is stopped (SIGSTOP or a debugger)" if u.process == "stopped" else
                 "its API server process is still there" + (f" ({u.process})" if u.process else ""))
        return (f"the {f.label} stopped answering {when}: no answer to its readiness probe since "
                f"{clock(u.since_unix)} ({u.for_s:.0f} s; last probe: {u.note}); {state} (see {f.log})")
    return f"the {f.label} failed {when} (see {f.log})"
