"""The local executor gives a job the GPUs its cluster preset names: submitit's local
jobs otherwise run with CUDA_VISIBLE_DEVICES="" and a GPU recipe (recipe=gpu_smoke)
would start vLLM on no device (seen on an H200)."""
from __future__ import annotations

import pytest

from launcher.engines import get_engine
from launcher.login.submit import make_executor


@pytest.mark.parametrize("gpus", [0, 1, 4])
def test_local_executor_asks_for_the_presets_gpus(compose, tmp_path, gpus):
    cfg = compose("recipe=smoke", f"cluster.gpus_per_node={gpus}")
    ex = make_executor(cfg, tmp_path, [], get_engine(cfg.server.engine))
    assert ex.parameters["gpus_per_node"] == gpus
    assert ex.parameters["timeout_min"] == cfg.cluster.time_min


def test_gpu_smoke_recipe_gets_one_gpu(compose, tmp_path):
    cfg = compose("recipe=gpu_smoke")
    assert make_executor(cfg, tmp_path, [], get_engine(cfg.server.engine)).parameters["gpus_per_node"] == 1
