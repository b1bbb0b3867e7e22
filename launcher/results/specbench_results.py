"""``specbench_results.json``: what specdec_bench's SpecBench metric class also
writes for Spec-Bench and SPEED-Bench runs (Model-Optimizer a2fbac7,
``examples/specdec_bench/specdec_bench/metrics/specbench.py``): the run's
acceptance object itself (its ``Request_AL`` keyed by question_id,
``Category_AL``, ``Average_AL``, histogram and rates), as one JSON object (not
a list), indent 4, no final newline, overwritten on every run. Its plot,
``acceptance_rate_analysis.png``, is drawn by launcher.bench.specbench_plot.
Standard library only; our extension stays out of this file."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from launcher.results.layout import EXTENSION_KEY
from launcher.results.store import _write_atomic

SPECBENCH_RESULTS_FILE = "specbench_results.json"
SPECBENCH_PLOT_FILE = "acceptance_rate_analysis.png"


def specbench_results_text(acceptance: Mapping) -> str:
    return json.dumps({k: v for k, v in acceptance.items() if k != EXTENSION_KEY}, indent=4)


def write_specbench_results(point_dir, acceptance: Mapping) -> Path:
    return _write_atomic(Path(point_dir) / SPECBENCH_RESULTS_FILE, specbench_results_text(acceptance))
