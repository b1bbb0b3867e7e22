"""Run specdec_bench's run.py with keys merged into the speculative config its VLLM engine
builds, e.g. vLLM's forced acceptance, without changing specdec_bench (whose VLLMModel spells
the speculative config itself): vLLM's AsyncEngineArgs is wrapped before run.py is loaded.

    cd MODELOPT/examples/specdec_bench && python3 specdec_bench_forced.py \\
        '{"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.5}' run.py ARGS...
"""
from __future__ import annotations

import json
import os
import runpy
import sys


def main() -> None:
    if len(sys.argv) < 3:
        raise SystemExit("usage: specdec_bench_forced.py JSON_KEYS run.py [ARGS...]")
    extra = json.loads(sys.argv[1])
    script = sys.argv[2]
    from vllm.engine import arg_utils

    base = arg_utils.AsyncEngineArgs

    class ForcedEngineArgs(base):  # the same dataclass; only the speculative config gains the keys
        def __init__(self, *args, **kwargs):
            spec = kwargs.get("speculative_config")
            if spec:
                kwargs["speculative_config"] = {**spec, **extra}
                print(f"specdec_bench_forced: speculative_config {kwargs['speculative_config']}", flush=True)
            super().__init__(*args, **kwargs)

    arg_utils.AsyncEngineArgs = ForcedEngineArgs
    sys.argv = [script, *sys.argv[3:]]
    sys.path.insert(0, os.getcwd())
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
