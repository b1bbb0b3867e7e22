"""A tiny benchmark stand-in for the node tests (run as SPECDEC_BENCH_MODULE=mini_client).

Sends N non-streaming chat requests to --url, saves each response's
``metrics.speculative_decoding`` to <save_dir>/spec_stats.json, and exits 1 if
any response lacks it (or a request fails). With --then_wait_s it then sleeps,
like a long benchmark would run, so tests can act while "the benchmark" runs.
Standard library only.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import time
from urllib.parse import urlsplit


def chat(url: str, model: str, content: str, max_tokens: int, timeout: float) -> dict:
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": content}],
                       "max_tokens": max_tokens, "temperature": 0})
    try:
        conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {data[:300]!r}")
        return json.loads(data)
    finally:
        conn.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--save_dir", required=True)
    p.add_argument("--num_requests", type=int, default=4)
    p.add_argument("--max_tokens", type=int, default=32)
    p.add_argument("--timeout_s", type=float, default=120)
    p.add_argument("--then_wait_s", type=float, default=0)
    p.add_argument("--then_request", action="store_true", help="after the wait, one more request (it may fail)")
    a = p.parse_args(argv)
    os.makedirs(a.save_dir, exist_ok=True)
    stats, missing = [], 0
    ready_file = os.environ.get("SPECDEC_SERVER_READY_FILE")
    for i in range(a.num_requests):
        r = chat(a.url, a.model, f"Tell me about item {i}, please.", a.max_tokens, a.timeout_s)
        sd = (r.get("metrics") or {}).get("speculative_decoding")
        if sd is None:
            missing += 1
        stats.append({"id": r.get("id"), "speculative_decoding": sd,
                      "completion_tokens": (r.get("usage") or {}).get("completion_tokens")})
    out = {"url": a.url, "num_requests": a.num_requests, "missing": missing, "responses": stats,
           "server_ready": json.load(open(ready_file)) if ready_file and os.path.exists(ready_file) else None}
    tmp = os.path.join(a.save_dir, ".spec_stats.json.tmp")
    with open(tmp, "w") as f:
        json.dump(out, f, indent=2)
    os.replace(tmp, os.path.join(a.save_dir, "spec_stats.json"))
    print(f"mini_client: {a.num_requests} responses, {missing} without spec stats", flush=True)
    if a.then_wait_s:
        time.sleep(a.then_wait_s)
    if a.then_request:
        try:
            chat(a.url, a.model, "One more, please.", a.max_tokens, a.timeout_s)
        except Exception as e:  # noqa: BLE001
            print(f"mini_client: the last request failed: {e}", flush=True)
            return 1
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
