"""vLLM's own scheduling choice: read from its start-up log, or from 0.26's rule by method
(launcher.engines.vllm_scheduling, through the engine: Readiness.chosen_settings)."""
from __future__ import annotations

from launcher.engines import get_engine

VLLM = get_engine("vllm")
# as vLLM 0.26's start-up log prints it (vllm/config/vllm.py)
LINE = "(APIServer pid=7222) INFO 12-06 16:04:39 [vllm.py:886] Asynchronous scheduling is {}."


def test_the_log_line_is_read_the_last_one_wins():
    assert VLLM.chosen_settings(LINE.format("enabled")) == {"async_scheduling": "on"}
    assert VLLM.chosen_settings(LINE.format("enabled") + "\n" + LINE.format("disabled")) == {"async_scheduling": "off"}
    assert VLLM.chosen_settings("INFO nothing about scheduling") == {}


def test_026_rule_off_for_draft_model_on_otherwise():
    assert VLLM.inferred_chosen_settings("draft_model", "0.26.0", []) == {"async_scheduling": "off"}
    assert VLLM.inferred_chosen_settings("dflash", "0.26.0", []) == {"async_scheduling": "on"}
    assert VLLM.inferred_chosen_settings("none", "0.26.1", []) == {"async_scheduling": "on"}


def test_no_rule_where_it_was_not_read_or_the_user_set_it():
    assert VLLM.inferred_chosen_settings("draft_model", "0.32.0", []) == {}
    assert VLLM.inferred_chosen_settings("draft_model", None, []) == {}
    assert VLLM.inferred_chosen_settings("draft_model", "0.26.0", ["--async-scheduling"]) == {}
    assert VLLM.inferred_chosen_settings("none", "0.26.0", ["--no-async-scheduling"]) == {}
