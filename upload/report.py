"""Everything the user sees: refusal list, plan table, progress bar, summary."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)
from rich.table import Table
from rich.text import Text

from upload.destination import Destination
from upload.upload_plan import Action, Plan, Refusal
from upload.transfer import RunResult


def print_refused(console: Console, refused: list[Refusal]) -> None:
    if not refused:
        return
    table = Table(title=f"Refused runs ({len(refused)})", title_justify="left", show_lines=False)
    table.add_column("run", overflow="fold")
    table.add_column("reason", overflow="fold")
    for r in refused:
        for n, reason in enumerate(r.reasons):
            table.add_row(Text(r.label if n == 0 else ""), Text(reason))
    console.print(table)


def print_outside(console: Console, outside: list[str]) -> None:
    if outside:
        sample = ", ".join(outside[:3]) + (", ..." if len(outside) > 3 else "")
        console.print(Text(
            f"Not uploaded: {len(outside)} file(s) outside any run directory ({sample}); "
            "only run directories are uploaded."
        ))


def _action_text(rp) -> str:
    if rp.action is None:
        return "upload (destination not checked)"
    if rp.action is Action.SKIP:
        return "skip: already complete"
    if rp.action is Action.RESUME:
        return f"resume: {rp.kept} of {len(rp.digests)} already there"
    return "upload"


def print_plan(console: Console, plan: Plan, dest: Destination) -> None:
    table = Table(title="Upload plan", title_justify="left")
    table.add_column("run", overflow="fold")
    table.add_column("files", justify="right")
    table.add_column("bytes", justify="right")
    table.add_column("destination", overflow="fold")
    table.add_column("action", overflow="fold")
    for rp in plan.runs:
        table.add_row(Text(rp.run.label), str(len(rp.digests)), f"{rp.total_bytes:,}",
                      Text(dest.url(rp.prefix) + "/"), _action_text(rp))
    if plan.runs:
        table.add_section()
        table.add_row(
            "total", str(sum(len(r.digests) for r in plan.runs)), f"{sum(r.total_bytes for r in plan.runs):,}", "", ""
        )
    console.print(table)


class ProgressBar:
    """One rich progress bar (bytes, files, speed) fed from the transfer threads."""

    def __init__(self, console: Console, files: int, total_bytes: int):
        self._progress = Progress(
            TextColumn("[bold]uploading"),
            BarColumn(),
            TextColumn("{task.fields[files]}/{task.fields[total_files]} files"),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeElapsedColumn(),
            console=console,
        )
        self._task = self._progress.add_task("upload", total=total_bytes, files=0, total_files=files)
        self._files = 0
        self._lock = threading.Lock()

    def __enter__(self) -> "ProgressBar":
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def add_bytes(self, n: int) -> None:
        self._progress.advance(self._task, n)

    def file_done(self) -> None:
        with self._lock:
            self._files += 1
            self._progress.update(self._task, files=self._files)


@dataclass
class Counts:
    uploaded: int = 0
    skipped: int = 0
    refused: int = 0
    failed: int = 0

    def line(self) -> str:
        return f"{self.uploaded} uploaded, {self.skipped} skipped, {self.refused} refused, {self.failed} failed"

    @property
    def exit_code(self) -> int:
        return 1 if self.refused or self.failed else 0


def print_failures(console: Console, results: list[RunResult]) -> None:
    failed = [r for r in results if not r.ok]
    if not failed:
        return
    table = Table(title=f"Failed runs ({len(failed)}): rerun the same command to complete them", title_justify="left")
    table.add_column("run", overflow="fold")
    table.add_column("error", overflow="fold")
    for r in failed:
        table.add_row(Text(r.plan.run.label), Text(r.error or ""))
    console.print(table)
