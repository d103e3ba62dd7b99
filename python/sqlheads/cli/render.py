"""Progress while a command runs: a Rich bar on a terminal, plain lines on stderr elsewhere."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from rich.logging import RichHandler
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)

from sqlheads.cli.app import console, options


class ProgressLines:
    """Progress as plain lines on stderr at a steady pace, for logs, pipes and schedulers: a
    :class:`~sqlheads.engine.progress.Progress` (running totals; a new stage is a line of its
    own, and its work is counted from there)."""

    PACE_S = 10.0  # a line at least this far apart, plus the first and the last

    def __init__(self, label: str, unit: str) -> None:
        self.label, self.unit = label, unit
        self.done = 0
        self.started = time.monotonic()
        self.printed: float | None = None
        self.stage: str | None = None  # the last stage announced

    def __call__(self, done: int, total: int | None, stage: str | None = None) -> None:
        now = time.monotonic()
        if stage is not None and stage != self.stage:
            self.label = self.stage = stage
            self.done, self.printed = 0, None
            print(f"{stage} ...", file=sys.stderr, flush=True)
            if done == 0:
                self.started = now  # the stage's work starts now
                return
        if done == 0 and self.done == 0:  # "starting now": the rate counts from here
            self.started = now
        self.done = done
        finished = total is not None and self.done >= total
        if self.printed is not None and now - self.printed < self.PACE_S and not finished:
            return
        self.printed = now
        rate = self.done / max(now - self.started, 1e-9)
        line = f"{self.label}: {self.done:,}"
        if total:
            line += f" of {total:,} {self.unit} ({100 * self.done / total:.0f} %)"
            if rate and not finished:
                line += f", about {timedelta(seconds=round((total - self.done) / rate))} left"
        else:
            line += f" {self.unit}"
        print(f"{line}, {rate:,.1f} {self.unit}/s", file=sys.stderr, flush=True)

    def task(self, label: str, unit: str) -> ProgressLines:
        """Another step of the same command, counted on its own."""
        return ProgressLines(label, unit)


class ProgressBar:
    """A Rich progress bar on a terminal, a :class:`~sqlheads.engine.progress.Progress`;
    Python warnings print above it, not into it."""

    def __init__(self, bar: Progress, label: str, unit: str) -> None:
        self.bar = bar
        self.task_id = bar.add_task(label, total=None, unit=unit)

    def __call__(self, done: int, total: int | None, stage: str | None = None) -> None:
        described = {} if stage is None else {"description": stage}
        self.bar.update(self.task_id, completed=done, total=total, **described)

    def task(self, label: str, unit: str) -> ProgressBar:
        """Another step of the same command: a second bar under the first."""
        return ProgressBar(self.bar, label, unit)


@contextmanager
def showing_progress(
    label: str, unit: str = "rows"
) -> Iterator[ProgressLines | ProgressBar | None]:
    """A bar on a terminal; plain lines on stderr when it is not one (under --json too, since
    stdout keeps the one JSON object); nothing under --json on a terminal."""
    if not sys.stderr.isatty():
        yield ProgressLines(label, unit)
        return
    if options.json:
        yield None
        return
    # onnxruntime's quantiser warns through the root logger while the bar is drawn
    handler = RichHandler(console=console, show_time=False, show_path=False)
    logging.getLogger().addHandler(handler)
    try:
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TimeRemainingColumn(),
            console=console,
        ) as bar:
            yield ProgressBar(bar, label, unit)
    finally:
        logging.getLogger().removeHandler(handler)
