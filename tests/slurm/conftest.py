"""Fixtures for tests that need the real local Slurm cluster.

``slurm_cluster`` (session scope) brings the cluster up once via
``tests.support.slurm.ensure_slurm_cluster``.  If it cannot come up the tests
ERROR with slurm_up.sh's output; set ``SPECDEC_SKIP_SLURM=1`` to skip them
instead (e.g. on a machine where you are not root).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:  # make `tests.support` importable under any runner
    sys.path.insert(0, str(_ROOT))



def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slurm: needs the real local Slurm cluster (common/setup/slurm_up.sh)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.slurm)

# The slurm_cluster fixture lives in tests/conftest.py (shared with the launcher's e2e tests).
