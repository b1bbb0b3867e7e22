"""The golden check against hand-worked numbers, and the table's provenance."""
import pytest

from launcher import golden

LLAMA = golden.lookup("vllm_ci_llama31_8b_eagle3")
CI_RUN = {"dataset": "mtbench", "num_prompts": 80, "turns": 1, "output_tokens": 256, "temperature": 0.0,
          "k": 3, "concurrency": 80}


def test_table_rows_carry_their_source_and_commit():
    for gid in golden.known_ids():
        e = golden.lookup(gid)
        assert e["source"] and e["expected_al"] >= 1 and 0 < e["rtol"] < 1, gid
        if e["repository"] != "this project":
            assert len(e["commit"]) == 40, gid
        else:
            assert e["command"], gid
        if e["expected_rates"]:
            assert len(e["expected_rates"]) == e["k"]
            assert e["expected_rates"] == sorted(e["expected_rates"], reverse=True)


def test_vllm_ci_numbers_as_in_its_test():
    assert LLAMA["expected_al"] == 2.60 and LLAMA["expected_rates"] == [0.7296, 0.5208, 0.3545]
    qwen = golden.lookup("vllm_ci_qwen3_8b_eagle3")
    assert qwen["expected_al"] == 2.26 and qwen["expected_rates"] == [0.6541, 0.3993, 0.2020]
    assert LLAMA["workload"] | {"k": LLAMA["k"]} == {"num_prompts": 80, "turns": 1, "output_tokens": 256,
                                                     "temperature": 0.0, "concurrency": 80, "k": 3}


def test_pass_at_the_edges_of_the_tolerance():
    # AL within 5% of 2.60: [2.47, 2.73]; rates at least 95% of expected: 0.69312, 0.49476, 0.336775
    v = golden.check(LLAMA, 2.48, [0.6932, 0.4948, 0.3368], CI_RUN)
    assert v["verdict"] == "pass" and v["problems"] == [] and v["likely_causes"] == []
    assert golden.check(LLAMA, 2.72, [0.99, 0.99, 0.99], CI_RUN)["verdict"] == "pass"  # rates: one-sided


def test_fail_names_what_and_the_likely_causes():
    v = golden.check(LLAMA, 2.46, [0.72, 0.49, 0.34], CI_RUN)
    assert v["verdict"] == "fail"
    assert v["problems"] == ["AL 2.4600 vs expected 2.6 (tolerance 0.1300)",
                             "position 2 rate 0.4900 vs expected 0.5208 (tolerance 0.0260)"]
    assert [p["ok"] for p in v["positions"]] == [True, False, True]
    causes = " ".join(v["likely_causes"])
    for word in ("chat template", "doubled BOS", "draft revision", "sampler defect", "workload mismatch"):
        assert word in causes
    line = golden.verdict_line(v | {"point": "mtbench/t0_c80"})
    assert line.startswith("golden vllm_ci_llama31_8b_eagle3 mtbench/t0_c80: FAIL AL 2.4600") and "\n" not in line


def test_too_high_is_a_fail_too():
    v = golden.check(LLAMA, 2.80, [0.8, 0.6, 0.4], CI_RUN)
    assert v["verdict"] == "fail" and v["likely_causes"][0].startswith("above the reference")


def test_another_workload_is_not_comparable():
    v = golden.check(LLAMA, 2.1, [0.6, 0.4, 0.2], CI_RUN | {"turns": 2, "output_tokens": 4096})
    assert v["verdict"] == "not_comparable"
    assert v["workload_differences"] == ["turns 2 (reference 1)", "output_tokens 4096 (reference 256)"]
    # concurrency alone is reported, not disqualifying
    v = golden.check(LLAMA, 2.6, [0.73, 0.52, 0.35], CI_RUN | {"concurrency": 8})
    assert v["verdict"] == "pass" and v["workload_differences"] == ["concurrency 8 (reference 80)"]


def test_at_least_rule_for_dflash():
    e = golden.lookup("vllm_ci_qwen3_8b_dflash")
    run = {"dataset": "mtbench", "num_prompts": 80, "turns": 1, "output_tokens": 2048, "temperature": 0.0, "k": 16}
    assert golden.check(e, 4.24 * 0.95, None, run)["verdict"] == "pass"
    assert golden.check(e, 9.0, None, run)["verdict"] == "pass"
    assert golden.check(e, 4.0, None, run)["verdict"] == "fail"


def test_missing_measurement_fails():
    v = golden.check(LLAMA, None, None, CI_RUN)
    assert v["verdict"] == "fail" and "no acceptance length was measured" in v["problems"]
