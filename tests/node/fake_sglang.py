"""A stand-in HTTP server that replays the replies of a real SGLang 0.5.17 server
(tests/data/h100_sglang0517_capture/, recorded on an H100: PROVENANCE.md there).
NOT SGLang: no model runs; the shapes are the recorded ones, the numbers follow the
requests this stand-in serves.

- argv as `python -m sglang.launch_server`: --model-path (alias --model),
  --served-model-name, --host, --port, --api-key, --config YAML (keys are the flags
  without "--": `api-key: "..."`), --speculative-num-steps, --speculative-num-draft-tokens,
  --context-length, --skip-server-warmup; anything else is ignored.
- GET /health: 503 while starting (--startup_s), then 200 with an empty body.
- GET /server_info (and /get_server_info): the recorded server_info.json (its "version"
  is "0.5.17") with model_path, tokenizer_path, served_model_name, host and port set to
  this server's. There is no /version (404).
- GET /v1/models: the recorded list, the served name as "id" and "root" (as recorded).
- GET /metrics: the recorded exposition (metric names, HELP/TYPE, label sets) with the
  served name as model_name. The counters move per finished request as SGLang's do:
  sglang:spec_verify_calls_total (labels engine_type, model_name) by the request's
  decode chunks (one verify step each; the first chunk is the prefill token),
  generation_tokens_total / prompt_tokens_total / num_requests_total (label is_streaming
  too) and the generation_tokens histogram; the gauges spec_accept_length (decode tokens
  per verify step of the last request) and spec_accept_rate follow the last request,
  spec_num_steps / spec_num_draft_tokens the flags. Other counters and histograms read 0
  (not modelled); other gauges keep their recorded values. As the real server, the
  counters start with its start-up warm-up (one non-streamed request of 8 tokens) unless
  --skip-server-warmup.
- With a key, every path but /health* and /metrics wants `Authorization: Bearer KEY` (401).
- POST /v1/chat/completions, streamed as recorded: a role chunk (content "", no usage),
  one content chunk per step of --chunk_sizes (cut at max_tokens / max_completion_tokens),
  each with cumulative usage when stream_options.continuous_usage_stats is set, a finish
  chunk (delta without content, no usage), a choices-less usage chunk when
  stream_options.include_usage is set, then `data: [DONE]`. --merge_after N streams the
  chunks after the first N as one (the server's steps and counters are unchanged), as the
  real server did under SGLANG_SIMULATE_ACC_LEN: its forced token decodes to an incomplete
  UTF-8 character, so SGLang held the text to the end (merged text is U+FFFD, as recorded).
  Non-streamed: one reply shaped as the recorded nonstream.json.
  finish_reason is "length" when max_tokens cut the steps, else "stop".
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional

CAPTURE = Path(__file__).resolve().parents[1] / "data" / "h100_sglang0517_capture"
SERVER_INFO = json.loads((CAPTURE / "server_info.json").read_text())
MODELS = json.loads((CAPTURE / "models.json").read_text())
NONSTREAM = json.loads((CAPTURE / "nonstream.json").read_text())
METRICS_TEXT = (CAPTURE / "metrics.txt").read_text()
VERSION = SERVER_INFO["version"]
RECORDED_NAME = SERVER_INFO["served_model_name"]
WARMUP_TOKENS, WARMUP_PROMPT = 8, 13  # the recorded warm-up: 56 - 48 generated, 35 - 22 prompt tokens
MERGED_CHAR = "\ufffd"


def recorded_events() -> list[dict]:
    """The recorded stream's JSON events (stream.txt, without [DONE])."""
    out = []
    for line in (CAPTURE / "stream.txt").read_text().splitlines():
        if line.startswith("data: ") and line[6:].strip() != "[DONE]":
            out.append(json.loads(line[6:]))
    return out


EVENTS = recorded_events()
ROLE_EVENT = EVENTS[0]                                      # delta role + content "", no usage
CONTENT_EVENT = EVENTS[1]                                   # delta content
FINISH_EVENT = next(e for e in EVENTS if e["choices"] and e["choices"][0].get("finish_reason"))
USAGE_EVENT = EVENTS[-1]                                    # choices [] + usage
assert "usage" not in ROLE_EVENT and not USAGE_EVENT["choices"] and "content" not in FINISH_EVENT["choices"][0]["delta"]


def dumps(obj) -> str:
    """As SGLang writes its JSON: compact, non-ASCII as is."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


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


def plan(sizes: list[int], budget: int) -> tuple[list[int], str]:
    """The server's steps for one request: (tokens per step, the first being the prefill
    token; finish reason)."""
    steps, done = [], 0
    for size in sizes:
        size = min(size, budget - done)
        if size <= 0:
            break
        steps.append(size)
        done += size
    return steps, ("length" if done >= budget else "stop")


def streamed(steps: list[int], merge_after: Optional[int]) -> list[tuple[int, str]]:
    """The chunks the client sees: (tokens, text). With merge_after N, the steps after the
    first N come as one chunk whose text is U+FFFD per token."""
    if merge_after is None or len(steps) <= merge_after:
        return [(s, " tok" * s) for s in steps]
    rest = sum(steps[merge_after:])
    return [(s, " tok" * s) for s in steps[:merge_after]] + [(rest, MERGED_CHAR * rest)]


def usage(prompt: int, completion: int) -> dict:
    u = copy.deepcopy(USAGE_EVENT["usage"])  # the recorded keys, in the recorded order
    u.update(prompt_tokens=prompt, total_tokens=prompt + completion, completion_tokens=completion)
    return u


def prompt_tokens(body: dict) -> int:
    """A word count of the messages (no tokenizer here), at least 1."""
    words = sum(len(str(m.get("content") or "").split()) for m in body.get("messages") or [])
    return max(1, words)


class Counters:
    """SGLang's per-finished-request counters, and the gauges of the last request."""

    def __init__(self, k: int, draft_tokens: int) -> None:
        self.lock = threading.Lock()
        self.k, self.draft_tokens = k, draft_tokens
        self.verify = 0
        self.gen = {"false": 0, "true": 0}
        self.prompt = {"false": 0, "true": 0}
        self.requests = {"false": 0, "true": 0}
        self.lengths: list[int] = []
        self.accept_length: Optional[float] = None
        self.accept_rate: Optional[float] = None

    def finish(self, steps: list[int], prompt: int, streaming: bool) -> None:
        decode = steps[1:]
        s = "true" if streaming else "false"
        with self.lock:
            self.verify += len(decode)
            self.gen[s] += sum(steps)
            self.prompt[s] += prompt
            self.requests[s] += 1
            self.lengths.append(sum(steps))
            if decode:
                self.accept_length = sum(decode) / len(decode)
                self.accept_rate = (sum(decode) - len(decode)) / (len(decode) * max(1, self.draft_tokens - 1))

    def render(self, name: str) -> str:
        with self.lock:
            return render_metrics(self, name)


SAMPLE = re.compile(r'^(?P<name>[^{\s]+)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?P<rest>.*)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def render_metrics(c: Counters, name: str) -> str:
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", METRICS_TEXT, re.M))
    served = json.dumps(name)[1:-1]
    out = []
    for line in METRICS_TEXT.splitlines():
        m = SAMPLE.match(line)
        if line.startswith("#") or not m:
            out.append(line)
            continue
        metric, labels_text = m["name"], m["labels"] or ""
        labels = dict(LABEL.findall(labels_text))
        family = next((f for f in (metric, re.sub(r"_(bucket|sum|count|total)$", "", metric)) if f in types), metric)
        value: Optional[float] = None
        s = labels.get("is_streaming")
        if metric == "sglang:spec_verify_calls_total":
            value = c.verify
        elif metric == "sglang:generation_tokens_total" and s:
            value = c.gen[s]
        elif metric == "sglang:prompt_tokens_total" and s:
            value = c.prompt[s]
        elif metric == "sglang:num_requests_total" and s:
            value = c.requests[s]
        elif metric == "sglang:generation_tokens_histogram_bucket":
            le = float(labels["le"])
            value = sum(1 for n in c.lengths if n <= le)
        elif metric == "sglang:generation_tokens_histogram_sum":
            value = sum(c.lengths)
        elif metric == "sglang:generation_tokens_histogram_count":
            value = len(c.lengths)
        elif metric == "sglang:spec_accept_length":
            value = c.accept_length if c.accept_length is not None else 0.0
        elif metric == "sglang:spec_accept_rate":
            value = c.accept_rate if c.accept_rate is not None else 0.0
        elif metric == "sglang:spec_num_steps":
            value = c.k
        elif metric == "sglang:spec_num_draft_tokens":
            value = c.draft_tokens
        elif types.get(family) in ("counter", "histogram"):
            value = 0.0  # not modelled
        text = m["value"] if value is None else repr(float(value))
        labels_out = labels_text.replace(f'model_name="{RECORDED_NAME}"', f'model_name="{served}"')
        out.append(f"{metric}{{{labels_out}}} {text}{m['rest']}" if m["labels"] is not None
                   else f"{metric} {text}{m['rest']}")
    return "\n".join(out) + "\n"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model-path", "--model", dest="model_path", required=True)
    p.add_argument("--served-model-name")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--api-key")
    p.add_argument("--config")
    p.add_argument("--context-length", type=int)
    p.add_argument("--speculative-num-steps", type=int, default=SERVER_INFO["speculative_num_steps"])
    p.add_argument("--speculative-num-draft-tokens", type=int, default=SERVER_INFO["speculative_num_draft_tokens"])
    p.add_argument("--skip-server-warmup", action="store_true")
    p.add_argument("--startup_s", type=float, default=0.5)
    p.add_argument("--chunk_sizes", default="1,3,2,4")
    p.add_argument("--merge_after", type=int, default=None,
                   help="stream the chunks after the first N as one (SGLANG_SIMULATE_ACC_LEN's held text)")
    a, _unknown = p.parse_known_args()
    if a.config:  # SGLang merges the YAML under the command line's flags
        cfg = read_config(a.config)
        a.api_key = a.api_key or cfg.get("api-key") or cfg.get("api_key")
    name = a.served_model_name or a.model_path
    sizes = [int(x) for x in a.chunk_sizes.split(",")]
    counters = Counters(a.speculative_num_steps, a.speculative_num_draft_tokens)
    if not a.skip_server_warmup:
        counters.finish(plan(sizes, WARMUP_TOKENS)[0], WARMUP_PROMPT, streaming=False)
    t_up = time.monotonic() + a.startup_s
    print(f"stand-in sglang {VERSION} pid {os.getpid()} on {a.host}:{a.port}", flush=True)

    info = dict(SERVER_INFO, model_path=a.model_path, served_model_name=name, host=a.host, port=a.port,
                api_key=None)  # SGLang blanks secrets in its server info
    if SERVER_INFO["tokenizer_path"] == SERVER_INFO["model_path"]:
        info["tokenizer_path"] = a.model_path
    models = copy.deepcopy(MODELS)
    models["data"][0].update(id=name, root=name)
    if a.context_length:
        models["data"][0]["max_model_len"] = a.context_length

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
            if self.path == "/metrics":
                return self._send(200, counters.render(name).encode(), "text/plain; version=0.0.4; charset=utf-8")
            if self.path == "/v1/models":
                models["data"][0]["created"] = int(time.time())
                return self._send(200, dumps(models).encode())
            if self.path in ("/server_info", "/get_server_info"):
                return self._send(200, dumps(info).encode())
            return self._send(404, json.dumps({"detail": "Not Found"}).encode())

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if not self._authorized():
                return self._send(401, json.dumps({"error": "Unauthorized"}).encode())
            if self.path != "/v1/chat/completions":
                return self._send(404, json.dumps({"detail": "Not Found"}).encode())
            budget = int(body.get("max_completion_tokens") or body.get("max_tokens") or sum(sizes))
            steps, finish = plan(sizes, budget)
            chunks = streamed(steps, a.merge_after)
            n_prompt = prompt_tokens(body)
            rid, created = uuid.uuid4().hex, int(time.time())
            if not body.get("stream"):
                reply = copy.deepcopy(NONSTREAM)
                reply.update(id=rid, created=created, model=name, usage=usage(n_prompt, sum(steps)))
                reply["choices"][0]["message"]["content"] = "".join(t for _, t in chunks)
                reply["choices"][0]["finish_reason"] = finish
                counters.finish(steps, n_prompt, streaming=False)
                return self._send(200, dumps(reply).encode())
            opts = body.get("stream_options") or {}
            usage_each = bool(opts.get("continuous_usage_stats"))

            def event(template: dict, **choice) -> dict:
                e = copy.deepcopy(template)
                e.update(id=rid, created=created, model=name)
                if e["choices"]:
                    e["choices"][0].update(choice)
                return e

            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            out = [event(ROLE_EVENT)]
            done = 0
            for tokens, text in chunks:
                done += tokens
                e = event(CONTENT_EVENT)
                e["choices"][0]["delta"]["content"] = text
                if usage_each:
                    e["usage"] = usage(n_prompt, done)
                out.append(e)
            out.append(event(FINISH_EVENT, finish_reason=finish))
            if opts.get("include_usage"):
                out.append(dict(event(USAGE_EVENT), usage=usage(n_prompt, done)))
            counters.finish(steps, n_prompt, streaming=True)  # the request has finished on the server
            for e in out:
                self.wfile.write(f"data: {dumps(e)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
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
