"""Progress while a command runs: a Rich bar on a terminal, plain lines on stderr elsewhere."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator
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
    own, and its work is counted from there).

    The rate, and the time left from it, count from a stage's first report: what came before it
    (exporting an encoder, running the source query) is not work at the rate of the rows, and
    counted in it made a minute-long job read "about 1:07:29 left". A verb that knows when a
    stage's work starts reports ``(0, total, stage)`` then; otherwise the first line has no
    estimate until a second report gives a rate (a stage done in one report gives its rate over
    its whole run).
    """

    PACE_S = 10.0  # a line at least this far apart, plus the first and the last

    def __init__(self, label: str, unit: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.unit = label, unit
        self.clock = clock
        self.started = clock()
        self.done = 0
        self.counted_from: tuple[float, int] | None = None  # (time, done) the rate counts from
        self.printed: float | None = None
        self.stage: str | None = None  # the last stage announced

    def __call__(self, done: int, total: int | None, stage: str | None = None) -> None:
        now = self.clock()
        if stage is not None and stage != self.stage:
            self.label = self.stage = stage
            self.started, self.done, self.printed, self.counted_from = now, 0, None, None
            print(f"{stage} ...", file=sys.stderr, flush=True)
            if done == 0:
                self.counted_from = (now, 0)  # the stage's work starts now
                return
        if self.counted_from is None or done == 0 == self.done:  # "starting now": count from here
            self.counted_from = (now, done)
        self.done = done
        finished = total is not None and self.done >= total
        if self.printed is not None and now - self.printed < self.PACE_S and not finished:
            return
        self.printed = now
        since, done_then = self.counted_from
        rate = (self.done - done_then) / (now - since) if now > since else None
        if rate is None and finished:
            rate = self.done / max(now - self.started, 1e-9)
        line = f"{self.label}: {self.done:,}"
        if total:
            line += f" of {total:,} {self.unit} ({100 * self.done / total:.0f} %)"
            if rate and not finished:
                line += f", about {timedelta(seconds=round((total - self.done) / rate))} left"
        elif total == 0:
            line += f" of 0 {self.unit}: nothing to do"
        else:
            line += f" {self.unit}"
        if rate:
            line += f", {readable_rate(rate, self.unit)}"
        print(line, file=sys.stderr, flush=True)

    def task(self, label: str, unit: str) -> ProgressLines:
        """Another step of the same command, counted on its own."""
        return ProgressLines(label, unit, self.clock)


def readable_rate(rate: float, unit: str) -> str:
    """``695.2 rows/s``, or, under one a second, the seconds each takes: ``50.0 s/epoch``
    (0.0 epochs/s says nothing)."""
    if rate >= 1:
        return f"{rate:,.1f} {unit}/s"
    one = unit[:-1] if unit.endswith("s") else unit
    return f"{1 / rate:,.1f} s/{one}"


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
