"""The benchmark's progress display: one line (point i/N, requests done, elapsed) on stderr and
in progress.json, and the two watches that feed it while AIPerf runs: one over a run with a
profiling phase per point and repeat, one over a run without phases."""
from __future__ import annotations

import sys
import time
from typing import Callable, Optional

from launcher.bench import aiperf_runner as ar
from launcher.results.status import JobProgress, write_progress


class Progress:
    """A progress line (point i/N, requests done, elapsed) on stderr and in progress.json."""

    def __init__(self, save_dir, total: int, on_point_done: Optional[Callable[[], None]] = None):
        self.save_dir, self.total, self.done, self.start = save_dir, total, 0, time.time()
        self.current = ""
        self.running: list[str] = []  # point folders AIPerf is measuring now
        self._last = ""
        self._on_point_done = on_point_done

    def point_done(self, point_dir: str, status: str, reason: Optional[str]) -> None:
        """One point ended (its outcome is final): summary.json is rewritten first, so
        a job killed right after still has this point's status and reason."""
        self.done += 1
        self.running = [r for r in self.running if r != point_dir]
        if self._on_point_done is not None:
            self._on_point_done()
        self.update(f"{point_dir}: {status}" + (f" ({reason})" if reason else ""))

    def update(self, current: str) -> None:
        self.current = current
        line = f"[bench {time.time() - self.start:6.0f}s] {self.done}/{self.total} points done | {current}"
        if line.split("|", 1)[1] != self._last.split("|", 1)[-1]:
            print(line, file=sys.stderr, flush=True)
        self._last = line
        write_progress(self.save_dir, JobProgress(points_total=self.total, points_done=self.done, current=current,
                                                  running=list(self.running),
                                                  elapsed_s=round(time.time() - self.start, 1)))


def _turns(questions: list) -> int:
    return sum(len(q.turns) for q in questions)


class RunWatch:
    """progress.json while AIPerf runs points without phases: the points and the requests done."""
    on_phase = None

    def __init__(self, progress: Progress, concurrencies: list[int], questions: list, label: str):
        self.progress, self.n_turns = progress, _turns(questions)
        first = progress.done + 1
        self.label = f"{label} C={','.join(map(str, concurrencies))}"
        self.span = f"point {first}" if len(concurrencies) == 1 else \
            f"points {first}-{first + len(concurrencies) - 1}"

    @property
    def start_line(self) -> str:
        return f"{self.span}/{self.progress.total} {self.label}: starting AIPerf"

    def on_progress(self, done_in_phase: int) -> None:
        self.progress.update(f"{self.span}/{self.progress.total} {self.label}: {done_in_phase}/{self.n_turns} requests")


class PhasesWatch:
    """progress.json while AIPerf runs a group's phases: which point (and repeat) and its requests.
    ``plan``: launcher.bench.aiperf_group's GroupPlan (its phases, their points, the warm-up)."""

    def __init__(self, progress: Progress, outcomes: list, questions: list, plan, label: str):
        self.progress, self.outcomes, self.plan, self.label = progress, outcomes, plan, label
        self.n_turns = _turns(questions)
        # a point's expected requests: its share of the dataset's turns (sweep.num_requests_per_concurrency)
        self.turns_of = {o.concurrency: round(self.n_turns * ar.phase_sessions(plan.per_c, o.concurrency,
                                                                               len(questions))
                                              / max(1, len(questions))) for o in outcomes}
        self.first = progress.done + 1
        self.i, self.name = 0, plan.phases[0].name

    @property
    def start_line(self) -> str:
        return (f"point {self.first}/{self.progress.total} {self.label} C={self.outcomes[0].concurrency}: starting "
                f"AIPerf ({len(self.outcomes)} points in one process)")

    def on_phase(self, name: str) -> None:  # AIPerf logs "Phase <name> (profiling) started"
        if name.startswith(ar.GAP_PREFIX):  # the idle phase between two points: the last one's line stays
            return
        self.i = self.plan.owner.get(name, self.i)
        self.name = name
        self.on_progress(0)

    def on_progress(self, done_in_phase: int) -> None:
        o, warm, repeats = self.outcomes[self.i], self.plan.warm, self.plan.repeats
        rep = f" repeat {self.name.rsplit('_r', 1)[-1]}/{repeats}" if repeats > 1 else ""
        if warm is not None and self.name == warm.name:
            self.progress.update(f"{self.label}: warm-up at C={warm.concurrency}: {done_in_phase}/{self.n_turns} "
                                 "requests")
            return
        self.progress.update(f"point {self.first + self.i}/{self.progress.total} {self.label} C={o.concurrency}"
                             f"{rep}: {done_in_phase}/{self.turns_of[o.concurrency]} requests")
