"""The one reader of hand-written argv lists: which flags a list holds, the list
without some of them (the recipe's extra arguments win over computed ones), the
values of a flag in a server argv a user wrote (run.sh's, the recipe's
``server.extra_args``), and run.sh's `SERVER ARGS -- BENCH ARGS` split. Nothing
else in the tree reads an argv by hand (tests/test_dependencies.py checks it):
the job spec carries typed fields, and argvs are only built from them.
"""
from __future__ import annotations

import re
from typing import Optional, Sequence
import json

KV_CACHE_FLAG = "--kv-cache-memory-bytes"
SPECULATIVE_CONFIG_FLAG = "--speculative-config"  # vLLM's speculative config as one JSON flag
SERVED_NAME_FLAG = "--served-model-name"


def flag_names(args: list[str]) -> set[str]:
    """The flags present in an argv list (`--x v` and `--x=v` forms)."""
    return {a.split("=", 1)[0] for a in args if a.startswith("--")}


def drop_flags(args: list[str], names: set[str]) -> list[str]:
    """Remove flags (and their values) named in `names` from an argv list."""
    out, i = [], 0
    while i < len(args):
        a = args[i]
        name = a.split("=", 1)[0]
        if a.startswith("--") and name in names:
            i += 1
            if "=" not in a and i < len(args) and not args[i].startswith("--"):
                i += 1  # its value
            continue
        out.append(a)
        i += 1
    return out


def _norm_flag(arg: str) -> str:
    name = arg.split("=", 1)[0]
    return "--" + name[2:].replace("_", "-") if name.startswith("--") else name


def flag_values(args: Sequence[str], flag: str) -> Optional[list[str]]:
    """The values of the last occurrence of ``flag`` (`--x v [v2 ...]` or
    `--x=v`; `--x_y` spelled with underscores counts), or None if absent."""
    found: Optional[list[str]] = None
    args = list(args)
    for i, a in enumerate(args):
        if not a.startswith("--") or _norm_flag(a) != flag:
            continue
        if "=" in a:
            found = [a.split("=", 1)[1]]
        else:
            vals = []
            for v in args[i + 1:]:
                if v.startswith("--"):
                    break
                vals.append(v)
            found = vals
    return found


_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_human_int(value: str) -> int:
    """vLLM's human-readable integers: lowercase k/m/g/t are decimal (1k = 1000,
    25.6k = 25600), uppercase K/M/G/T binary (1K = 1024, no decimals)."""
    v = value.strip()
    m = _HUMAN_INT.fullmatch(v)
    if m:
        number, suffix = m.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." in number:
            raise ValueError(f"decimals are not allowed with binary suffix {suffix}: {value!r}")
        return int(number) * _BINARY[suffix]
    return int(v)


def kv_cache_cap_bytes(server_args: Sequence[str]) -> Optional[int]:
    """The KV-cache cap from --kv-cache-memory-bytes in the server flags, or None."""
    vals = flag_values(server_args, KV_CACHE_FLAG)
    if not vals:
        return None
    try:
        n = parse_human_int(vals[0])
    except ValueError:
        return None
    return n if n > 0 else None


def served_name(server_args: Sequence[str], model: str) -> str:
    """The name /v1/models lists: the first --served-model-name, else the model as given."""
    vals = flag_values(server_args, SERVED_NAME_FLAG)
    return vals[0] if vals else model


def flag_value(args: Sequence[str], flag: str) -> Optional[str]:
    """The first value of the last occurrence of ``flag``, or None."""
    vals = flag_values(args, flag)
    return vals[0] if vals else None


def speculative_config(server_args: Sequence[str]) -> Optional[dict]:
    """The JSON of --speculative-config in a hand-written server argv (run.sh's), or None."""
    raw = flag_value(server_args, SPECULATIVE_CONFIG_FLAG)
    try:
        v = json.loads(raw) if raw else None
    except ValueError:
        return None
    return v if isinstance(v, dict) else None


def pick_flags(args: Sequence[str], names: set[str]) -> list[str]:
    """The flags named in ``names`` (with their values), in order: what drop_flags removes."""
    out, i, args = [], 0, list(args)
    while i < len(args):
        a = args[i]
        i += 1
        if a.startswith("--") and a.split("=", 1)[0] in names:
            out.append(a)
            if "=" not in a and i < len(args) and not args[i].startswith("--"):
                out.append(args[i])
                i += 1
    return out


def has_flag(args: Sequence[str], flag: str) -> bool:
    """True when ``flag`` (also spelled with underscores, or as --flag=value) is among ``args``."""
    return any(a.startswith("--") and _norm_flag(a) == flag for a in args)


def split_at_separator(argv: Sequence[str]) -> Optional[tuple[list[str], list[str]]]:
    """run.sh's convention: (arguments before the first `--`, after it), or None without `--`."""
    argv = list(argv)
    if "--" not in argv:
        return None
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def flag_settings(args: Sequence[str]) -> dict[str, str]:
    """Every flag of an argv and its value: ``--x v`` and ``--x=v`` give "v", a flag followed by
    several values gives them joined by a space, a bare flag gives "". Names are spelled with
    dashes (``--x_y`` reads as ``--x-y``); the last occurrence wins; anything before the first
    flag (the command and the model) is not a setting."""
    out: dict[str, str] = {}
    args = [str(a) for a in args]
    for i, a in enumerate(args):
        if not a.startswith("--") or a == "--":
            continue
        if "=" in a:
            out[_norm_flag(a)] = a.split("=", 1)[1]
            continue
        vals = []
        for v in args[i + 1:]:
            if v.startswith("--"):
                break
            vals.append(v)
        out[_norm_flag(a)] = " ".join(vals)
    return out
