"""Flag lists as the planner builds them: which flags a list holds, and the list
without some of them (the recipe's extra arguments win over computed ones)."""
from __future__ import annotations


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
