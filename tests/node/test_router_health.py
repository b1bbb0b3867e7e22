"""The watchdog's probe of the router: vLLM's router answers /health with 503 and the
servers it holds unhealthy while it still routes; that is an answer, and the job log
says what it reported (a real HTTP server stands in for the router here)."""
from __future__ import annotations

import http.server
import threading
import time
from types import SimpleNamespace

import pytest

from launcher.node.server_watch import ServerWatch
from launcher.node.watchdog import Watchdog
from launcher.node.lifecycle import ServerProcess


class _Health(http.server.BaseHTTPRequestHandler):
    status = 503

    def do_GET(self):  # noqa: N802 - http.server's name
        body = b"Unhealthy servers: [\"Prefill: http://10.0.0.1:8000\"]" if self.status != 200 else b"ok"
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def health_server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    _Health.status = 503


class _Watched(ServerWatch):
    def __init__(self, port: int, any_status: bool):
        super().__init__()
        self.probe_host, self.port = "127.0.0.1", port
        self.engine = SimpleNamespace(health_path="/health")
        self.any_status_answers = any_status
        self.ready_unix = time.time() - 100

    def alive(self) -> bool:
        return True

    def process_state(self) -> str:
        return "sleeping"


def test_a_503_is_no_answer_from_a_server_but_is_one_from_the_router(health_server):
    port = health_server.server_address[1]
    server = _Watched(port, any_status=False)
    assert server.probe_answer(2.0) is False and server.last_probe_note == "GET /health -> 503"
    assert server.unanswered() is not None
    router = _Watched(port, any_status=True)
    assert router.probe_answer(2.0) is True and router.unanswered() is None
    assert router.last_health_report.startswith("503 Unhealthy servers") and "10.0.0.1:8000" in router.last_health_report
    _Health.status = 200
    assert router.probe_answer(2.0) is True and router.last_health_report == ""


def test_the_watchdog_logs_what_the_router_reports_when_it_changes(health_server, tmp_path):
    lines = []
    router = ServerProcess(["true"], probe_host="127.0.0.1", port=health_server.server_address[1], served_name="m",
                           log_path=tmp_path / "router.log", log=lines.append, engine=SimpleNamespace(health_path="/health"))
    router.label, router.any_status_answers = "router", True
    router.alive = lambda: True
    router.check_engines = lambda: None
    with Watchdog([router], interval_s=0.05, timeout_s=2.0):
        deadline = time.monotonic() + 10
        while not lines and time.monotonic() < deadline:
            time.sleep(0.05)
        _Health.status = 200
        while len(lines) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert lines[0].startswith("the router reports: 503 Unhealthy servers"), lines
    assert lines[1] == "the router reports every server healthy again", lines
    assert len(lines) == 2  # once per change, not once per probe
