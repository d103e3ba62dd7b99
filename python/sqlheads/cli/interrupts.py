"""Ctrl-C in a long command: what it kept, and what to run to go on (it exits with status 130).

A command hands :func:`sqlheads.cli.app.run` a ``kept`` function; ``run`` calls it once the
interrupt has closed the progress display, and prints its sentence. The sentences are made
from what the command heard (:class:`Heard`: the last report of each stage; every verb reports
after the work it reports has been committed, where it commits in steps) and from the store as
the interrupt left it (:class:`NewVersion`: whether the version was written).

Ctrl-C is also remembered while a command runs (:func:`remembered`): one lost on its way stops
the command at its next report all the same (:class:`Heard`)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from sqlheads.store.repository import Store

_pressed = False  # Ctrl-C came while the current command ran (set by its signal handler)


@contextmanager
def remembered() -> Iterator[None]:
    """Ctrl-C while the block runs raises KeyboardInterrupt as Python's own handler does, and
    is remembered: one that is lost on its way (in CI, one that came while torch and
    scikit-learn were being imported was, and the training ran on to exit 0) stops the command
    at its next progress report instead (:func:`stop_if_pressed`). Where Ctrl-C is ignored (a
    run in the background inherits that) or handled by someone else, nothing changes."""
    global _pressed
    _pressed = False
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return

    def pressed(number: int, frame: FrameType | None) -> None:
        global _pressed
        _pressed = True
        signal.default_int_handler(number, frame)

    signal.signal(signal.SIGINT, pressed)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def stop_if_pressed() -> None:
    """Raise KeyboardInterrupt if Ctrl-C came during this command and was swallowed on its way."""
    if _pressed:
        raise KeyboardInterrupt


class Heard:
    """A :class:`~sqlheads.engine.progress.Progress` that passes every report on to the
    display (a bar, lines, or nothing) and keeps the last report of each stage."""

    def __init__(self, display: Any | None = None) -> None:
        self.display = display
        self.stage: str | None = None
        self.last: dict[str | None, tuple[int, int | None]] = {}

    def __call__(self, done: int, total: int | None, stage: str | None = None) -> None:
        if stage is not None:
            self.stage = stage
        self.last[self.stage] = (done, total)
        if self.display is not None:
            self.display(done, total, stage)
        stop_if_pressed()  # after the report: the work it reports is committed

    def showing(self, display: Any | None) -> Heard:
        """This tally, drawn on ``display`` (the command's, once it is open)."""
        self.display = display
        return self

    def task(self, label: str, unit: str) -> Heard:
        """Another step of the same command, counted and drawn on its own."""
        return Heard(None if self.display is None else self.display.task(label, unit))

    def of(self, stage: str | None = None) -> tuple[int, int | None] | None:
        """The last ``(done, total)`` of ``stage`` (default: the current one), None if it
        reported nothing."""
        return self.last.get(self.stage if stage is None else stage)


def so_far(reported: tuple[int, int | None], unit: str) -> str:
    """``1,000 of 2,000 rows``, or ``1,000 rows`` without a total."""
    done, total = reported
    return f"{done:,}" + ("" if total is None else f" of {total:,}") + f" {unit}"


def were(reported: tuple[int, int | None] | None, unit: str) -> str:
    """``1,000 of 2,000 rows were`` (``1 row was``), from a stage's last report (none: 0)."""
    reported = reported or (0, None)
    one = reported[0] == 1
    return f"{so_far(reported, unit[:-1] if one else unit)} {'was' if one else 'were'}"


class NewVersion:
    """Whether a command that writes a version of ``head`` (train, distill) wrote it before the
    interrupt: the head's newest version before it started (:meth:`note`) against the newest
    after."""

    def __init__(self, url: str, head: str) -> None:
        self.url, self.head = url, head
        self.before: int | None = None

    def note(self, store: Store) -> Store:
        self.before = newest_version(store, self.head)
        return store

    def said(self) -> str:
        """What the store holds now, and what to run."""
        now = newest_version(Store.from_url(self.url), self.head)
        if self.before is not None and now > self.before:
            return (
                f"version {now} of head {self.head} was written before the interrupt "
                f"(`sqlheads models --head {self.head}`): nothing to run again"
            )
        return (
            f"no version of head {self.head} was written (a version is written whole, once "
            "its training ends, or not at all); run the same command again to start over"
        )


def newest_version(store: Store, head: str) -> int:
    """The head's newest version in ``store``, 0 if it has none."""
    versions = store.read_view("model_summary", head=head)["version"]
    return int(versions.max()) if len(versions) else 0
