"""A server's failure in words (launcher.node.server_fault, pure): which server, what
ended (its API server, its engine, its answers), the signal, since when, and the log
that holds it, for every server of every topology (issue 27: the job said `the decode0
server exited with code 0 (see logs/server.log)` when decode0's engine had died of SIGILL
and its log was logs/decode0.log)."""
from __future__ import annotations

import calendar
import signal

import pytest

from launcher.node.server_fault import (LogFatal, ProcessGone, ServerFault, Unanswered, fatal_signal_in_log,
                                        fault_cause, fault_message, is_engine_process)

T = calendar.timegm((2026, 12, 5, 1, 2, 3, 0, 0, 0))  # 01:02:03Z
SIGILL_LOG = """(EngineCore_DP0 pid=4242) INFO 12-05 01:02:01 [core.py:97] step
Fatal Python error: Illegal instruction

Thread 0x00007f (most recent call first):
  File "/venv/lib/python3.11/site-packages/vllm/v1/attention/backends/cpu_attn.py", line 412 in forward
(APIServer pid=4200) WARNING [core_client.py:817] [shutdown] MPClient: engine core exited unexpectedly
"""


def test_fatal_signal_named_in_a_log():
    assert fatal_signal_in_log(SIGILL_LOG) == LogFatal(signal.SIGILL, "Fatal Python error: Illegal instruction")
    assert fatal_signal_in_log("Fatal Python error: Segmentation fault\n").signum == signal.SIGSEGV
    assert fatal_signal_in_log("Fatal Python error: Aborted").signum == signal.SIGABRT
    assert fatal_signal_in_log("Fatal Python error: Floating-point exception").signum == signal.SIGFPE
    assert fatal_signal_in_log("Fatal Python error: Bus error").signum == signal.SIGBUS
    assert fatal_signal_in_log("RuntimeError: Process EngineCore_DP0 (PID: 12) died with exit code -9").signum \
        == signal.SIGKILL
    assert fatal_signal_in_log("INFO all fine\nERROR something else\n") is None
    # a fatal error that is not a signal names none
    assert fatal_signal_in_log("Fatal Python error: init_fs_encoding: failed to get the Python codec") is None


@pytest.mark.parametrize("label,log", [
    ("main server", "logs/server.log"),            # topology=aggregated, the sweep's server
    ("baseline server", "logs/server.log"),        # the matched baseline's restart without speculation
    ("known-answer server", "logs/server.log"),
    ("aggregated server", "logs/server.log"),      # disagg parity's aggregated run
    ("prefill0 server", "logs/prefill0.log"),      # topology=disagg
    ("decode0 server", "logs/decode0.log"),
    ("decode1 server", "logs/decode1.log"),
])
def test_an_engine_that_dies_of_a_signal_while_its_api_server_exits_0(label, log):
    f = ServerFault(label=label, log=log, rc=0, engine_gone=(ProcessGone("EngineCore_DP0", 4242, T),),
                    log_fatal=fatal_signal_in_log(SIGILL_LOG))
    assert fault_cause(f) == f"the {label}'s engine (EngineCore_DP0, pid 4242) died of SIGILL"
    assert fault_message(f, "benchmark") == (
        f"the {label}'s engine (EngineCore_DP0, pid 4242) died of SIGILL during the benchmark "
        f"(`Fatal Python error: Illegal instruction` in {log}); its API server then exited with code 0")


def test_the_engine_died_first_even_when_the_watchdog_did_not_see_it_go():
    """The API server exited 0 within one watchdog round: the log still says the engine died."""
    f = ServerFault(label="decode0 server", log="logs/decode0.log", rc=0,
                    log_fatal=LogFatal(signal.SIGILL, "Fatal Python error: Illegal instruction"))
    assert fault_message(f, "benchmark") == (
        "the decode0 server's engine died of SIGILL during the benchmark (`Fatal Python error: Illegal "
        "instruction` in logs/decode0.log); its API server then exited with code 0")


def test_an_engine_killed_without_a_word_and_its_api_server_still_up():
    f = ServerFault(label="main server", log="logs/server.log", rc=None,
                    engine_gone=(ProcessGone("EngineCore_DP0", 77, T),))
    assert fault_cause(f) == "the main server's engine (EngineCore_DP0, pid 77) ended at 01:02:03Z"
    assert fault_message(f, "baseline benchmark") == (
        "the main server's engine (EngineCore_DP0, pid 77) ended at 01:02:03Z during the baseline benchmark "
        "(no fatal signal in logs/server.log: a SIGKILL, e.g. the kernel's OOM killer, leaves none); "
        "its API server was still running")


def test_the_api_server_itself_killed():
    f = ServerFault(label="main server", log="logs/server.log", rc=-9)
    assert fault_cause(f) == "the main server exited with SIGKILL"
    assert fault_message(f, "benchmark") == "the main server exited with SIGKILL during the benchmark (see logs/server.log)"
    # its own signal beats an older line in its log (a child's fault handled earlier)
    f = ServerFault(label="router", log="logs/router.log", rc=-11, log_fatal=LogFatal(signal.SIGILL, "x"))
    assert fault_cause(f) == "the router exited with SIGSEGV"


def test_before_it_was_ready():
    f = ServerFault(label="prefill0 server", log="logs/prefill0.log", rc=1)
    assert fault_message(f, "start-up", "12.3 s after start") == (
        "the prefill0 server exited with code 1 before it was ready (12.3 s after start) (see logs/prefill0.log)")
    f = ServerFault(label="decode0 server", log="logs/decode0.log", rc=0,
                    log_fatal=LogFatal(signal.SIGILL, "Fatal Python error: Illegal instruction"))
    assert fault_message(f, "start-up").startswith("the decode0 server's engine died of SIGILL before it was ready")


def test_a_server_that_stopped_answering_is_named_with_its_last_answer():
    u = Unanswered(since_unix=T, for_s=46.4, note="GET /health no answer within 5 s", process="stopped")
    f = ServerFault(label="main server", log="logs/server.log", unanswered=u)
    assert fault_cause(f) == "the main server stopped answering (no answer since 01:02:03Z)"
    assert fault_message(f, "benchmark") == (
        "the main server stopped answering during the benchmark: no answer to its readiness probe since 01:02:03Z "
        "(46 s; last probe: GET /health no answer within 5 s); its API server process is stopped (SIGSTOP or a "
        "debugger) (see logs/server.log)")
    f = ServerFault(label="decode0 server", log="logs/decode0.log",
                    unanswered=Unanswered(T, 300, "GET /health -> 503", "sleeping"))
    assert fault_message(f, "benchmark").endswith(
        "(300 s; last probe: GET /health -> 503); its API server process is still there (sleeping) "
        "(see logs/decode0.log)")


def test_engine_processes_recognised():
    assert is_engine_process("VLLM::EngineCor", "VLLM::EngineCore_DP0")
    assert is_engine_process("python3", "python -m x VllmWorker-0")
    assert is_engine_process("sglang::schedul", "sglang::scheduler_TP0")
    assert not is_engine_process("python3", "python -c from multiprocessing.resource_tracker import main;main(8)")
