"""A fake OpenAI-style server for the node's lifecycle tests (fast to start).

Takes the flags compose_server_argv produces (--model, --served-model-name,
--host, --port, anything else is ignored) and serves /health, /v1/models and
/version after --startup_s seconds. Options to misbehave:
  --die_after_s S   exit with --exit_code after being ready for S seconds
  --child           start a child process (like vLLM's engine core) that
                    ignores SIGTERM, so only SIGKILL ends it
  --engine_dies_after_s S  start an engine child (argv names EngineCore_DP0, as vLLM's
                    title does) that kills itself with --engine_signal after S s;
                    the server then exits 0, as vLLM's API server does
  --ignore_term     ignore SIGTERM itself
  --list_name N     list N in /v1/models instead of the served name
  --require_key K   answer /v1/* with 401 unless `Authorization: Bearer K`
Like vLLM, it requires VLLM_API_KEY from its environment on /v1/* when set.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--served-model-name", nargs="+")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--startup_s", type=float, default=0.5)
    p.add_argument("--die_after_s", type=float)
    p.add_argument("--exit_code", type=int, default=7)
    p.add_argument("--child", action="store_true")
    p.add_argument("--engine_dies_after_s", type=float)
    p.add_argument("--engine_signal", default="SIGILL")
    p.add_argument("--ignore_term", action="store_true")
    p.add_argument("--list_name")
    p.add_argument("--require_key")
    a, _unknown = p.parse_known_args()
    name = a.list_name or (a.served_model_name[0] if a.served_model_name else a.model)
    if a.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if a.child:
        subprocess.Popen([sys.executable, "-c",
                          "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                          "print('fake engine core up', flush=True); time.sleep(3600)"])
    if a.engine_dies_after_s is not None:
        engine = subprocess.Popen([sys.executable, "-c",  # PYTHONFAULTHANDLER (the node's) names its signal
                                   "import os, signal, sys, time; time.sleep(float(sys.argv[1])); "
                                   "os.kill(os.getpid(), getattr(signal, sys.argv[2])); time.sleep(60)",
                                   str(a.startup_s + a.engine_dies_after_s), a.engine_signal, "EngineCore_DP0"])

        def engine_watch():
            engine.wait()
            print(f"engine core exited unexpectedly ({engine.returncode}); shutting down", flush=True)
            time.sleep(0.5)
            os._exit(0)
        threading.Thread(target=engine_watch, daemon=True).start()
    print(f"fake server pid {os.getpid()} starting on {a.host}:{a.port}", flush=True)
    time.sleep(a.startup_s)

    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            key = a.require_key or os.environ.get("VLLM_API_KEY")
            if key and self.path.startswith("/v1") and self.headers.get("Authorization") != f"Bearer {key}":
                self.send_response(401)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            routes = {"/health": b"", "/version": json.dumps({"version": "fake-1.0"}).encode(),
                      "/v1/models": json.dumps({"object": "list", "data": [{"id": name, "object": "model"}]}).encode()}
            if self.path not in routes:
                self.send_response(404)
                self.end_headers()
                return
            body = routes[self.path]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer((a.host, a.port), H)
    print("fake server ready", flush=True)
    if a.die_after_s is not None:
        def die():
            time.sleep(a.die_after_s)
            print(f"fake server dying with code {a.exit_code}", flush=True)
            os._exit(a.exit_code)
        threading.Thread(target=die, daemon=True).start()
    srv.serve_forever()


if __name__ == "__main__":
    main()
