"""Our result path against files made by specdec_bench's own classes
(tests/results/golden/, rebuilt by make_golden.py from a Model-Optimizer checkout)."""
import json
from pathlib import Path

import pytest

from launcher.runtime.datasets import Question, round_robin_by_category
from launcher.results import EXTENSION_KEY, Turn, acceptance_doc, chunks_from_server, timing_doc
from launcher.results.chunks import strip_engine_trace
from launcher.results.layout import dataset_kind, responses_file
from launcher.results.responses import response_rows
from tests.results.make_golden import engine_trace

HERE = Path(__file__).parent
INPUT = json.loads((HERE / "golden_input.json").read_text())
GOLDEN = HERE / "golden"


def _ours(case: dict):
    turns, eos = [], INPUT["eos_id"]
    for i, r in enumerate(case["requests"]):
        for t, turn in enumerate(r["turns"]):
            chunks = chunks_from_server(turn["completion_tokens"], turn["eos"], turn["per_step_accepted"])
            cum, times, tokens = engine_trace(turn, eos)
            trace_chunks, kept_times = strip_engine_trace(cum, times, tokens, eos)
            assert trace_chunks == chunks, (i, t)
            turns.append(Turn(i, t, tuple(chunks), tuple(kept_times)))
    return turns


def _specdec_text(obj: dict) -> str:
    """A metric file as specdec_bench writes it: a one-element list, indent 4."""
    obj = {k: v for k, v in obj.items() if k != EXTENSION_KEY}
    return json.dumps([obj], indent=4)


def test_golden_source_recorded():
    src = json.loads((GOLDEN / "SOURCE.json").read_text())
    assert len(src["commit"]) == 40 and src["repository"].endswith("Model-Optimizer")


@pytest.mark.parametrize("case", sorted(INPUT["cases"]))
def test_files_equal_specdec_bench(case):
    c = INPUT["cases"][case]
    kind = dataset_kind(c["dataset"])
    turns = _ours(c)
    reqs = c["requests"]
    qids = [r.get("question_id") for r in reqs]
    cats = [r.get("category") for r in reqs]
    acc = acceptance_doc(kind, turns, question_ids=qids, categories=cats, extension={"Server_AL": 9.9})
    assert _specdec_text(acc) == (GOLDEN / case / "acceptance_rate.json").read_text()
    tim = timing_doc(turns, INPUT["tp_size"])
    assert _specdec_text(tim) == (GOLDEN / case / "timing.json").read_text()
    user = [[f"q{i}.{t}" for t in range(len(r["turns"]))] for i, r in enumerate(reqs)]
    ans = [[f"a{i}.{t}" for t in range(len(r["turns"]))] for i, r in enumerate(reqs)]
    rows = response_rows(kind, user, ans, qids, cats)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    assert text == (GOLDEN / case / responses_file(c["dataset"])).read_text()


def test_timing_counts_in_extension_only():
    turns = _ours(INPUT["cases"]["mtbench"])
    tim = timing_doc(turns, 1)
    counts = tim[EXTENSION_KEY]["counts"]
    assert counts["TTFT Time"] == 6 and counts["Number of Output Tokens"] == 6
    assert all("count" not in v for v in tim.values() if isinstance(v, dict) and "min" in v)


def test_speed_subsample_matches():
    sub = INPUT["speed_subsample"]
    golden = json.loads((GOLDEN / "speed_subsample.json").read_text())
    qs = [Question(str(i), c, ["x"]) for i, c in enumerate(sub["categories"])]
    for n in sub["n"]:
        got = [int(q.question_id) for q in round_robin_by_category(qs, n)]
        # specdec_bench subsamples only when num_samples < rows; else file order
        assert got == (golden[str(n)] if n < len(qs) else list(range(len(qs))))


def test_eos_and_overshoot_chunks():
    # 9 tokens with EOS; the engine accepted 3 drafts past EOS in the last step
    assert chunks_from_server(9, True, [3, 0, 2, 3]) == [1, 4, 1, 2]
    assert chunks_from_server(2, True, [2]) == [1]            # a chunk of only EOS disappears
    assert chunks_from_server(1, False, []) == [1]            # a 1-token turn: the prefill chunk
    assert chunks_from_server(12, False, [2, 0, 0, 3, 1, 3]) == [1, 3, 1, 1, 4, 2]  # cut at max_tokens
    # summary stats only (no order): exact when the overshoot is in a largest step
    assert chunks_from_server(9, True, None, {3: 2, 0: 1, 2: 1}) == [1, 1, 3, 3]


def test_chunks_arriving_at_one_instant_leave_decode_speed_out_not_the_point():
    """Over HTTP a turn's chunks after the first can share one arrival time (AIPerf
    reads them in one burst): decode speed is then undefined for that turn. With
    every turn like that the statistic is absent (count 0), the step times and
    the rest are still written."""
    turns = [Turn(0, 0, (1, 4, 4), (10.0, 10.2, 10.5, 10.5)), Turn(1, 0, (1, 3, 2), (11.0, 11.1, 11.4, 11.4))]
    turns = [Turn(t.request_index, t.turn_index, t.chunks, (t.times[0], t.times[1], t.times[1], t.times[1]))
             for t in turns]
    doc = timing_doc(turns, tp_size=1)
    assert "Request Generation Tokens Per Second" not in doc
    assert doc["Request Generation Step Time"]["min"] == "0.0000"
    assert doc[EXTENSION_KEY]["counts"]["Request Generation Tokens Per Second"] == 0
    assert doc[EXTENSION_KEY]["counts"]["Request Generation Step Time"] == 6


def test_specbench_results_equal_specdec_bench():
    """specbench_results.json (SpecBench's extra file) equals the one its own class wrote."""
    from launcher.results.specbench_results import specbench_results_text

    c = INPUT["cases"]["specbench"]
    reqs = c["requests"]
    acc = acceptance_doc(dataset_kind(c["dataset"]), _ours(c), question_ids=[r["question_id"] for r in reqs],
                         categories=[r["category"] for r in reqs], extension={"Server_AL": 9.9})
    assert specbench_results_text(acc) == (GOLDEN / "specbench" / "specbench_results.json").read_text()
