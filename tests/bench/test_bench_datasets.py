import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from launcher.runtime.datasets import (
    DATASETS, DatasetError, Question, category_map, get_dataset, read_mtbench,
    read_specbench, read_speed, round_robin_by_category, write_aiperf_multi_turn,
)

DATA = Path(__file__).parent / "data"


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def q_line(qid, turns=("hi", "more"), **extra):
    return json.dumps({"question_id": qid, "turns": list(turns), **extra})


# ---------------------------------------------------------------- MT-Bench

def test_mtbench_80_categories_by_index():
    qs = read_mtbench(DATA / "mtbench_80.jsonl")
    assert len(qs) == 80
    assert [q.question_id for q in qs[:2]] == ["81", "82"]
    assert qs[-1].question_id == "160"
    expected = ["writing", "roleplay", "reasoning", "math",
                "coding", "extraction", "stem", "humanities"]
    for i, q in enumerate(qs):
        assert q.category == expected[i // 10], i
        assert len(q.turns) == 2


def test_mtbench_category_ignores_file_field_order_and_warns(tmp_path):
    # Category fields claim "math" for the 3rd question; index 2 -> writing.
    lines = [q_line(i, category="writing") for i in range(1, 13)]
    lines[2] = q_line(3, category="math")
    path = write_lines(tmp_path / "q.jsonl", lines)
    with pytest.warns(UserWarning, match="line 3"):
        qs = read_mtbench(path)
    assert qs[2].category == "writing"
    assert qs[10].category == "roleplay"  # index 10 -> second category


def test_mtbench_first_n(tmp_path):
    qs = read_mtbench(DATA / "mtbench_16.jsonl", 6)
    assert [q.question_id for q in qs] == ["81", "82", "83", "84", "85", "86"]


def test_mtbench_past_80_uses_file_category_or_fails(tmp_path):
    lines = [q_line(i) for i in range(80)] + [q_line(80, category="extra")]
    qs = read_mtbench(write_lines(tmp_path / "a.jsonl", lines))
    assert qs[79].category == "humanities" and qs[80].category == "extra"
    path = write_lines(tmp_path / "b.jsonl", [q_line(i) for i in range(81)])
    with pytest.raises(DatasetError, match=rf"{path}:81: .*past MT-Bench's 80"):
        read_mtbench(path)


@pytest.mark.parametrize("bad, message", [
    ('{"question_id": 3, "turns": ["a"', "invalid JSON"),
    ('{"question_id": 3}', "'turns' must be a non-empty list"),
    ('{"question_id": 3, "turns": []}', "'turns' must be a non-empty list"),
    ('{"question_id": 3, "turns": ["ok", ""]}', r"turns\[1\] must be a non-empty string"),
    ('{"question_id": 3, "turns": ["ok", 5]}', r"turns\[1\] must be a non-empty string"),
    ('{"turns": ["ok"]}', "question_id"),
    ('[1, 2]', "expected a JSON object"),
])
def test_bad_line_names_file_and_line(tmp_path, bad, message):
    # A blank line 2 still counts: the bad entry is on line 4.
    path = write_lines(tmp_path / "q.jsonl", [q_line(1, category="qa"), "", q_line(2, category="qa"), bad])
    for reader in (read_mtbench, read_specbench):
        with pytest.raises(DatasetError, match=rf"{path}:4: .*{message}"):
            reader(path)


def test_duplicate_ids_rejected(tmp_path):
    path = write_lines(tmp_path / "q.jsonl", [q_line(7), q_line(7)])
    with pytest.raises(DatasetError, match="duplicate question_id '7'"):
        read_mtbench(path)


def test_missing_file():
    with pytest.raises(DatasetError, match="no such file"):
        read_mtbench(DATA / "nope.jsonl")


def test_bad_num_requests():
    with pytest.raises(DatasetError, match="positive integer"):
        read_mtbench(DATA / "mtbench_16.jsonl", 0)


# ---------------------------------------------------------------- Spec-Bench

def test_specbench_reads_categories_and_first_n():
    qs = read_specbench(DATA / "specbench_8.jsonl")
    assert len(qs) == 8
    assert [q.category for q in qs[:3]] == ["mt_bench", "translation", "summarization"]
    assert len(qs[0].turns) == 2 and len(qs[1].turns) == 1
    assert [q.question_id for q in read_specbench(DATA / "specbench_8.jsonl", 3)] == ["1000", "1001", "1002"]


def test_specbench_missing_category(tmp_path):
    path = write_lines(tmp_path / "s.jsonl", [q_line(1, category="qa"), q_line(2)])
    with pytest.raises(DatasetError, match=rf"{path}:2: missing or empty 'category'"):
        read_specbench(path)


# ---------------------------------------------------------------- SPEED-Bench

def test_speed_round_robin_selection():
    # File categories: c c m c w m c m w c m w (coding 5, math 4, writing 3).
    qs = read_speed(DATA / "speed_qualitative_12.parquet", 7)
    assert [q.question_id for q in qs] == [
        "speed-0000", "speed-0002", "speed-0004",   # round 1: coding, math, writing
        "speed-0001", "speed-0005", "speed-0008",   # round 2
        "speed-0003",                               # round 3, stopped at 7
    ]
    # 11: writing runs out after round 3; round 4 takes coding and math only.
    qs = read_speed(DATA / "speed_qualitative_12.parquet", 11)
    assert [int(q.question_id[-4:]) for q in qs] == [0, 2, 4, 1, 5, 8, 3, 7, 11, 6, 10]


def test_speed_all_rows_in_file_order():
    qs = read_speed(DATA / "speed_qualitative_12.parquet")
    assert [q.question_id for q in qs] == [f"speed-{i:04d}" for i in range(12)]
    assert read_speed(DATA / "speed_qualitative_12.parquet", 100) == qs
    assert qs[0].turns == ["SPEED coding question 0: explain a lighthouse."]


def test_speed_prompt_and_messages_columns_and_row_index_ids(tmp_path):
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"category": ["a", "b"], "prompt": ["p0", "p1"]}), path)
    assert read_speed(path) == [Question("0", "a", ["p0"]), Question("1", "b", ["p1"])]
    path = tmp_path / "m.parquet"
    pq.write_table(pa.table({
        "question_id": ["x"], "category": ["a"],
        "messages": [[{"role": "user", "content": "u1"}, {"role": "assistant", "content": "r"},
                      {"role": "user", "content": "u2"}]],
    }), path)
    assert read_speed(path) == [Question("x", "a", ["u1", "u2"])]


def test_speed_bad_rows(tmp_path):
    path = tmp_path / "nocat.parquet"
    pq.write_table(pa.table({"prompt": ["p0"]}), path)
    with pytest.raises(DatasetError, match="no 'category' column"):
        read_speed(path)
    path = tmp_path / "noprompt.parquet"
    pq.write_table(pa.table({"category": ["a", "b"], "prompt": ["p0", None]}), path)
    with pytest.raises(DatasetError, match=rf"{path}:row 1: no prompt"):
        read_speed(path)
    path = tmp_path / "notparquet.parquet"
    path.write_text("hello")
    with pytest.raises(DatasetError, match="not a readable parquet"):
        read_speed(path)


def test_round_robin_helper_fewer_than_categories():
    qs = [Question(str(i), c, ["t"]) for i, c in enumerate("aabbc")]
    assert [q.question_id for q in round_robin_by_category(qs, 2)] == ["0", "2"]


# ---------------------------------------------------------------- registry

def test_registry():
    from launcher.results.layout import responses_file  # the one owner of the file name
    assert responses_file("mtbench") == "mtbench_responses.jsonl"
    assert DATASETS["specbench"].reader is read_specbench
    assert responses_file("speed_qualitative") == responses_file("specbench") == "specbench_responses.jsonl"
    spec = get_dataset("speed_throughput_64k")
    assert spec.reader is read_speed and not hasattr(spec, "responses_file")
    assert DATASETS["mtbench"].request_key(Question("81", "writing", ["x"])) == "81"
    with pytest.raises(DatasetError, match="unknown dataset 'mt-bench'"):
        get_dataset("mt-bench")


# ---------------------------------------------------------------- AIPerf input

def test_multi_turn_file_matches_the_one_aiperf_ran(tmp_path):
    # recorded/aiperf_input.jsonl is the file the recorded AIPerf run accepted.
    qs = read_mtbench(DATA / "mtbench_16.jsonl", 6)
    out = write_aiperf_multi_turn(qs, tmp_path / "in.jsonl", 32)
    assert out.read_bytes() == (DATA / "recorded" / "aiperf_input.jsonl").read_bytes()
    first = json.loads(out.read_text().splitlines()[0])
    assert first == {"session_id": "81", "turns": [
        {"text": qs[0].turns[0], "output_length": 32},
        {"text": qs[0].turns[1], "output_length": 32}]}


def test_multi_turn_rejects_bad_input(tmp_path):
    qs = [Question("1", "a", ["x"]), Question("1", "b", ["y"])]
    with pytest.raises(DatasetError, match="duplicate question_id '1'"):
        write_aiperf_multi_turn(qs, tmp_path / "in.jsonl", 8)
    with pytest.raises(DatasetError, match="output_length"):
        write_aiperf_multi_turn(qs[:1], tmp_path / "in.jsonl", 0)


def test_category_map():
    qs = read_mtbench(DATA / "mtbench_16.jsonl")
    m = category_map(qs)
    assert m["81"] == "writing" and m["96"] == "roleplay" and len(m) == 16


# ------------------------------------------------- a multi-phase run's input file

def _qs(n, turns=2):
    from launcher.runtime.datasets import Question
    t = turns if isinstance(turns, list) else [turns] * n
    return [Question(str(81 + i), "writing", [f"q{i}.{j}" for j in range(t[i])]) for i in range(n)]


def _sampled(lines, phases, starved=()):
    """What AIPerf 0.13's one sequential sampler hands each phase of a run (``phases``:
    (sessions, concurrency)), following timing/strategies/request_rate.py: a phase samples
    a first turn before its first request and after each session start that is not its
    final request; the idle phase between two takes one line, unless its process got to
    run only after its time was spent (``starved``: the indexes of the phases it precedes,
    timing/phase/runner.py cancels it unstarted); the file wraps. Returns each phase's
    sessions in start order."""
    n_turns = {obj["session_id"]: len(obj["turns"]) for obj in lines}
    cursor, out = 0, []
    for i, (n, _) in enumerate(phases):
        if i and i not in starved:
            cursor += 1  # the idle phase's pre-sampled line
        got = [lines[(cursor + j) % len(lines)]["session_id"] for j in range(n)]
        cursor += n + (n_turns[got[-1]] > 1)  # its last start is final only with nothing left to send
        out.append(got)
    return out


def _check_first_n(qs, phases):
    from launcher.runtime.datasets import aiperf_phase_lines, question_of_session
    lines = aiperf_phase_lines(qs, phases, 32)
    for i, (ids, (n, _)) in enumerate(zip(_sampled(lines, phases), phases), 1):
        assert sorted(question_of_session(s) for s in ids) == [str(81 + j) for j in range(n)], (i, ids)
        assert all(s.endswith(f"@phase{i}") for s in ids)  # one copy per phase: AIPerf needs ids once per file
    assert len({obj["session_id"] for obj in lines}) == len(lines)
    return lines


def test_each_phase_of_a_run_sends_the_first_n_questions():
    from launcher.runtime.datasets import question_of_session
    phases = [(10, 4), (2, 1), (4, 4), (10, 16), (2, 1), (4, 4)]  # warm-up, two repeats of C=1 and C=4
    for turns in (1, 2):  # one-turn questions (max_turns=1) and MT-Bench's two turns
        lines = _check_first_n(_qs(10, turns), phases)
        fillers = [o["session_id"] for o in lines if question_of_session(o["session_id"]).startswith("not-sent")]
        assert len(fillers) == (len(phases) - 1) * turns  # the idle phase's line, and one more after 2 turns
    # at C=1 one session at a time: the dataset's order
    lines = _check_first_n(_qs(10, 2), [(10, 16), (3, 1)])
    assert [question_of_session(o["session_id"]) for o in lines if o["session_id"].endswith("@phase2")] == \
        ["81", "82", "83"]


def test_mixed_turns_put_a_multi_turn_question_last_when_sessions_overlap():
    from launcher.runtime.datasets import question_of_session
    qs = _qs(5, [2, 1, 2, 1, 1])  # Spec-Bench mixes one-turn and two-turn questions
    lines = _check_first_n(qs, [(5, 4), (5, 1), (4, 2)])
    p1 = [question_of_session(o["session_id"]) for o in lines if o["session_id"].endswith("@phase1")]
    p2 = [question_of_session(o["session_id"]) for o in lines if o["session_id"].endswith("@phase2")]
    assert p1 == ["81", "82", "84", "85", "83"]  # C=4: the last start has turns to come, whatever the timing
    assert p2 == ["81", "82", "83", "84", "85"]  # C=1: the last start is final: the dataset's order


def test_without_the_layout_a_later_phase_would_get_other_questions():
    """The file of one copy per question (single-phase runs) gives the C=1 phase after a
    warm-up of the whole dataset other questions than the first two: the bug the layout
    fixes (on the H100, the C=1 point of a one-turn MT-Bench sent questions 82-97, not 81-96)."""
    from launcher.runtime.datasets import aiperf_multi_turn_lines
    assert _sampled(aiperf_multi_turn_lines(_qs(10, 1), 32), [(10, 64), (2, 1)])[1] == ["82", "83"]
    assert _sampled(aiperf_multi_turn_lines(_qs(10, 2), 32), [(10, 64), (2, 1)])[1] == ["83", "84"]


def test_session_ids_map_back_to_their_question():
    from launcher.runtime.datasets import question_of_session
    assert question_of_session("81@phase3") == "81"
    assert question_of_session("speed-0003@phase12") == "speed-0003"
    assert question_of_session("81") == "81" and question_of_session(81) == "81"
    assert question_of_session("a@phaseX") == "a@phaseX"  # not a phase copy: the id itself


def test_session_ids_name_the_phase_they_were_laid_out_for():
    from launcher.runtime.datasets import phase_of_session
    assert phase_of_session("81@phase3") == 3 and phase_of_session("speed-0003@phase12") == 12
    assert phase_of_session("not-sent-4-1") is None and phase_of_session("81") is None
    assert phase_of_session("@phase2") is None and phase_of_session("a@phaseX") is None


def test_an_idle_phase_that_takes_no_line_puts_every_later_phase_off_by_one():
    """The misalignment launcher.bench.aiperf_runner.misaligned_phases finds: after an idle
    phase that drew no line, every later phase sends a session laid out for no phase or another."""
    from launcher.runtime.datasets import aiperf_phase_lines, phase_of_session
    phases = [(4, 4), (4, 1), (4, 2), (4, 4)]
    lines = aiperf_phase_lines(_qs(4, 2), phases, 32)
    for starved in (1, 3):
        sent = _sampled(lines, phases, starved={starved})
        for i, ids in enumerate(sent):
            assert all(phase_of_session(s) == i + 1 for s in ids) == (i < starved), (starved, i, ids)
        assert sent[starved][0].startswith("not-sent-")  # the filler, then its own first N-1


def test_a_phase_larger_than_the_dataset_is_refused():
    import pytest as _pytest
    from launcher.runtime.datasets import DatasetError, aiperf_phase_lines
    with _pytest.raises(DatasetError, match="phase 2 sends 11 sessions"):
        aiperf_phase_lines(_qs(10), [(10, 4), (11, 1)], 32)
