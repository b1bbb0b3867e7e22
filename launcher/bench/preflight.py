"""Talk to the running server before the sweep: its version, and one short
request proving that per-request spec-decode stats come back."""
from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from typing import Iterator, Optional

from launcher.runtime.apikey import auth_headers
from launcher.engines import Engine
from launcher.bench.stream_chunks import stream_chat_chunks


class PreflightError(RuntimeError):
    pass


def http_json(url: str, body: Optional[dict] = None, timeout: float = 60.0) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **auth_headers()})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read().decode())


def engine_version(base_url: str, engine: Engine) -> Optional[str]:
    """The version the server reports at its engine's version endpoint, or None."""
    try:
        req = urllib.request.Request(f"{base_url}{engine.version_path}", headers=auth_headers())
        with urllib.request.urlopen(req, timeout=10) as r:
            return engine.version_from_response(r.read())
    except (OSError, ValueError, urllib.error.URLError):
        return None


def chat(base_url: str, model: str, prompt: str, max_tokens: int, extra: Optional[dict] = None,
         timeout: float = 120.0) -> dict:
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "stream": False, **(extra or {})}
    return http_json(f"{base_url}/v1/chat/completions", body, timeout=timeout)


@contextlib.contextmanager
def _request_to(base_url: str) -> Iterator[None]:
    """A preflight request's failures as one PreflightError each, with the fix where there is one."""
    try:
        yield
    except urllib.error.HTTPError as e:
        if e.code in (401, 403):
            raise PreflightError(f"preflight request to {base_url} was refused (HTTP {e.code}): the server wants "
                                 "an API key the client does not have (fix: export SPECDEC_API_KEY=<the server's "
                                 "key> for the benchmark)") from None
        raise PreflightError(f"preflight request to {base_url} failed: HTTP {e.code} {e.read()[:200]!r}") from None
    except (OSError, urllib.error.URLError) as e:
        raise PreflightError(f"preflight request to {base_url} failed: {e}") from None


def check_spec_stats(base_url: str, model: str, engine: Engine) -> dict:
    """One short request; the response must carry the engine's per-request stats."""
    with _request_to(base_url):
        resp = chat(base_url, model, "Say hello.", 8, {"temperature": 0.0})
    stats = engine.request_stats(resp)
    if not stats:
        raise PreflightError(
            f"the server returns no per-request spec-decode stats: {engine.acceptance_hint()}, or "
            "benchmark a baseline with draft=none")
    return stats


def check_stream_usage(base_url: str, model: str) -> list[int]:
    """One short streamed request; every chunk must carry cumulative usage, so that
    acceptance can be counted from the stream (engines without per-request stats)."""
    try:
        with _request_to(base_url):
            chunks, _ = stream_chat_chunks(base_url, model, "Say hello.", 8, {"temperature": 0.0},
                                           headers=auth_headers())
    except ValueError as e:
        raise PreflightError(str(e)) from None
    return chunks
