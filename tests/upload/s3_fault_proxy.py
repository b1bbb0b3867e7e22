"""An HTTP proxy in front of moto_server that injects S3 failures on object PUTs.

It forwards every request to the real server over HTTP, except that it can:
* answer the first N object PUTs with 503 SlowDown (transient errors);
* forward N object PUTs, then hang up on every later one (the server went away);
* forward N object PUTs, then hold every later one unanswered (so that a test
  can kill the client while the rest of the upload is still in flight).
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "expect", "proxy-connection", "te", "upgrade"}
_SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
              b"<Message>Please reduce your request rate.</Message></Error>")


class FaultProxy:
    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.lock = threading.Lock()
        self.fail_remaining = 0
        self.forward_limit: int | None = None  # object PUTs let through before the fault
        self.fault = "drop"  # what happens to object PUTs past forward_limit: "drop" or "hold"
        self.puts_admitted = 0  # object PUTs sent on to the server
        self.puts_forwarded = 0  # ... and answered 200 by it
        self.puts_failed = 0
        self.puts_refused = 0
        self.held = threading.Event()  # set once a request is being held
        self.release = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep pytest output clean
                pass

            def _body(self) -> bytes:
                assert "chunked" not in self.headers.get("Transfer-Encoding", ""), "chunked bodies not supported"
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _is_object_put(self) -> bool:
                path = self.path.split("?", 1)[0].strip("/")
                return self.command == "PUT" and "/" in path

            def _handle(self):
                body = self._body()
                if self._is_object_put():
                    action = proxy._decide()
                    if action == "fail":
                        self.send_response(503, "Slow Down")
                        self.send_header("Content-Type", "application/xml")
                        self.send_header("Content-Length", str(len(_SLOW_DOWN)))
                        self.end_headers()
                        self.wfile.write(_SLOW_DOWN)
                        return
                    if action in ("drop", "hold"):
                        if action == "hold":
                            proxy.held.set()
                            proxy.release.wait()
                        self.close_connection = True
                        return
                status, reason, headers, data = proxy._forward(self.command, self.path, self.headers, body)
                if self._is_object_put() and status == 200:
                    with proxy.lock:
                        proxy.puts_forwarded += 1
                self.send_response(status, reason)
                for k, v in headers:
                    if k.lower() not in _HOP_BY_HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                if self.command == "HEAD":
                    self.send_header("Content-Length", dict((k.lower(), v) for k, v in headers).get("content-length", "0"))
                    self.end_headers()
                    return
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def _decide(self) -> str:
        """'fail', 'drop', 'hold' or 'forward' for one object PUT."""
        with self.lock:
            if self.fail_remaining > 0:
                self.fail_remaining -= 1
                self.puts_failed += 1
                return "fail"
            if self.forward_limit is not None and self.puts_admitted >= self.forward_limit:
                self.puts_refused += 1
                return self.fault
            self.puts_admitted += 1
            return "forward"

    def _forward(self, method, path, headers, body):
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=30)
        try:
            fwd = {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}
            conn.request(method, path, body=body if body or method in ("PUT", "POST") else None, headers=fwd)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, resp.reason, resp.getheaders(), data
        finally:
            conn.close()

    def fail_first_puts(self, n: int) -> None:
        with self.lock:
            self.fail_remaining = n

    def fault_after_puts(self, n: int, fault: str) -> None:
        assert fault in ("drop", "hold")
        with self.lock:
            self.forward_limit, self.fault = n, fault

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
