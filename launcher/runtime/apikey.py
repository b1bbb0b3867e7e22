"""The server's API key: one rule, used by the node job and every client.

- A server bound to a loopback address (127.0.0.1, ::1, localhost) is open
  unless the user gives a key.
- A server bound to anything else (0.0.0.0 on a cluster) always gets a key: the
  user's, or one generated for this job.
- The user's key comes from the environment, SPECDEC_API_KEY (or the variable
  an engine itself reads, launcher.engines.key_envs). It never goes on a command
  line or into a file of the run.
- The server receives the key the way its engine takes it (ApiKey.server_key:
  an environment variable, or a private file removed once the server is up);
  the clients (readiness, preflight, AIPerf, the lossless check) receive it as
  SPECDEC_API_KEY in theirs and send ``Authorization: Bearer <key>``.

The engine's key flag among the server's own arguments is refused (it would be
written to job.json, the logs and the process list): ``api_key_in_args`` finds it.

Standard library only.
"""
from __future__ import annotations

import ipaddress
import os
import secrets
from pathlib import Path
from typing import Mapping, Optional, Sequence

from launcher.engines import ApiKey, ServerKey, key_envs
from launcher.engines.flags import has_flag

CLIENT_ENV = "SPECDEC_API_KEY"  # what our clients read


def fix(engine: ApiKey) -> str:
    """The fix for a key flag among the server's arguments."""
    return (f"remove {engine.key_flag} from the server arguments and export {CLIENT_ENV}=<key> in the job's "
            f"environment instead (off loopback a per-job key is generated)")


def is_loopback(host: str) -> bool:
    h = host.strip().strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def user_key(env: Mapping[str, str]) -> Optional[str]:
    """The key the user exported, if any (SPECDEC_API_KEY first, then an engine's own variable)."""
    for name in (CLIENT_ENV, *key_envs()):
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


def api_key_in_args(args: Sequence[str], engine: ApiKey) -> bool:
    """True when the engine's key flag (``--api-key``, ``--api_key``, ``--api-key=...``) is among ``args``."""
    return has_flag(args, engine.key_flag)


def _without_keys(base: Mapping[str, str]) -> dict:
    env = dict(base)
    for name in (CLIENT_ENV, *key_envs()):
        env.pop(name, None)
    return env


def server_launch(key: Optional[str], base: Mapping[str, str], engine: ApiKey,
                  private_dir: Path) -> tuple[dict, ServerKey]:
    """The server's environment and how it receives the key (ApiKey.server_key: extra
    argv naming a private file, or a variable); no key in any other variable."""
    env = _without_keys(base)
    if not key:
        return env, ServerKey()
    how = engine.server_key(key, Path(private_dir))
    env.update(how.env)
    return env, how


def client_env(key: Optional[str], base: Mapping[str, str]) -> dict:
    """A client's environment: the key as SPECDEC_API_KEY; the engines' variables removed so
    a client that happens to start engine code does not pick it up by accident."""
    env = _without_keys(base)
    if key:
        env[CLIENT_ENV] = key
    return env


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
