"""docs/results-layout.md is checked against launcher.results: every file
name, key and extension field the package writes is named in the doc."""
import json
import re
from pathlib import Path

from launcher.bench.result_files import SPECDEC_ARGS, build_configuration
from launcher.results import EXTENSION_KEY, Turn, acceptance_doc, timing_doc
from launcher.results import layout

DOC = (Path(__file__).parents[2] / "docs" / "results-layout.md").read_text()
GOLDEN = Path(__file__).parent / "golden"


def _named(key) -> bool:
    return f'"{key}"' in DOC or f"`{key}`" in DOC or re.search(rf"\b{re.escape(str(key))}\b", DOC) is not None


def test_file_names_are_documented():
    for name in (layout.ACCEPTANCE_FILE, layout.TIMING_FILE, layout.CONFIGURATION_FILE, layout.COMPLETE_FILE,
                 *layout.RESPONSES_FILES.values(), EXTENSION_KEY):
        assert name in DOC, name


def test_every_written_key_is_documented():
    turns = [Turn(0, 0, (1, 3, 2), (0.0, 0.1, 0.2, 0.3)), Turn(0, 1, (1, 1), (0.4, 0.5, 0.6))]
    acc = acceptance_doc(layout.MTBENCH, turns, extension={"Server_AL": 1.0})
    tim = timing_doc(turns, 1, extension={"num_gpus": 1, "num_requests": 1, "num_turns": 2, "failed_requests": 0,
                                          "total_output_tokens": 9, "duration_s": 0.6, "status": "complete",
                                          "reason": None})
    for doc in (acc, tim):
        for k in doc:
            assert _named(k), k
    for k in tim[EXTENSION_KEY]:
        assert _named(k), k
    for k in tim["TTFT Time"]:
        assert _named(k), k
    conf = build_configuration(run_args={}, serving_config={}, engine_version="x", argv=[])
    for k in conf:
        assert _named(k), k
    assert all(_named(k) for k in SPECDEC_ARGS)


def test_our_extension_keys_from_a_real_point_are_documented():
    smoke = Path(__file__).parents[1] / "report" / "data" / "smoke_run1" / "mtbench" / "t0_c1"
    acc = json.loads((smoke / "acceptance_rate.json").read_text())[-1]
    for k in acc[EXTENSION_KEY]:
        assert _named(k), k
    for k in acc[EXTENSION_KEY]["al_gap"]:
        assert _named(k), k
    summary = json.loads((smoke.parents[1] / "summary.json").read_text())
    for k in summary["points"][0]:
        assert _named(k), k
