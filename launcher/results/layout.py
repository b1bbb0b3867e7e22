"""File names and dataset kinds of one result folder (docs/results-layout.md)."""
from __future__ import annotations

from pathlib import Path

from launcher.runtime.datasets import speed_split

ACCEPTANCE_FILE = "acceptance_rate.json"
TIMING_FILE = "timing.json"
CONFIGURATION_FILE = "configuration.json"
COMPLETE_FILE = "COMPLETE"
METRIC_FILES = (ACCEPTANCE_FILE, TIMING_FILE)
# Our additions inside each specdec_bench object (acceptance, timing, configuration).
EXTENSION_KEY = "specdec_launcher"

MTBENCH_TOPICS = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")

# specdec_bench's metric class per dataset: MTBench, SpecBench (Spec-Bench and
# SPEED-Bench) or AcceptanceRate (anything else).
MTBENCH, SPECBENCH, GENERIC = "mtbench", "specbench", "generic"
RESPONSES_FILES = {MTBENCH: "mtbench_responses.jsonl", SPECBENCH: "specbench_responses.jsonl",
                   GENERIC: "responses.jsonl"}


def dataset_kind(dataset: str) -> str:
    """``mtbench`` -> MTBench; ``specbench`` and ``speed_*`` -> SpecBench; else AcceptanceRate."""
    if dataset == "mtbench":
        return MTBENCH
    if dataset == "specbench" or dataset == "speed" or speed_split(dataset) is not None:
        return SPECBENCH
    return GENERIC


def responses_file(dataset: str) -> str:
    return RESPONSES_FILES[dataset_kind(dataset)]


# A run folder: one point of ours or one specdec_bench output folder. It holds
# at least one of these files itself (the one rule; report, compare and upload use it).
RUN_FILES = (CONFIGURATION_FILE, TIMING_FILE, ACCEPTANCE_FILE)


def is_run_dir(d) -> bool:
    """A folder holding result files itself (a point of ours, or a specdec_bench output folder)."""
    return any((Path(d) / f).is_file() for f in RUN_FILES)
