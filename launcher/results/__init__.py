"""Result files: models, the one writer, the one reader, the one validity rule.

Standard library only (the node side runs it from the inference server's
Python). specdec_bench's files are written exactly as Model-Optimizer's
``examples/specdec_bench`` writes them (docs/results-layout.md); what we add
lives under the key :data:`EXTENSION_KEY` of each object, where it cannot
collide with specdec_bench's keys.
"""
from launcher.results.layout import (  # noqa: F401
    ACCEPTANCE_FILE, COMPLETE_FILE, CONFIGURATION_FILE, EXTENSION_KEY, TIMING_FILE,
    dataset_kind, responses_file,
)
from launcher.results.chunks import Turn, chunks_from_server  # noqa: F401
from launcher.results.acceptance import acceptance_doc  # noqa: F401
from launcher.results.timing import compute_statistics, timing_doc  # noqa: F401
from launcher.results.store import (  # noqa: F401
    append_metric, is_complete, mark_complete, read_last, write_json_atomic, write_jsonl_atomic,
)
from launcher.results.point import PointResult, read_point  # noqa: F401
from launcher.results.validity import ValidityRule, point_problems  # noqa: F401
