"""A stand-in HTTP server answering as SGLang 0.5.17 does, built from the facts in
docs/sglang.md (sglang/srt/entrypoints/http_server.py, srt/utils/auth.py,
srt/entrypoints/openai/serving_chat.py, protocol.py). NOT SGLang: no model runs.

- argv as `python -m sglang.launch_server`: --model-path (alias --model),
  --served-model-name, --host, --port, --api-key, --config YAML (keys are the flags
  without "--": `api-key: "..."`); anything else is ignored.
- GET /health: 503 while starting (--startup_s), then 200 with an empty body.
- GET /v1/models: the served name; GET /server_info (and /get_server_info): the server
  args and "version": "0.5.17". There is no /version (404).
- With a key, every path but /health* and /metrics wants `Authorization: Bearer KEY` (401).
- POST /v1/chat/completions with stream: one chunk per "verify step" of --chunk_sizes
  tokens, each with cumulative `usage` when stream_options.continuous_usage_stats is set,
  a final chunk with finish_reason, then `data: [DONE]`.
"""
from __future__ import annotations

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "0.5.17"


def read_config(path: str) -> dict:
    """SGLang's --config YAML, as far as this stand-in needs: `key: value` lines."""
    out = {}
    with open(path) as f:
        for line in f:
            if ":" in line and not line.lstrip().startswith("#"):
                k, v = line.split(":", 1)
                v = v.strip()
                out[k.strip()] = json.loads(v) if v.startswith('"') else v
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model-path", "--model", dest="model_path", required=True)
    p.add_argument("--served-model-name")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--api-key")
    p.add_argument("--config")
    p.add_argument("--startup_s", type=float, default=0.5)
    p.add_argument("--chunk_sizes", default="1,3,2,4")
    a, _unknown = p.parse_known_args()
    if a.config:  # SGLang merges the YAML under the command line's flags
        cfg = read_config(a.config)
        a.api_key = a.api_key or cfg.get("api-key") or cfg.get("api_key")
    name = a.served_model_name or a.model_path
    sizes = [int(x) for x in a.chunk_sizes.split(",")]
    t_up = time.monotonic() + a.startup_s
    print(f"stand-in sglang {VERSION} pid {os.getpid()} on {a.host}:{a.port}", flush=True)

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, body: bytes = b"", ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _authorized(self) -> bool:
            if not a.api_key or self.path.startswith(("/health", "/metrics")):
                return True
            return self.headers.get("Authorization") == f"Bearer {a.api_key}"

        def do_GET(self):  # noqa: N802
            if self.path.startswith("/health"):
                return self._send(200 if time.monotonic() >= t_up else 503)
            if not self._authorized():
                return self._send(401, json.dumps({"error": "Unauthorized"}).encode())
            if self.path == "/v1/models":
                data = [{"id": name, "object": "model", "created": int(time.time()), "owned_by": "sglang",
                         "root": a.model_path, "max_model_len": 4096}]
                return self._send(200, json.dumps({"object": "list", "data": data}).encode())
            if self.path in ("/server_info", "/get_server_info"):
                info = {"model_path": a.model_path, "served_model_name": name, "host": a.host, "port": a.port,
                        "api_key": None, "version": VERSION}  # SGLang blanks secrets in its server info
                return self._send(200, json.dumps(info).encode())
            return self._send(404, json.dumps({"detail": "Not Found"}).encode())

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if not self._authorized():
                return self._send(401, json.dumps({"error": "Unauthorized"}).encode())
            if self.path != "/v1/chat/completions" or not body.get("stream"):
                return self._send(404, json.dumps({"detail": "Not Found"}).encode())
            usage_each = bool((body.get("stream_options") or {}).get("continuous_usage_stats"))
            budget = int(body.get("max_tokens") or sum(sizes))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            done = 0
            for size in sizes:
                size = min(size, budget - done)
                if size <= 0:
                    break
                done += size
                chunk = {"id": "x", "object": "chat.completion.chunk", "model": name,
                         "choices": [{"index": 0, "delta": {"content": "tok " * size}, "finish_reason": None}]}
                if usage_each:
                    chunk["usage"] = {"prompt_tokens": 5, "completion_tokens": done, "total_tokens": 5 + done}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            last = {"id": "x", "object": "chat.completion.chunk", "model": name,
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
            if usage_each:
                last["usage"] = {"prompt_tokens": 5, "completion_tokens": done, "total_tokens": 5 + done}
            self.wfile.write(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())
            self.wfile.flush()
            self.close_connection = True

        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer((a.host, a.port), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    print("The server is fired up and ready to roll!", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
