"""Two server configurations in one folder (issue 52): the H100 folder of 2026-12-06 holds two
k=3 forced-AL-3.5 servers that differ only in --async-scheduling, beside their baseline.
launcher.speedup gives one break-even per configuration, labelled with what differs, and
each matches a hand computation from that configuration's repeats."""
import io
import json
import math
import shutil
import statistics
from pathlib import Path

import pytest
from rich.console import Console

from launcher.report.console import print_results
from launcher.report.speedup_section import speedup_section
from launcher.results.job_dir import load_results
from launcher.speedup import slo
from launcher.speedup.best_k import best_k_per_load
from launcher.speedup.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "h100_vllm026_async_pair"
PLAIN = "llama8b-shaped-draft_model-k3-fal3.5-tp1-77730b95"
ASYNC = "llama8b-shaped-draft_model-k3-fal3.5-tp1-7a7929ac"
BASE = "llama8b-shaped-none-tp1-9724f184"
T_975_DF2 = 4.302652729911275  # Student's t, 97.5 % quantile, 2 degrees of freedom (3 repeats; tables give 4.303)


def _tps(job: str, c: int) -> list[float]:
    doc = json.loads((DATA / job / "mtbench" / f"t0_c{c}" / "repeats.json").read_text())
    return [r["Output TPS"] for r in doc["per_repeat"]]


def _server_al(job: str, c: int) -> float:
    rows = json.loads((DATA / job / "summary.json").read_text())["points"]
    return next(r["Server_AL"] for r in rows if r["concurrency"] == c)


def _by_hand(job: str, c: int) -> tuple[float, float, float]:
    """The break-even AL of one server at C: each repeat's step cost (server AL over repeat i's
    speedup on the baseline's repeat i), their mean and 95 % t-interval."""
    al = _server_al(job, c)
    costs = [al / (s / b) for s, b in zip(_tps(job, c), _tps(BASE, c))]
    m, half = statistics.mean(costs), T_975_DF2 * statistics.stdev(costs) / math.sqrt(len(costs))
    return m, m - half, m + half


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    root = shutil.copytree(DATA, tmp_path_factory.mktemp("h100") / "gpu_8b")
    return root


def test_two_break_evens_one_per_server_labelled(analysed, capsys):
    assert main([str(analysed)]) == 0
    out = capsys.readouterr().out
    res = json.loads((analysed / "speedup_summary.json").read_text())
    assert len(res["break_even"]) == 6  # 3 concurrencies x 2 servers: never one pooled over both
    for c in (1, 4, 16):
        mine = {b["configuration"]["label"]: b for b in res["break_even"] if b["concurrency"] == c}
        assert set(mine) == {"+ --async-scheduling", "- --async-scheduling"}
        for label, job in (("- --async-scheduling", PLAIN), ("+ --async-scheduling", ASYNC)):
            b = mine[label]
            m, lo, hi = _by_hand(job, c)
            assert b["n"] == 3 and len(b["levels"]) == 1
            assert b["break_even_al"] == pytest.approx(m, rel=1e-9)
            assert (b["lo"], b["hi"]) == (pytest.approx(lo, rel=1e-4), pytest.approx(hi, rel=1e-4))
            assert f"mtbench T=0 C={c} k=3 [{label}]: break-even AL {m:.2f} [{lo:.2f}, {hi:.2f}] over 3 repeat(s)" in out
    # the two servers' step costs differ beyond their intervals at C=4: pooled, neither would be reported
    plain, asy = _by_hand(PLAIN, 4), _by_hand(ASYNC, 4)
    assert plain[2] < asy[1]


def test_every_row_of_the_json_and_the_console_names_its_server(analysed, capsys):
    main([str(analysed)])
    out = capsys.readouterr().out
    res = json.loads((analysed / "speedup_summary.json").read_text())
    by_job = {r["job"]: r["configuration"] for r in res["points"]}
    assert by_job[ASYNC]["label"] == "+ --async-scheduling" and by_job[PLAIN]["label"] == "- --async-scheduling"
    assert by_job[ASYNC]["fingerprint"] != by_job[PLAIN]["fingerprint"]
    forced_lines = [line for line in out.splitlines() if "measured AL" in line]
    assert len(forced_lines) == 6 and all("[+ --async-scheduling]" in line or "[- --async-scheduling]" in line
                                          for line in forced_lines)
    assert all(f["configuration"]["label"] for f in res["forced"])


def test_a_folder_of_one_server_prints_no_label(tmp_path, capsys):
    root = tmp_path / "one"
    for job in (PLAIN, BASE):
        shutil.copytree(DATA / job, root / job)
    assert main([str(root)]) == 0
    out = capsys.readouterr().out
    res = json.loads((root / "speedup_summary.json").read_text())
    assert [b["configuration"]["label"] for b in res["break_even"]] == ["", "", ""]
    assert "async" not in out and "mtbench T=0 C=1 k=3: break-even AL" in out
    m, _, _ = _by_hand(PLAIN, 1)
    assert res["break_even"][0]["break_even_al"] == pytest.approx(m, rel=1e-9)


def _conf(label):
    return {"fingerprint": {"": "aaaaaaaa", "+ --async-scheduling": "bbbbbbbb"}[label], "label": label}


def test_best_k_is_chosen_per_server_configuration():
    rows = [{"dataset": "mtbench", "temperature": 0.0, "concurrency": 4, "k": k, "output_tps": tps,
             "speedup": None, "beats_baseline": None, "configuration": _conf(label)}
            for k, tps, label in ((1, 100.0, ""), (3, 120.0, ""), (1, 150.0, "+ --async-scheduling"),
                                  (3, 110.0, "+ --async-scheduling"))]
    choices = {c.configuration["label"]: c.k for c in best_k_per_load(rows)}
    assert choices == {"": 3, "+ --async-scheduling": 1}  # pooled, k=1's 150 tok/s would be the one answer


def test_the_slo_answer_names_the_server_it_recommends():
    rows = [{"dataset": "mtbench", "temperature": 0.0, "concurrency": 4, "config": job, "k": 3,
             "configuration_label": label, "goodput_rps": g, "verdict": "met"}
            for job, label, g in ((PLAIN, "- --async-scheduling", 3.0), (ASYNC, "+ --async-scheduling", 4.0))]
    (group,) = slo.recommend(rows)
    assert sorted(c["label"] for c in group["configs"]) == ["k=3 [+ --async-scheduling]", "k=3 [- --async-scheduling]"]
    assert [r["label"] for r in group["recommendation"]] == ["k=3 [+ --async-scheduling]"]


def test_the_reports_rows_and_curves_name_their_server(analysed, tmp_path):
    main([str(analysed)])
    res = json.loads((analysed / "speedup_summary.json").read_text())
    html = speedup_section(res, tmp_path)
    # forced points: the E / (k c + 1) table does not apply, one line says why; one level per server: no check
    assert 'class="pvm"' not in html and "does not apply" in html
    assert "No configuration here ran two forced levels at one load" in html
    assert (tmp_path / "speedup_vs_concurrency.png").is_file()
    # the same points as a drafter's own: the predicted-vs-measured table, one row per point with its server
    real = speedup_section({**res, "points": [{**r, "forced_acceptance": None} for r in res["points"]]}, tmp_path)
    assert real.count("[+ --async-scheduling]") == 3 and real.count("[- --async-scheduling]") == 3


def test_the_results_tables_on_screen_say_which_server_each_job_is():
    buf = io.StringIO()
    print_results(load_results(DATA), Console(file=buf, width=300, color_system=None))
    text = " ".join(buf.getvalue().split())  # a table's title folds to the table's width
    titles = [t.split(" dataset ")[0] for t in text.split("job ")[1:]]
    assert len(titles) == 3
    assert titles[0].startswith(f"{PLAIN}:") and titles[0].endswith("[- --async-scheduling]")
    assert titles[1].startswith(f"{ASYNC}:") and titles[1].endswith("[+ --async-scheduling]")
    assert "[" not in titles[2]  # the baseline: the folder's only server without speculation
