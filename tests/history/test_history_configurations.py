"""Issue 52: two server configurations are two series of the history, each labelled by what its
server changes (the recorded H100 pair: the same k=3 forced-AL-3.5 server with and without
--async-scheduling, one point of each uploaded as a run)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from launcher.history.series import build_history

PAIR = Path(__file__).resolve().parents[1] / "data" / "h100_vllm026_async_pair"
JOBS = {"plain": "llama8b-shaped-draft_model-k3-fal3.5-tp1-77730b95",
        "async": "llama8b-shaped-draft_model-k3-fal3.5-tp1-7a7929ac"}


def _upload(tmp_path: Path, name: str, job: str, day: str) -> tuple[str, Path]:
    run = shutil.copytree(PAIR / job / "mtbench" / "t0_c1", tmp_path / name)  # one point, as the uploader sends it
    conf = run / "configuration.json"
    c = json.loads(conf.read_text())
    c["timestamp"] = f"{day}T06:00:00+00:00"
    conf.write_text(json.dumps(c))
    return name, run


def test_two_servers_are_two_series_labelled_by_what_differs(tmp_path):
    runs = [_upload(tmp_path, "p1", JOBS["plain"], "2026-12-01"), _upload(tmp_path, "a1", JOBS["async"], "2026-12-02"),
            _upload(tmp_path, "p2", JOBS["plain"], "2026-12-03")]
    h = build_history(runs)
    assert not h.left_out
    by_label = {s.label: [r.where for r in s.runs] for s in h.series}
    assert len(by_label) == 2
    (plain,) = [k for k in by_label if k.endswith("[- --async-scheduling]")]
    (asy,) = [k for k in by_label if k.endswith("[+ --async-scheduling]")]
    assert by_label[plain] == ["p1", "p2"] and by_label[asy] == ["a1"]  # never judged against each other


def test_one_server_is_one_series_without_a_label(tmp_path):
    h = build_history([_upload(tmp_path, "p1", JOBS["plain"], "2026-12-01"),
                       _upload(tmp_path, "p2", JOBS["plain"], "2026-12-03")])
    (s,) = h.series
    assert [r.where for r in s.runs] == ["p1", "p2"] and "[" not in s.label and s.runs[1].verdict is not None
