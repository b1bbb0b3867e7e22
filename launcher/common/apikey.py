"""The server's API key: one rule, used by the node job and every client.

- A server bound to a loopback address (127.0.0.1, ::1, localhost) is open
  unless the user gives a key.
- A server bound to anything else (0.0.0.0 on a cluster) always gets a key: the
  user's, or one generated for this job.
- The user's key comes from the environment, SPECDEC_API_KEY (or VLLM_API_KEY,
  which vLLM itself reads). It never goes on a command line or into a file.
- The server receives the key as VLLM_API_KEY in its environment; the clients
  (readiness, preflight, AIPerf, the lossless check) receive it as
  SPECDEC_API_KEY in theirs and send ``Authorization: Bearer <key>``.

`--api-key` among the server's own arguments is refused (it would be written
to job.json, the logs and the process list): ``api_key_in_args`` finds it.

Standard library only.
"""
from __future__ import annotations

import ipaddress
import os
import secrets
from typing import Mapping, Optional, Sequence

CLIENT_ENV = "SPECDEC_API_KEY"  # what our clients read
SERVER_ENV = "VLLM_API_KEY"  # what vLLM reads
API_KEY_FLAG = "--api-key"
FIX = (f"remove --api-key from the server arguments and export {CLIENT_ENV}=<key> in the job's environment "
       f"instead (off loopback a per-job key is generated)")


def is_loopback(host: str) -> bool:
    h = host.strip().strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def user_key(env: Mapping[str, str]) -> Optional[str]:
    """The key the user exported, if any (SPECDEC_API_KEY first, then VLLM_API_KEY)."""
    for name in (CLIENT_ENV, SERVER_ENV):
        v = env.get(name, "").strip()
        if v:
            return v
    return None


def job_key(bind_host: str, env: Mapping[str, str]) -> Optional[str]:
    """The key this job's server runs with: the user's, else a fresh one when the
    server is reachable from other hosts, else None (loopback, open)."""
    k = user_key(env)
    if k is not None:
        return k
    if is_loopback(bind_host):
        return None
    return secrets.token_hex(32)  # never starts with "-", which a client's parser would read as a flag


def api_key_in_args(args: Sequence[str]) -> bool:
    """True when ``--api-key`` (or ``--api_key``, ``--api-key=...``) is among ``args``."""
    from launcher.engines.flags import has_flag  # the one reader of argv lists

    return has_flag(args, API_KEY_FLAG)


def _env_with_key(key: Optional[str], base: Mapping[str, str], var: str, other: str) -> dict:
    """``base`` with the key in ``var`` only (``var`` unset without a key) and ``other`` removed."""
    env = dict(base)
    env.pop(other, None)
    env.pop(var, None)
    if key:
        env[var] = key
    return env


def server_env(key: Optional[str], base: Mapping[str, str]) -> dict:
    """The server's environment: the key as VLLM_API_KEY (and only there)."""
    return _env_with_key(key, base, SERVER_ENV, CLIENT_ENV)


def client_env(key: Optional[str], base: Mapping[str, str]) -> dict:
    """A client's environment: the key as SPECDEC_API_KEY; VLLM_API_KEY removed so a
    client that happens to start vLLM code does not pick it up by accident."""
    return _env_with_key(key, base, CLIENT_ENV, SERVER_ENV)


def client_key(env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The key a client sends (from its environment), or None."""
    return user_key(os.environ if env is None else env)


def auth_headers(key: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> dict:
    """``{"Authorization": "Bearer <key>"}`` when there is a key, else ``{}``."""
    k = key if key is not None else client_key(env)
    return {"Authorization": f"Bearer {k}"} if k else {}


def redact(text: str, key: Optional[str]) -> str:
    """``text`` with the key replaced (for anything that might echo it)."""
    return text.replace(key, "<redacted>") if key else text
