"""Runs many `python -m launcher ... dry_run=true` lines in one process (the docs' dry runs): the
launcher's imports are paid once instead of once per line. Reads a JSON list of argument lists
(what follows `-m launcher`) on stdin, writes a JSON list of {rc, stdout, stderr} on stdout, in
order. Each line runs through the command's own entry point (launcher.login.cli.main) with its
output captured; a line that raises is a failure with its traceback, as the process would end."""
from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback


def run(args: list[str]) -> dict:
    from launcher.login.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(args))
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except Exception:  # noqa: BLE001 - what the process would print before it ended
            traceback.print_exc()
            rc = 1
    return {"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()}


if __name__ == "__main__":
    real_stdout = sys.stdout
    results = [run(a) for a in json.load(sys.stdin)]
    real_stdout.write(json.dumps(results))
