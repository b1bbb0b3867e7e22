"""The speedup command's options for the fleet comparison (launcher.speedup.fleet, docs/fleet.md):
``--gpu-hour-price USD`` and ``--per-user-speed TOK_S ...``."""
from __future__ import annotations

import argparse
from typing import Optional

from launcher.speedup.fleet import CLI_PRICE, Options


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--gpu-hour-price", type=float, default=None, metavar="USD",
                    help="what one GPU costs an hour, in US dollars: adds dollars per million output tokens per "
                         "point and at equal per-user speed (default: the recipe's cluster.gpu_hour_price; "
                         "neither: no dollar figures) (docs/fleet.md)")
    ap.add_argument("--per-user-speed", type=float, nargs="+", default=(), metavar="TOK_S",
                    help="also compare each speculative server with its baseline at these per-user decode speeds "
                         "(tok/s each user sees), besides the measured points' (docs/fleet.md)")


def options(args: argparse.Namespace) -> tuple[Optional[Options], Optional[str]]:
    """(the options, None) or (None, the one-line error naming the flag and the fix)."""
    price, speeds = args.gpu_hour_price, tuple(args.per_user_speed or ())
    if price is not None and not price > 0:
        return None, f"--gpu-hour-price is {price:g}: give what one GPU costs an hour in US dollars, e.g. 2.50"
    if any(not x > 0 for x in speeds):
        return None, "--per-user-speed takes per-user decode speeds in tok/s, each above 0, e.g. 50 100"
    if price is None and not speeds:
        return None, None
    return Options(price, CLI_PRICE if price is not None else None, speeds), None
