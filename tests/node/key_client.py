"""A benchmark stand-in for the API-key tests (SPECDEC_BENCH_MODULE=key_client).

Checks, against the running server, that the key in its own environment
(SPECDEC_API_KEY) opens /v1/models and that no key is refused; writes what it
found to <save_dir>/key_check.json with the key's sha256 (never the key), then
waits until <save_dir>/release exists (so a test can inspect the live server).
"""
from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import time
from urllib.parse import urlsplit


def get(url: str, path: str, headers: dict) -> int:
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        r.read()
        return r.status
    finally:
        conn.close()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--save_dir", required=True)
    a, _ = p.parse_known_args()
    key = os.environ.get("SPECDEC_API_KEY")
    os.makedirs(a.save_dir, exist_ok=True)
    out = {"has_key": bool(key), "vllm_api_key_in_client_env": "VLLM_API_KEY" in os.environ,
           "sha256": hashlib.sha256(key.encode()).hexdigest() if key else None,
           "with_key": get(a.url, "/v1/models", {"Authorization": f"Bearer {key}"} if key else {}),
           "without_key": get(a.url, "/v1/models", {})}
    with open(os.path.join(a.save_dir, "key_check.json"), "w") as f:
        json.dump(out, f)
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(a.save_dir, "release")) and time.time() < deadline:
        time.sleep(0.1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
