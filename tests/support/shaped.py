"""The shaped models of common/setup/make_shaped_models.py built at the small shape, for the
tests that read them (tests/setup/)."""
from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.stack import REPO_ROOT, VLLM_PYTHON

BUILDER = REPO_ROOT / "common" / "setup" / "make_shaped_models.py"


def build_small(out: Path, plan: tuple[tuple[str, str], ...]) -> Path:
    """Build each (model family, comma-separated roles) of ``plan`` into ``out/<family>`` with the
    vllm venv's Python (it has torch); returns ``out``."""
    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} missing: run common/setup/install.sh"
    for model, roles in plan:
        r = subprocess.run([str(VLLM_PYTHON), str(BUILDER), str(out / model), "--model", model, "--shape", "small",
                            "--only", roles], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
    return out
