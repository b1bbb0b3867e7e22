"""What a real SGLang 0.5.17 server did on an H100 through the main command, read from its files
(tests/data/h100_sglang0517_checks, PROVENANCE.md): the known answer holds on the context-free tiny
target, a forced length is recorded within 0.1 and judged with SGLang's per-batch draws, the KV pool
follows the recipe's budget, an NGRAM server runs through, the EAGLE3 head's forced run is recorded
as forced with the server environment in its identity, and today's impossibility rule marks none of
these points while it still marks the earlier run whose merged chunks gave an AL of 63."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher.engines import get_engine
from launcher.engines.forced_acceptance import run_verdicts
from launcher.engines.known_defects import annotate, defect_line
from launcher.login.kv_budget import bytes_per_token
from launcher.results.plausibility import from_extension

DATA = Path(__file__).resolve().parents[1] / "data"
RUN = DATA / "h100_sglang0517_checks"
KNOWN = RUN / "tiny-draft_model-k3-tp1-debc8e64"
FORCED = RUN / "tiny-draft_model-k3-fal2.5-tp1-3ff1ce3f"
NGRAM = RUN / "tiny-ngram-k4-tp1-caccfde0"
EAGLE3 = RUN / "llama8b-shaped-eagle3-k3-fal3.5-tp1-20ef7e55"


def load(path: Path):
    return json.loads(path.read_text())


def points(job: Path) -> list[dict]:
    return load(job / "summary.json")["points"]


def test_the_context_free_target_passes_the_known_answer_that_the_tiny_target_fails():
    ka = load(KNOWN / "known_answer.json")
    t0 = next(t for t in ka["temperatures"] if t["temperature"] == 0)
    assert t0["passed"] and t0["server_al"] >= 3.9
    # every step but the requests' last (cut by max_tokens) accepted all k drafts
    assert t0["histogram"][-1] == t0["steps"] - t0["requests"]
    old = load(DATA / "h100_sglang0517_known_answer" / "known_answer.json")
    failed = [t for t in old["temperatures"] if t["temperature"] == 0][0]
    assert not failed["passed"] and failed["al"] < 2.5
    named = annotate(old, "sglang", "0.5.17", "cuda")
    assert "sglang 0.5.17 STANDALONE" in defect_line([t for t in named["temperatures"] if t["temperature"] == 0][0])


def test_a_forced_length_is_recorded_within_0_1_and_judged_per_batch():
    rows = points(FORCED)
    assert len(rows) == 3 and all(r["status"] == "complete" for r in rows)
    for r in rows:
        assert abs(r["Server_AL"] - 2.5) <= 0.1 + 1e-9, r
        assert r["Server_AL"] == r["Prometheus_AL"]  # the counters, not the chunks
        assert r["forced_acceptance"] == {"length": 2.5} and r["forced_verdict"] == "pass"
    summary = load(FORCED / "summary.json")
    again = run_verdicts({"length": 2.5}, 3, summary["prometheus_runs"],
                         batch_of={r["dir"]: r["concurrency"] for r in rows})
    assert again["verdict"] == summary["forced_acceptance"]["verdict"] == "pass"
    assert again["runs"][0]["tolerance"] == summary["forced_acceptance"]["runs"][0]["tolerance"]
    assert run_verdicts({"length": 2.5}, 3, summary["prometheus_runs"])["runs"][0]["tolerance"] < 0.05  # per request
    assert "SGLANG_SIMULATE_ACC_LEN=2.5 SGLANG_SIMULATE_ACC_TOKEN_MODE=real-draft-token" in \
        (FORCED / "logs" / "job.log").read_text()


def test_the_kv_pool_follows_the_recipes_budget_and_ngram_runs_through():
    rows = points(NGRAM)
    assert len(rows) == 6 and all(r["status"] == "complete" for r in rows)
    argv = load(NGRAM / "server_ready.json")["argv"]
    tokens = int(argv[argv.index("--max-total-tokens") + 1])
    model_cfg = {"num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64}
    assert tokens == 4 * 1024 ** 3 // bytes_per_token(model_cfg)
    assert f"#tokens: {tokens}" in (NGRAM / "logs" / "server_memory_lines.txt").read_text()


def test_the_eagle3_forced_run_carries_its_level_and_the_engines_choices():
    rows = points(EAGLE3)
    assert [r["concurrency"] for r in rows] == [1, 16]
    assert all(abs(r["Server_AL"] - 3.5) <= 0.1 and r["forced_verdict"] == "pass" for r in rows)
    conf = load(EAGLE3 / "mtbench" / "t0_c1" / "configuration.json")["specdec_launcher"]
    assert conf["run_identity"]["forced"] == {"length": 3.5} and conf["run_identity"]["engine"] == "sglang"
    ready = load(EAGLE3 / "server_ready.json")
    assert ready["engine_chosen"] == {"overlap_schedule": "on"}
    assert get_engine("sglang").chosen_settings((EAGLE3 / "logs" / "server_args_line.txt").read_text()) == \
        ready["engine_chosen"]


@pytest.mark.parametrize("job", [KNOWN, FORCED, NGRAM, EAGLE3], ids=lambda p: p.name)
def test_todays_rule_marks_no_point_of_this_run(job):
    k = 4 if "ngram" in job.name else 3
    for acc in sorted(job.glob("mtbench/*/acceptance_rate.json")):
        doc = load(acc)[0]
        assert from_extension(doc["specdec_launcher"], doc["Average_AL"], k) is None, acc


def test_the_earlier_merged_run_stays_impossible():
    doc = load(DATA / "h100_sglang0517_forced" / "mtbench" / "t0_c1" / "acceptance_rate.json")[0]
    why = from_extension(doc["specdec_launcher"], doc["Average_AL"], 3)
    assert why and "above k + 1 = 4" in why
