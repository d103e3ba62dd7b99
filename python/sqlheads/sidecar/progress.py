"""Contract 2: how the sidecar records a job's progress.

A work function receives a :class:`~sqlheads.engine.progress.Progress` (the protocol every
verb and engine loop reports through) and calls it as ``progress(done_so_far, total_or_None,
stage_or_None)``; here the call raises :class:`~sqlheads.errors.JobCancelledError` once the
job must stop (let it propagate). :class:`RecordedProgress` records progress in the job row
(throttled), draws it (:class:`JobBar` on a terminal, :class:`JobLines` elsewhere), and stops
a cancelled job.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from sqlheads.errors import JobCancelledError, JobClaimLostError
from sqlheads.store.jobs import Job, JobQueue

# Progress reaches the job row at most this often: a bar may redraw for every batch, the
# database hears of it once a second.
RECORD_EVERY_SECONDS = 1.0


class JobDrawing(Protocol):
    """How a job's progress is drawn: told every report with the stage it is in."""

    def __call__(self, done: int, total: int | None, stage: str | None) -> None: ...

    def close(self) -> None: ...


class RecordedProgress:
    """A job's :class:`~sqlheads.engine.progress.Progress`: records, draws, and stops a
    cancelled job."""

    def __init__(
        self, queue: JobQueue, job: Job, worker: str, stop: threading.Event, bar: JobDrawing
    ) -> None:
        self.queue, self.job, self.worker, self.stop, self.bar = queue, job, worker, stop, bar
        self.stage: str | None = None
        self.last: tuple[int, int | None] | None = None  # (done, total) last reported
        self._recorded = 0.0
        self.reason = "its cancel was requested"

    def check(self) -> None:
        """Raise :class:`JobCancelledError` once the job must stop."""
        if self.stop.is_set():
            raise JobCancelledError(
                f"job {self.job.job_id} stopped: {self.reason}; request it again to redo it"
            )

    def __call__(self, done: int, total: int | None, stage: str | None = None) -> None:
        self.check()
        self.last = (int(done), None if total is None else int(total))
        changed = stage is not None and stage != self.stage
        if changed:
            self.stage = stage
        self.bar(done, total, self.stage)
        now = time.monotonic()
        if changed or now - self._recorded >= RECORD_EVERY_SECONDS:
            self._recorded = now
            try:
                if self.queue.progress(self.job.job_id, self.worker, done, total, stage):
                    self.stop.set()
            except JobClaimLostError:
                self.reason = "another sidecar took its claim over"
                self.stop.set()
        self.check()


class JobLines:
    """A job's progress as plain lines (a log file, a container's output): one per stage, and
    one at most every 10 seconds."""

    def __init__(self, console: Console, label: str) -> None:
        self.console, self.label, self._shown = console, label, 0.0
        self._stage: str | None = None

    def __call__(self, done: int, total: int | None, stage: str | None) -> None:
        now = time.monotonic()
        if now - self._shown >= 10 or stage != self._stage:
            self._shown, self._stage = now, stage
            of = f"/{total}" if total else ""
            self.console.print(f"{self.label}: {stage or ''} {done}{of}", highlight=False)

    def close(self) -> None:
        pass


class JobBar:
    """A Rich progress bar for one job on a terminal."""

    def __init__(self, console: Console, label: str) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self.label = label
        self.progress.start()
        self.task = self.progress.add_task(label, total=None)

    def __call__(self, done: int, total: int | None, stage: str | None) -> None:
        description = f"{self.label} {stage}" if stage else self.label
        self.progress.update(self.task, completed=done, total=total, description=description)

    def close(self) -> None:
        self.progress.stop()
