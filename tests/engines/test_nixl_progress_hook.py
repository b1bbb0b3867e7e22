"""NIXL's progress thread given a poll timeout (topology.kv_progress_poll_us; the hook in
launcher/engines/vllm_cpu_hooks/sitecustomize.py): the class swap on a stand-in of NIXL's
bindings, and on the real NIXL of the vLLM environment an agent built as vLLM builds it,
whose process idles instead of taking a core."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import types

from launcher.engines import get_engine
from launcher.engines.vllm import AMX_PERMISSION_HOOKS
from tests.support import stack

HOOK = AMX_PERMISSION_HOOKS / "sitecustomize.py"
# An agent as vLLM 0.32's NIXL connector builds one (nixl/base_worker.py: num_threads 4, telemetry on),
# then the process's CPU seconds over 2 s of the main thread sleeping
AGENT_CPU = ("import time; from nixl._api import nixl_agent, nixl_agent_config; "
             "a = nixl_agent('probe', nixl_agent_config(num_threads=4, capture_telemetry=True)); "
             "t = time.process_time(); time.sleep(2); print('cpu_s', time.process_time() - t)")


def _hook_module():
    spec = importlib.util.spec_from_file_location("specdec_hook_under_test", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # no SPECDEC_* variable set here: installs nothing
    return module


def test_the_agent_config_class_raises_a_zero_poll_timeout_and_keeps_a_longer_one():
    hook = _hook_module()

    class Config:  # NIXL's nixlAgentConfig: a class whose instances take pthrDelay (µs)
        pthrDelay = 0

    bindings = types.SimpleNamespace(nixlAgentConfig=Config)
    hook._slow_nixl_progress(bindings, 1000)
    cfg = bindings.nixlAgentConfig()
    assert isinstance(cfg, Config)
    cfg.pthrDelay = 0  # what NIXL's Python API sets
    assert cfg.pthrDelay == 1000
    cfg.pthrDelay = 5000
    assert cfg.pthrDelay == 5000
    cfg.lthrDelay = 0  # other fields untouched
    assert cfg.lthrDelay == 0


def test_the_finder_answers_only_for_nixls_bindings():
    hook = _hook_module()
    finder = hook._NixlFinder(1000)
    assert finder.find_spec("json", None) is None
    assert finder.find_spec("nixl_cu12._api", None) is None
    assert "nixl_cu12._bindings" in hook.NIXL_BINDINGS and "nixl._bindings" in hook.NIXL_BINDINGS


def test_a_real_nixl_agent_idles_with_the_timeout_and_spins_without_it(real_stack):
    base = {k: v for k, v in os.environ.items() if not k.startswith("SPECDEC_") and k != "PYTHONPATH"}
    hooked_env = {**base, **get_engine("vllm").disagg_env(5600, progress_poll_us=1000)}
    hooked_env.update(get_engine("vllm").cpu_server_env(frozenset(), hooked_env))  # the folder, as a server gets it

    def cpu_s(env):
        out = subprocess.run([str(stack.VLLM_PYTHON), "-c", AGENT_CPU], env=env, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        return float(out.stdout.split("cpu_s")[-1]), out.stderr

    hooked, log = cpu_s(hooked_env)
    bare, _ = cpu_s(base)
    assert "NIXL progress thread: poll timeout 1000 us" in log
    # as shipped the progress thread polls without pause: most of a core over the 2 s, or the share of
    # one a loaded 2-core machine leaves it (a third of a core beside six runnable threads: 0.67 s); with
    # the timeout it sleeps in poll(). The floor (0.2 s: a tenth of a core) is one no load of this suite
    # takes from a spinning thread and an idle agent never reaches (it spends a few ms)
    assert bare > 0.2, bare
    assert hooked < 0.3 and hooked < bare / 4, (hooked, bare)
