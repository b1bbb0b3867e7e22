"""Re-check configuration.json's secret masking before it leaves the machine.

formats.md: "any key containing token, key, secret or password is masked at
any depth, except tokenizer fields".  The benchmark (launcher/bench/
result_files.py) applies it word by word: a key is secret when one of its
words (split on non-alphanumerics and camelCase) ends in token, key, secret,
password or passwd, or is credential(s) or authorization; so hf_token and
apiKey are secret while num_speculative_tokens, stop_tokens and tokenizer are
not.  This module re-applies that rule to the written file instead of
trusting it:

1. a value under a secret key must be a mask (see ``is_masked``): strings and
   numbers, also inside lists/objects and inside JSON-object strings;
2. a secret-named command-line flag or assignment (``--hf-token X``,
   ``--api-key=X``, ``HF_TOKEN=X``), in an argv list or a command string,
   must carry a masked value;
3. no string anywhere may look like a well-known credential format;
4. no string may contain the value of a secret-named environment variable of
   this process (the uploader's own S3 secret, HF_TOKEN, ...).

Findings name the JSON path and the kind of secret, never the value.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator, Mapping

_SECRET_SUFFIXES = ("token", "key", "secret", "password", "passwd")
_SECRET_WORDS = {"credential", "credentials", "authorization"}
_MASK_WORDS = {"masked", "redacted", "***redacted***", "hidden", "<masked>", "<redacted>", "[masked]", "[redacted]", "<hidden>"}

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b")),
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,})")),
    ("an NVIDIA API key", re.compile(r"\bnvapi-[A-Za-z0-9_-]{20,}")),
    ("an OpenAI-style API key", re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("a bearer token", re.compile(r"\bBearer\s+[A-Za-z0-9._~+/=-]{16,}")),
)
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:(?P<pw>[^/\s@]+)@")
# "--hf-token X", "--api-key=X" inside a command string.
_FLAG_IN_TEXT = re.compile(r"(?:^|\s)--?(?P<name>[A-Za-z0-9_.-]+)(?:=|\s+)(?P<value>[^\s-]\S*)")
_ASSIGN_IN_TEXT = re.compile(r"(?:^|\s)(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>\S+)")
_FLAG_ONLY = re.compile(r"^--?(?P<name>[A-Za-z0-9_.-]+)$")
_FLAG_EQ = re.compile(r"^(?:--?)?(?P<name>[A-Za-z_-][A-Za-z0-9_.-]*)=(?P<value>.*)$")
_MIN_ENV_SECRET = 8


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]


def is_sensitive_name(name: str) -> bool:
    """The masking rule: hf_token, apiKey, DB_PASSWORD yes; max_tokens, tokenizer no."""
    return any(w.endswith(_SECRET_SUFFIXES) or w in _SECRET_WORDS for w in _words(name))


def is_masked(value: Any) -> bool:
    """True for values a masker leaves behind: None, '', '***', '<masked>', 'hf_****'."""
    if value is None:
        return True
    if not isinstance(value, str):
        return False
    text = value.strip()
    if not text or text.lower() in _MASK_WORDS:
        return True
    stars = text.count("*")
    return stars >= 3 and len(text) - stars <= 4


def _unmasked(value: str) -> bool:
    return not is_masked(value.strip().strip("'\""))


def _as_json_object(text: str) -> dict | None:
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        try:
            doc = json.loads(stripped)
        except json.JSONDecodeError:
            return None
        return doc if isinstance(doc, dict) else None
    return None


def _walk(node: Any, path: str) -> Iterator[tuple[str, str | None, Any]]:
    """Yield (json path, key name or None, value) for every node, entering
    strings that hold a JSON object (``--speculative-config '{...}'``)."""
    if isinstance(node, dict):
        items = [(f"{path}.{k}" if path else str(k), str(k), v) for k, v in node.items()]
    elif isinstance(node, list):
        items = [(f"{path}[{i}]", None, v) for i, v in enumerate(node)]
    elif isinstance(node, str) and (inner := _as_json_object(node)) is not None:
        items = [(f"{path}<json>.{k}", str(k), v) for k, v in inner.items()]
    else:
        return
    for child, key, value in items:
        yield child, key, value
        yield from _walk(value, child)


def _leaves(node: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every string or number at or below ``node`` (booleans are not secrets)."""
    for p, _, v in [(path, None, node), *_walk(node, path)]:
        if isinstance(v, (str, int, float)) and not isinstance(v, bool) and _as_json_object(str(v)) is None:
            yield p, v


def _strings(node: Any, path: str) -> Iterator[tuple[str, str]]:
    for p, v in _leaves(node, path):
        if isinstance(v, str):
            yield p, v


def _unmasked_under_key(config: Any) -> Iterator[str]:
    for path, key, value in _walk(config, ""):
        if key is None or not is_sensitive_name(key):
            continue
        for p, leaf in _leaves(value, path):
            if not is_masked(leaf):
                yield f"{p} holds an unmasked value (its name marks it as a secret)"


def _argv_flags(config: Any) -> Iterator[str]:
    for path, _, value in [("", None, config), *_walk(config, "")]:
        if isinstance(value, list) and all(isinstance(x, str) for x in value):
            for i, item in enumerate(value):
                m = _FLAG_EQ.match(item)
                if m and is_sensitive_name(m["name"]) and _unmasked(m["value"]):
                    yield f"{path}[{i}] passes {m['name'].lstrip('-')} an unmasked value"
                    continue
                m = _FLAG_ONLY.match(item)
                if m and is_sensitive_name(m["name"]) and i + 1 < len(value):
                    nxt = value[i + 1]
                    if not nxt.startswith("-") and _unmasked(nxt):
                        yield f"{path}[{i + 1}] is an unmasked value for --{m['name']}"
        elif isinstance(value, str) and " " in value:
            for pattern in (_FLAG_IN_TEXT, _ASSIGN_IN_TEXT):
                for m in pattern.finditer(value):
                    if is_sensitive_name(m["name"]) and _unmasked(m["value"]):
                        yield f"{path} passes {m['name']} an unmasked value"


def _known_formats(config: Any) -> Iterator[str]:
    for path, text in _strings(config, ""):
        for what, pattern in _PATTERNS:
            if pattern.search(text):
                yield f"{path} looks like {what}"
                break
        else:
            m = _URL_PASSWORD.search(text)
            if m and not is_masked(m["pw"]):
                yield f"{path} holds a URL with a password"


def _environment_secrets(env: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for name, value in env.items():
        upper = name.upper()
        if not is_sensitive_name(upper) or upper.endswith(("_PATH", "_FILE", "_DIR")):
            continue
        if len(value.strip()) >= _MIN_ENV_SECRET and not is_masked(value):
            out[name] = value.strip()
    return out


def _environment_values(config: Any, env: Mapping[str, str]) -> Iterator[str]:
    secrets = _environment_secrets(env)
    if not secrets:
        return
    for path, text in _strings(config, ""):
        for name, value in secrets.items():
            if value in text:
                yield f"{path} contains the value of the environment variable {name}"


def find_secrets(config: Any, env: Mapping[str, str] | None = None) -> list[str]:
    """One line per suspected credential in configuration.json (values never shown)."""
    findings: list[str] = []
    seen: set[str] = set()
    checks = [_unmasked_under_key(config), _argv_flags(config), _known_formats(config)]
    if env:
        checks.append(_environment_values(config, env))
    for check in checks:
        for finding in check:
            where = finding.split(" ", 1)[0]
            if where in seen:
                continue
            seen.add(where)
            findings.append(
                f"configuration.json: {finding}; mask it (e.g. \"***\") "
                "and re-check how the benchmark masks secrets"
            )
    return findings
