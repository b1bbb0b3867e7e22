"""Login-side input checks: what the login node can see is checked before submitting."""
from __future__ import annotations

from launcher.login.config.validate import validate
from launcher.runtime.inputs import visible_here
from tests.support.login import with_engine


def lines(cfg) -> list[str]:
    return [e.line() for e in validate(*with_engine(cfg))]


def test_missing_dataset_local_is_an_error(compose, tmp_path):
    cfg = compose(f"sweep.dataset_paths.mtbench={tmp_path}/nope.jsonl")
    assert lines(cfg) == [f"sweep.dataset_paths.mtbench: {tmp_path}/nope.jsonl: no such file "
                          "(fix: point sweep.dataset_paths.mtbench at the dataset file)"]


def test_dataset_that_does_not_parse_or_is_too_short(compose, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question_id": 1, "turns": ["a"]}\n{oops\n')
    cfg = compose(f"sweep.dataset_paths.mtbench={bad}", "sweep.datasets=[mtbench]", "sweep.num_requests=null")
    (line,) = lines(cfg)
    assert line.startswith(f"sweep.dataset_paths.mtbench: {bad}:2: invalid JSON")
    cfg = compose("sweep.datasets=[mtbench]", "sweep.num_requests=9")  # the sample has 8
    (line,) = lines(cfg)
    assert "has 8 question(s), fewer than num_requests=9 (fix: lower sweep.num_requests" in line


def test_missing_model_and_draft_paths(compose, tmp_path):
    cfg = compose(f"model.path={tmp_path}/no-model", f"draft.model={tmp_path}/no-draft")
    got = lines(cfg)
    assert f"model.path: model {tmp_path}/no-model: no such file or folder (fix: set model.path to an existing " \
           "path or an HF id org/name)" in got
    assert any(g.startswith(f"draft.model: draft {tmp_path}/no-draft: no such file or folder") for g in got)


def test_hf_ids_are_not_checked_on_the_login_node(compose):
    assert lines(compose("model.path=Qwen/Qwen3-8B", "model.tokenizer=Qwen/Qwen3-8B")) == []


def test_slurm_checks_only_paths_the_login_node_can_see(compose, tmp_path):
    cfg = compose("cluster=slurm", "model.path=/no-such-filesystem-here/model",
                  f"sweep.dataset_paths.mtbench={tmp_path}/nope.jsonl")
    got = lines(cfg)
    assert len(got) == 1 and got[0].startswith("sweep.dataset_paths.mtbench:"), got  # /tmp is visible here
    assert visible_here("/no-such-filesystem-here/x", "slurm") is False
    assert visible_here("/no-such-filesystem-here/x", "local") is True
    assert visible_here("relative/x.jsonl", "slurm") is True


def test_api_key_in_extra_args_is_refused(compose):
    (line,) = lines(compose("server.extra_args=[--api-key,sekrit]"))
    assert line.startswith("server.extra_args: passes --api-key on the command line")
    assert "export SPECDEC_API_KEY=<key>" in line and "sekrit" not in line
